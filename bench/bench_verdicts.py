"""How often the diagnosis names the cause a run was built to have: a labelled corpus, its
per-label confusion matrices per vantage point, and its agreement with the kernel's own account.

    sudo .venv/bin/python bench/bench_verdicts.py [--kernel host|uml] [--offloads] [--grid quick|full]
                                                  [--labels L1,L2] [--keep DIR] [--out NAME]
    sudo .venv/bin/python bench/bench_verdicts.py --rediagnose bench/results/verdicts.json

Each cause of :data:`CORPUS` is built on a real path: every combination of its round trips,
line rates and congestion controls (``--grid quick``: the first round trip and rate of each,
both congestion controls). Every configuration runs twice, captured at sender and receiver
(``capture=both``), then at the router, and each capture is diagnosed as a user's would be, from
the pcap alone (``tcplab diagnose FILE``); the sender's also with what the run knows (its ``ss``
samples and socket settings), as the course does. A run the machine disturbed
(``observe.health``), or one where the cause did not hold (``Cause.holds``), is left out of the
matrix and counted.

The kernel is the second ground truth: each row carries the sender's own chrono accounting from
its ``ss`` samples (tcp_info's busy, rwnd_limited and sndbuf_limited times, read through
inet_diag) and the limit they name (:func:`kernel_limit`), and the kernel's smoothed round trip
over the path's, which says whether a standing queue was there (:func:`kernel_queue`): a
path-bandwidth run is built as ``path-bandwidth+standing-queue`` where it was, and its verdict is
right only with the qualifier then, and only without it otherwise.

``--keep DIR`` keeps the runs (their captures and records); ``--rediagnose RESULT …`` diagnoses
the kept runs of earlier results again, without measuring, as one result (a cause measured
again in a later one replaces its earlier rows).

Writes ``bench/results/verdicts[-uml][-offloads].json`` (or ``--out NAME``): one row per
diagnosed capture and, per vantage point, the share right, wrong and undetermined, the
confusion matrix (built label → verdict) and the agreement with the kernel.
``bench/verdict_tables.py`` prints the tables of every result file for the docs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from common import RESULTS, run_alone, save, table

from tcplab.analysis import diagnose, read_packets
from tcplab.analysis.metrics import limited_shares
from tcplab.analysis.theory import max_goodput
from tcplab.experiment import Experiment, ExperimentFailed
from tcplab.lab import NetPath, PathSpec
from tcplab.observe import ObserveSpec
from tcplab.observe.health import reasons_of
from tcplab.cases.trial import Trial
from tcplab.runs import Run
from tcplab.traffic import AppResult, Bulk, Reqresp, Slowreader, Workload

UNDETERMINED = "undetermined"
VANTAGES = ("sender", "sender+run", "receiver", "router")
#: A verdict's qualifier joins its label after this sign in the matrices: path-bandwidth+standing-queue.
QUALIFIED = "+"


def _below_line(goodput: float, line: float) -> bool:
    return goodput < 0.7 * line


def _at_line(goodput: float, line: float) -> bool:
    return goodput >= 0.8 * line


@dataclass(frozen=True)
class Cause:
    """A label and how to build it: the workload and the path settings, from rtt (s), rate (bit/s), cc.
    ``holds(goodput, line)`` says whether a run really had that limit (a buffer that kept the
    transfer well below the line, a transfer that filled it); a run where it did not is no
    sample of the label and is counted apart. ``name`` tells causes with one label apart."""

    label: str
    workload: Callable[[float, float, str], Any]
    path: Callable[[float, float, str], dict] = lambda rtt, rate, cc: {}
    rtts_ms: tuple[int, ...] = (20, 40)
    rates_mbit: tuple[int, ...] = (50, 100)
    ccs: tuple[str, ...] = ("cubic", "bbr")
    holds: Callable[[float, float], bool] = lambda goodput, line: True
    name: str = ""
    #: Run the workload once uncaptured first (the kernel keeps a route's ssthresh for a
    #: destination only once a connection to it has closed: tcp_metrics).
    warmup: bool = False

    @property
    def key(self) -> str:
        return self.name or self.label


def _line_seconds(rate: float, seconds: float) -> int:
    return int(rate * seconds / 8)


#: The causes, each with the settings that make it the limit on every combination it runs.
CORPUS = (
    # 8 KB: even cubic, which appends past the budget to an unfinished buffer (case 01), stays
    # far below the line at these round trips.
    Cause("sender-buffer-limited", lambda rtt, rate, cc: Bulk(size="2MB", sndbuf="8KB", cc=cc),
          rtts_ms=(40, 80), holds=_below_line),
    Cause("receiver-window-limited", lambda rtt, rate, cc: Bulk(size="1MB", rcvbuf="8KB", cc=cc), holds=_below_line),
    Cause("path-bandwidth", lambda rtt, rate, cc: Bulk(size=_line_seconds(rate, 2.0), cc=cc),
          rtts_ms=(10, 20), rates_mbit=(10, 20), holds=_at_line),
    # A deep FIFO (256 KB: 105 ms at 20 Mbit/s, 42 ms at 50) that a loss-based sender keeps full.
    Cause("path-bandwidth", lambda rtt, rate, cc: Bulk(size=_line_seconds(rate, 3.0), cc=cc),
          lambda rtt, rate, cc: {"queue": "256KB"}, rtts_ms=(20, 40), rates_mbit=(20, 50), holds=_at_line,
          name="standing-queue"),
    Cause("congestion-loss", lambda rtt, rate, cc: Bulk(size="4MB", cc=cc), lambda rtt, rate, cc: {"loss": "2%"}),
    # A fixed 64 KB receive buffer: an autotuned one (UML's) may take the whole transfer unread.
    # (Behind it at 40 ms the rest of the transfer takes ~1.5 s: bbr's window was closed for 47 %.)
    Cause("zero-window", lambda rtt, rate, cc: Slowreader(size="2MB", rcvbuf="64KB", pause_after="256KB",
                                                          pause_for="2s", cc=cc)),
    Cause("nagle-delayed-ack", lambda rtt, rate, cc: Reqresp(requests=20, request_size=1000, response_size=100,
                                                             split=True, cc=cc), rtts_ms=(2, 20)),
    Cause("application-limited", lambda rtt, rate, cc: Reqresp(requests=20, request_size=1000, response_size=100,
                                                               nodelay=True, cc=cc), rtts_ms=(2, 20)),
    # A producer writing 16 KB every 10 ms (13.1 Mbit/s) behind an autotuned buffer: its pace, not
    # the round trip, sets the rate, and data stays in flight between writes.
    Cause("application-limited", lambda rtt, rate, cc: Bulk(size="1MB", write_size="16KB", write_rate="13107200bit",
                                                            cc=cc), holds=_below_line, name="paced-application"),
    Cause("window-scaling-absent", lambda rtt, rate, cc: Bulk(size=_line_seconds(rate, 1.0), cc=cc),
          lambda rtt, rate, cc: {"sysctls": {"tcp_window_scaling": 0}}, rtts_ms=(40, 80), holds=_below_line),
    Cause("slow-start", lambda rtt, rate, cc: Bulk(size="150KB", cc=cc), rtts_ms=(40, 80)),
    # Slow start ends at 10 segments (ip route … ssthresh lock 10, which the kernel reads only with
    # tcp_no_ssthresh_metrics_save = 0): congestion avoidance opens the window a segment per round
    # trip, far from a 50-100 Mbit/s line. bbr ignores ssthresh: reno.
    Cause("cwnd-limited", lambda rtt, rate, cc: Bulk(size="1MB", cc=cc),
          lambda rtt, rate, cc: {"ssthresh": 10, "sysctls": {"tcp_no_ssthresh_metrics_save": 0}},
          rtts_ms=(40, 80), ccs=("cubic", "reno"), holds=_below_line, warmup=True),
    # The receiver's host stops answering after 256 KB; the sender resends into the silence until
    # its kernel gives up (tcp_retries2 = 3: about 3 s).
    Cause("peer-unresponsive", lambda rtt, rate, cc: Bulk(size="4MB", silent_after="256KB", pause_for="8s", cc=cc),
          lambda rtt, rate, cc: {"sysctls": {"tcp_retries2": 3}}),
)


def verdict_of(pcap: Path, **with_run: Any) -> tuple[str, dict]:
    """The verdict as the matrices write it (label, ``+qualifier`` each), and its evidence's
    standing queue where it names one."""
    try:
        d = diagnose(read_packets(pcap), **with_run)
    except Exception as exc:  # noqa: BLE001 - a failure is a result of this benchmark, kept as such
        return f"error: {type(exc).__name__}", {}
    queue = {k: d.evidence[k] for k in ("queue_delay_s", "queue_bytes") if k in d.evidence}
    return QUALIFIED.join([d.label, *d.qualifiers]), queue


def right(verdict: str, built: str) -> bool:
    """The verdict's label is the built one, with the qualifiers the run had, no more, no fewer."""
    return verdict == built


