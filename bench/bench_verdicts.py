"""How often the diagnosis names the cause a run was built to have: a labelled corpus and its
confusion matrix, per vantage point.

    sudo .venv/bin/python bench/bench_verdicts.py [--quick]

Each label of :data:`CORPUS` is one cause built on a real path: every combination of two
round trips, two line rates and cubic/bbr (``--quick``: one of each). Every configuration runs
twice, captured at sender and receiver (``capture=both``), then at the router, and each capture
is diagnosed as a user's would be, from the pcap alone (``tcplab diagnose FILE``); the sender's
also with what the run knows (its ``ss`` samples and socket settings), as the course does. A
run the machine disturbed (``observe.health``) is left out of the matrix and counted.

Writes ``bench/results/verdicts.json``: one row per diagnosed capture and, per vantage point,
the share right, wrong and undetermined and the confusion matrix (true label → verdict).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from common import run_alone, save, table

from tcplab.analysis import diagnose, read_packets
from tcplab.analysis.theory import max_goodput
from tcplab.analysis.diagnose import DiagnosisContext
from tcplab.experiment import Experiment, ExperimentFailed
from tcplab.lab import NetPath, PathSpec
from tcplab.observe import ObserveSpec
from tcplab.observe.health import reasons_of
from tcplab.traffic import AppResult, Bulk, Reqresp, Slowreader

UNDETERMINED = "undetermined"
VANTAGES = ("sender", "sender+run", "receiver", "router")


def _below_line(goodput: float, line: float) -> bool:
    return goodput < 0.7 * line


def _at_line(goodput: float, line: float) -> bool:
    return goodput >= 0.8 * line


@dataclass(frozen=True)
class Cause:
    """A label and how to build it: the workload and the path settings, from rtt (s), rate (bit/s), cc.
    ``holds(goodput, line)`` says whether a run really had that limit (a buffer that kept the
    transfer well below the line, a transfer that filled it); a run where it did not is no
    sample of the label and is counted apart."""

    label: str
    workload: Callable[[float, float, str], Any]
    path: Callable[[float, float, str], dict] = lambda rtt, rate, cc: {}
    rtts_ms: tuple[int, ...] = (20, 40)
    rates_mbit: tuple[int, ...] = (50, 100)
    holds: Callable[[float, float], bool] = lambda goodput, line: True


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
    Cause("congestion-loss", lambda rtt, rate, cc: Bulk(size="4MB", cc=cc), lambda rtt, rate, cc: {"loss": "2%"}),
    Cause("zero-window", lambda rtt, rate, cc: Slowreader(size="2MB", pause_after="256KB", pause_for="2s", cc=cc)),
    Cause("nagle-delayed-ack", lambda rtt, rate, cc: Reqresp(requests=20, request_size=1000, response_size=100,
                                                             split=True, cc=cc), rtts_ms=(2, 20)),
    Cause("application-limited", lambda rtt, rate, cc: Reqresp(requests=20, request_size=1000, response_size=100,
                                                               nodelay=True, cc=cc), rtts_ms=(2, 20)),
    Cause("window-scaling-absent", lambda rtt, rate, cc: Bulk(size=_line_seconds(rate, 1.0), cc=cc),
          lambda rtt, rate, cc: {"sysctls": {"tcp_window_scaling": 0}}, rtts_ms=(40, 80), holds=_below_line),
    Cause("slow-start", lambda rtt, rate, cc: Bulk(size="150KB", cc=cc), rtts_ms=(40, 80)),
)


def _verdict(pcap: Path, **with_run: Any) -> str:
    try:
        return diagnose(read_packets(pcap), **with_run).label
    except Exception as exc:  # noqa: BLE001 - a failure is a result of this benchmark, kept as such
        return f"error: {type(exc).__name__}"


def _vantage(pcap: Path, sender: str) -> str:
    role = pcap.name.split("-", 1)[0]
    return "router" if role == "router" else ("sender" if role == sender else "receiver")


def _captures(run, sender: str) -> dict[str, Path]:
    """The run's captures by vantage point; of the router's two, the side toward the sender
    (what the bottleneck receives), which the capture lists first."""
    found: dict[str, Path] = {}
    for pcap in run.pcaps:
        found.setdefault(_vantage(pcap, sender), pcap)
    return found


def measure(causes, runs_dir: Path, quick: bool) -> list[dict]:
    rows = []
    for cause in causes:
        rtts = cause.rtts_ms[:1] if quick else cause.rtts_ms
        rates = cause.rates_mbit[:1] if quick else cause.rates_mbit
        for rtt_ms, rate_mbit, cc in itertools.product(rtts, rates, ("cubic",) if quick else ("cubic", "bbr")):
            rtt, rate = rtt_ms / 1e3, rate_mbit * 1e6
            workload = cause.workload(rtt, rate, cc)
            spec = PathSpec(rtt=f"{rtt_ms}ms", rate=f"{rate_mbit}mbit", cc=cc, **cause.path(rtt, rate, cc))
            setting = {"label": cause.label, "rtt_ms": rtt_ms, "rate_mbit": rate_mbit, "cc": cc}
            these: list[dict] = []
            with NetPath(spec) as path:
                for capture in ("both", "router"):
                    observe = ObserveSpec(capture=capture, snaplen=96, tracepoints=False)
                    try:
                        run = Experiment(path, workload, case="bench-verdicts", runs_dir=runs_dir, observe=observe).run()
                    except ExperimentFailed as exc:
                        these.append({**setting, "capture": capture, "vantage": None, "verdict": f"run failed: {exc}"})
                        continue
                    goodput = float(AppResult.of_run(run).goodput_bps)
                    facts = {**setting, "capture": capture, "disturbed": reasons_of(run), "goodput_bps": goodput,
                             "built": cause.holds(goodput, max_goodput(rate))}
                    for vantage, pcap in _captures(run, workload.sender()).items():
                        these.append({**facts, "vantage": vantage, "verdict": _verdict(pcap)})
                        if vantage == "sender":
                            these.append({**facts, "vantage": "sender+run",
                                          "verdict": _verdict(pcap, telemetry=run.telemetry,
                                                              context=DiagnosisContext.from_run(run))})
            rows.extend(these)
            print(f"{cause.label:<24} {rtt_ms:>3} ms {rate_mbit:>4} Mbit/s {cc:<5} "
                  + " ".join(f"{r['vantage']}={r['verdict']}" + ("*" if r.get("disturbed") else "")
                             + ("" if r.get("built", True) else "(not built)") for r in these),
                  flush=True)
    return rows


def matrices(rows: list[dict]) -> dict[str, dict]:
    """Per vantage point: shares right, wrong and undetermined, and true label → verdict counts."""
    out = {}
    for vantage in VANTAGES:
        mine = [r for r in rows if r.get("vantage") == vantage and not r.get("disturbed") and r.get("built")]
        if not mine:
            continue
        right = sum(r["verdict"] == r["label"] for r in mine)
        unsure = sum(r["verdict"] == UNDETERMINED for r in mine)
        confusion: dict[str, Counter] = {}
        for r in mine:
            confusion.setdefault(r["label"], Counter())[r["verdict"]] += 1
        out[vantage] = {"captures": len(mine), "right": right / len(mine), "undetermined": unsure / len(mine),
                        "wrong": (len(mine) - right - unsure) / len(mine),
                        "disturbed_left_out": sum(1 for r in rows if r.get("vantage") == vantage and r.get("disturbed")),
                        "not_built_left_out": sum(1 for r in rows if r.get("vantage") == vantage
                                                  and not r.get("disturbed") and not r.get("built")),
                        "confusion": {label: dict(c) for label, c in confusion.items()}}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one rtt, one rate, cubic only")
    args = parser.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tcplab-verdicts-") as runs_dir:
        rows = measure(CORPUS, Path(runs_dir), args.quick)
    summary = matrices(rows)
    print(table([{"vantage": v, **{k: s[k] for k in ("captures", "right", "wrong", "undetermined")}}
                 for v, s in summary.items()],
                [("vantage", "vantage", ""), ("captures", "captures", "d"), ("right", "right", ".0%"),
                 ("wrong", "wrong", ".0%"), ("undetermined", "undetermined", ".0%")]))
    path = save("verdicts", rows, summary=summary, quick=args.quick, wall_s=round(time.monotonic() - start, 1))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    run_alone(main)