def _vantage(pcap: Path, sender: str) -> str:
    role = pcap.name.split("-", 1)[0]
    return "router" if role == "router" else ("sender" if role == sender else "receiver")


def _captures(run: Run, sender: str) -> dict[str, Path]:
    """The run's captures by vantage point; of the router's two, the side toward the sender
    (what the bottleneck receives), which the capture lists first."""
    found: dict[str, Path] = {}
    for pcap in run.pcaps:
        found.setdefault(_vantage(pcap, sender), pcap)
    return found


# --------------------------------------------------------------------------- the kernel's account

#: A buffer the kernel names for at least this share of its busy time is its limit.
KERNEL_SHARE = 0.3
#: A sender busy (data unacknowledged or unsent) less than this share of the connection's life
#: waited for its application.
KERNEL_BUSY = 0.5
#: Each verdict and the limit the kernel's chrono accounting would name for it: its send
#: buffer, the receive window, no data to send ("idle"), or busy with neither buffer full
#: (the congestion window, the path, losses: tcp_info does not tell these apart).
KERNEL_CLASS = {
    "sender-buffer-limited": "sndbuf", "receiver-window-limited": "rwnd", "window-scaling-absent": "rwnd",
    "zero-window": "rwnd", "application-limited": "idle", "nagle-delayed-ack": "idle", "cwnd-limited": "busy",
    "path-bandwidth": "busy", "congestion-loss": "busy", "slow-start": "busy", "peer-unresponsive": "busy",
}


def sender_socket(run: Run) -> Any:
    """The ``ss`` samples of the sender's data socket (the one the kernel kept busy longest)."""
    tel = run.telemetry
    if tel is None or tel.empty or "busy_s" not in tel:
        return None
    mine = tel[tel["side"] == Workload.of_run(run).sender()]
    if mine.empty or not mine["busy_s"].notna().any():
        return None
    keys = ["src", "sport", "dst", "dport"]
    busiest = mine.groupby(keys)["busy_s"].max().idxmax()
    pick = mine.set_index(keys).index == busiest
    return mine[pick].sort_values("time")


def kernel_limit(run: Run) -> dict[str, Any]:
    """The sender's chrono times (seconds) and shares, and the limit they name (:data:`KERNEL_CLASS`'s values)."""
    samples = sender_socket(run)
    if samples is None:
        return {"kernel_limit": None}
    shares = limited_shares(samples)
    life = float(samples["time"].max() - samples["time"].min())
    busy = shares["busy_s"]
    out = {"kernel_busy_s": busy, "kernel_life_s": life,
           "kernel_busy_share": busy / life if life > 0 else math.nan,
           "kernel_rwnd_share": _finite(shares["rwnd_limited_share"]),
           "kernel_sndbuf_share": _finite(shares["sndbuf_limited_share"])}
    if out["kernel_sndbuf_share"] >= KERNEL_SHARE:
        limit = "sndbuf"
    elif out["kernel_rwnd_share"] >= KERNEL_SHARE:
        limit = "rwnd"
    elif out["kernel_busy_share"] < KERNEL_BUSY:
        limit = "idle"
    else:
        limit = "busy"
    return {**out, "kernel_limit": limit}


def kernel_queue(run: Run) -> dict[str, Any]:
    """The sender's smoothed round trip (median of its samples) over the path's: a standing queue
    when it exceeds the path's by half again and 2 ms (the diagnosis's own rule of flat)."""
    samples = sender_socket(run)
    rtt_path = 2 * PathSpec.of_run(run).one_way_delay
    if samples is None or "rtt" not in samples or not samples["rtt"].notna().any():
        return {"kernel_srtt_s": None, "kernel_standing_queue": None}
    srtt = float(samples["rtt"].median())
    return {"kernel_srtt_s": srtt, "kernel_standing_queue": bool(srtt > 1.5 * rtt_path + 0.002)}


def _finite(x: float) -> float:
    return float(x) if math.isfinite(x) else 0.0


# --------------------------------------------------------------------------- measuring

def diagnosed(run: Run, facts: dict) -> list[dict]:
    """One row per capture of ``run`` (and the sender's once more with what the run knows)."""
    rows = []
    queue = kernel_queue(run)
    # A path-bandwidth run's queue stood where the kernel's own round trip says so: the qualifier's truth.
    label = facts["label"].split(QUALIFIED)[0]
    if label == "path-bandwidth" and queue["kernel_standing_queue"]:
        label += QUALIFIED + "standing-queue"
    facts = {**facts, **kernel_limit(run), **queue, "label": label, "run": str(run.dir)}
    trial = Trial("bench-verdicts", run)  # the run's typed views: its spec, workload, sockets
    for vantage, pcap in _captures(run, trial.sender).items():
        verdict, queue = verdict_of(pcap)
        rows.append({**facts, "vantage": vantage, "verdict": verdict, **queue})
        if vantage == "sender":
            verdict, queue = verdict_of(pcap, telemetry=run.telemetry, context=trial.context())
            rows.append({**facts, "vantage": "sender+run", "verdict": verdict, **queue})
    return rows


def measure(causes, runs_dir: Path, grid: str, kernel: str, offloads: bool) -> list[dict]:
    rows = []
    for cause in causes:
        rtts = cause.rtts_ms[:1] if grid == "quick" else cause.rtts_ms
        rates = cause.rates_mbit[:1] if grid == "quick" else cause.rates_mbit
        for rtt_ms, rate_mbit, cc in itertools.product(rtts, rates, cause.ccs):
            rtt, rate = rtt_ms / 1e3, rate_mbit * 1e6
            workload = cause.workload(rtt, rate, cc)
            spec = PathSpec(rtt=f"{rtt_ms}ms", rate=f"{rate_mbit}mbit", cc=cc, kernel=kernel, offloads=offloads,
                            **cause.path(rtt, rate, cc))
            setting = {"cause": cause.key, "label": cause.label, "rtt_ms": rtt_ms, "rate_mbit": rate_mbit, "cc": cc,
                       "kernel": kernel, "offloads": offloads}
            these: list[dict] = []
            with NetPath(spec) as path:
                if cause.warmup:
                    Experiment(path, workload, case="bench-verdicts", runs_dir=runs_dir,
                               observe=ObserveSpec(capture="none", telemetry=False, tracepoints=False)).run()
                for capture in ("both", "router"):
                    observe = ObserveSpec(capture=capture, snaplen=96, tracepoints=False)
                    try:
                        run = Experiment(path, workload, case="bench-verdicts", runs_dir=runs_dir, observe=observe).run()
                    except ExperimentFailed as exc:
                        these.append({**setting, "capture": capture, "vantage": None, "verdict": f"run failed: {exc}"})
                        continue
                    goodput = float(AppResult.of_run(run).goodput_bps or 0.0)
                    these += diagnosed(run, {**setting, "capture": capture, "disturbed": reasons_of(run),
                                             "goodput_bps": goodput, "built": cause.holds(goodput, max_goodput(rate))})
            rows.extend(these)
            print(f"{cause.key:<24} {rtt_ms:>3} ms {rate_mbit:>4} Mbit/s {cc:<5} "
                  + " ".join(f"{r['vantage']}={r['verdict']}" + ("*" if r.get("disturbed") else "")
                             + ("" if r.get("built", True) else "(not built)") for r in these)
                  + f" kernel={these[0].get('kernel_limit') if these else None}", flush=True)
    return rows


def rediagnose(rows: list[dict]) -> list[dict]:
    """The rows of kept runs diagnosed again (a row whose run is gone keeps its verdict)."""
    out, done = [], {}
    for row in rows:
        where = row.get("run")
        if not where or not Path(where).is_dir():
            out.append(row)
            continue
        if where not in done:
            facts = {k: v for k, v in row.items() if k not in ("vantage", "verdict", "queue_delay_s", "queue_bytes")
                     and not k.startswith("kernel_")}
            done[where] = diagnosed(Run.load(Path(where)), facts)
        out += [r for r in done[where] if r["vantage"] == row["vantage"]]
    return out


# --------------------------------------------------------------------------- the figures

def counted(rows: list[dict], vantage: str) -> list[dict]:
    return [r for r in rows if r.get("vantage") == vantage and not r.get("disturbed") and r.get("built")]


def matrices(rows: list[dict]) -> dict[str, dict]:
    """Per vantage point: shares right, wrong and undetermined, built label → verdict counts,
    and how often the verdict names the limit the kernel's own accounting names."""
    out = {}
    for vantage in VANTAGES:
        mine = counted(rows, vantage)
        if not mine:
            continue
        good = sum(right(r["verdict"], r["label"]) for r in mine)
        unsure = sum(r["verdict"] == UNDETERMINED for r in mine)
        confusion: dict[str, Counter] = {}
        for r in mine:
            confusion.setdefault(r["label"], Counter())[r["verdict"]] += 1
        judged = [r for r in mine if r.get("kernel_limit") and r["verdict"].split(QUALIFIED)[0] in KERNEL_CLASS]
        agree = sum(KERNEL_CLASS[r["verdict"].split(QUALIFIED)[0]] == r["kernel_limit"] for r in judged)
        out[vantage] = {"captures": len(mine), "right": good / len(mine), "undetermined": unsure / len(mine),
                        "wrong": (len(mine) - good - unsure) / len(mine),
                        "kernel_judged": len(judged), "kernel_agreement": agree / len(judged) if judged else None,
                        "disturbed_left_out": sum(1 for r in rows if r.get("vantage") == vantage and r.get("disturbed")),
                        "not_built_left_out": sum(1 for r in rows if r.get("vantage") == vantage
                                                  and not r.get("disturbed") and not r.get("built")),
                        "confusion": {label: dict(c) for label, c in confusion.items()}}
    built = [r for r in counted(rows, "sender") if r.get("kernel_limit")]
    if built:  # how often the corpus built what the kernel saw
        agree = sum(KERNEL_CLASS[r["label"].split(QUALIFIED)[0]] == r["kernel_limit"] for r in built)
        out["built_vs_kernel"] = {"runs": len(built), "agreement": agree / len(built)}
    return out


def _print_summary(summary: dict) -> None:
    print(table([{"vantage": v, **{k: s[k] for k in ("captures", "right", "wrong", "undetermined")},
                  "kernel": s.get("kernel_agreement")}
                 for v, s in summary.items() if v in VANTAGES],
                [("vantage", "vantage", ""), ("captures", "captures", "d"), ("right", "right", ".1%"),
                 ("wrong", "wrong", ".1%"), ("undetermined", "undetermined", ".1%"),
                 ("kernel", "agrees with kernel", ".1%")]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=("host", "uml"), default="host", help="the lab kernel")
    parser.add_argument("--offloads", action="store_true", help="TSO/GSO/GRO on, as real hosts have them")
    parser.add_argument("--grid", choices=("quick", "full"), default="full",
                        help="quick: each cause's first round trip and rate, every congestion control")
    parser.add_argument("--labels", help="only these causes (comma-separated labels or names)")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder (for --rediagnose)")
    parser.add_argument("--out", help="result name in bench/results/ (default: verdicts[-uml][-offloads])")
    parser.add_argument("--rediagnose", type=Path, nargs="+",
                        help="diagnose the kept runs of these results again, as one result; no measuring")
    args = parser.parse_args()
    start = time.monotonic()
    if args.rediagnose:
        earlier = [json.loads(p.read_text()) for p in args.rediagnose]
        # A cause measured again in a later result replaces its rows of the earlier ones.
        last = {row.get("cause", row["label"]): k for k, result in enumerate(earlier) for row in result["rows"]}
        rows = rediagnose([row for k, result in enumerate(earlier) for row in result["rows"]
                           if last[row.get("cause", row["label"])] == k])
        name = args.out or args.rediagnose[0].stem
        # Each measurement behind the rows (a result diagnosed again before keeps its own list).
        parts = [part for e in earlier for part in e.get("parts") or
                 [{k: v for k, v in e.items() if k not in ("environment", "rows", "summary")}]]
        extra = {"parts": parts, "rediagnosed": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    else:
        wanted = set(args.labels.split(",")) if args.labels else None
        causes = [c for c in CORPUS if wanted is None or c.key in wanted or c.label in wanted]
        name = args.out or "verdicts" + ("-uml" if args.kernel == "uml" else "") + ("-offloads" if args.offloads else "")
        runs_dir = args.keep or Path(tempfile.mkdtemp(prefix="tcplab-verdicts-"))
        try:
            rows = measure(causes, runs_dir, args.grid, args.kernel, args.offloads)
        finally:
            if args.keep is None:
                shutil.rmtree(runs_dir, ignore_errors=True)
        extra = {"kernel": args.kernel, "offloads": args.offloads, "grid": args.grid,
                 "labels": sorted(wanted) if wanted else None, "wall_s": round(time.monotonic() - start, 1),
                 "command": "bench/bench_verdicts.py " + " ".join(
                     [f"--kernel {args.kernel}"] + (["--offloads"] if args.offloads else []) + [f"--grid {args.grid}"]
                     + ([f"--labels {args.labels}"] if args.labels else []))}
    summary = matrices(rows)
    _print_summary(summary)
    path = save(name, rows, summary=summary, **extra)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    if "--rediagnose" in sys.argv:  # analysis only: it measures nothing, so it waits for nobody
        sys.exit(main())
    run_alone(main)
