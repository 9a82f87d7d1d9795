"""``tcplab diagnose FILE --all`` on a busy server's capture: flows per second, peak memory per
packet, and the start of a tiny file (make bench).

    .venv/bin/python bench/bench_diagnose_all.py [--flows 50000] [--repeat 3] [--tiny-repeat 15]
    .venv/bin/python bench/bench_diagnose_all.py --tiny-only   # the tiny file's start alone

Makes, in a temporary folder, a synthetic capture of about a million packets in 50,000
interleaved connections (``tests/analysis/pcapgen.py``, ``many_flows``: request/response turns,
bulk pinned by the receiver's window, a loss, a zero-window stall, tiny exchanges, an idle
application; ~1,000 opening per second, hundreds open at once), then runs the command as a
user would, a fresh process each time, after one run that fills numba's cache:
``tcplab diagnose FILE --all -o verdicts.parquet`` (every flow's line on stdout, the table in
the file). It records the wall time, flows per second and the process's peak RSS per
packet (the whole process: interpreter, pandas, numba and the packet table); one more run in
this process times the stages (imports, reading, the compiled metrics pass, the verdicts,
the table) to say where the time goes. Last, the warm start of a 6-packet capture
(``tcplab diagnose tiny.pcap``). Every timing is taken under the machine's measurement lock.

Goals (issue 16): 50,000 flows in < 30 s, >= 10,000 flows/s, peak <= 600 B per packet, a
tiny file < 0.5 s. The result keeps the tiny file's figure from the result it replaces
(``previous_tiny``), so a change's before and after sit side by side; ``--tiny-only``
measures just that start (a few seconds) and updates its row, keeping the rest of the result. Needs the test extra
(dpkt) for the generator.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import CHILD_TIMER, RESULTS, save_to, table

ROOT = Path(__file__).resolve().parents[1]
TCPLAB = ROOT / ".venv" / "bin" / "tcplab"
GOALS = {"seconds": 30.0, "flows_per_s": 10_000, "bytes_per_packet": 600, "tiny_s": 0.5}

# Where the time goes: the --all path's stages, in one process (as the command runs them);
# each later stage runs the earlier ones again, so its own share is the difference.
_STAGES = r"""
import json, sys, time
t0 = time.perf_counter()
import tcplab.commands.diagnose
from tcplab.analysis import _metrics_kernel as K, read_packets
from tcplab.analysis.batch import TableWriter, table_row
from tcplab.analysis.diagnose import diagnose_flows
from tcplab.analysis.metrics import all_flow_metrics
from tcplab.analysis.table import data_flows
t1 = time.perf_counter()
table = read_packets(sys.argv[1])
t2 = time.perf_counter()
flows = data_flows(table)
compiled, kernel = [0.0], K.all_flows
def timed(*args):
    start = time.perf_counter()
    kernel(*args)
    compiled[0] += time.perf_counter() - start
K.all_flows = timed
n = sum(1 for _ in all_flow_metrics(table, flows))
t3 = time.perf_counter()
labels = [d.label for d in diagnose_flows(table, flows)]
t4 = time.perf_counter()
with TableWriter(sys.argv[2]) as writer:
    for d in diagnose_flows(table, flows):
        writer.add(table_row(sys.argv[1], diagnosis=d))
t5 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "read_s": t2 - t1, "compiled_pass_s": compiled[0] / 3,
                  "flow_metrics_objects_s": t3 - t2 - compiled[0] / 3, "verdicts_s": (t4 - t3) - (t3 - t2),
                  "table_rows_s": (t5 - t4) - (t4 - t3), "flows": n}))
"""


def timed(args: list, out: Path) -> tuple[int, float, int]:
    res = subprocess.run([sys.executable, "-c", CHILD_TIMER, str(out), *map(str, args)], capture_output=True, text=True,
                         check=True)
    code, seconds, peak = res.stdout.split()
    return int(code), float(seconds), int(peak)


def tiny_capture(path: Path) -> None:
    """Six packets: handshake, one request, its answer, the last ACK."""
    from tests.analysis.pcapgen import ACK, Transfer, write_pcap

    tr = Transfer()
    tr.exchange(100, 200)
    tr._emit(0, flags=ACK)
    write_pcap(path, tr.frames, linktype=101)


def _previous_tiny(out: Path) -> dict | None:
    """The tiny file's row of the result this run replaces, with that run's time: the figure
    before a change stays beside the one after it."""
    import json

    try:
        before = json.loads(out.read_text())
    except (OSError, ValueError):
        return None
    rows = [r for r in before.get("rows", ()) if str(r.get("what", "")).startswith("diagnose tiny.pcap")]
    if not rows:
        return None
    return {"time": before.get("environment", {}).get("time"), **rows[0]}


def _tiny_row(tiny: Path, tmp: Path, repeat: int) -> dict:
    """The warm start of ``tcplab diagnose tiny.pcap``: ``repeat`` fresh processes after one."""
    timed([TCPLAB, "diagnose", tiny], tmp / "tiny.txt")
    runs = [timed([TCPLAB, "diagnose", tiny], tmp / "tiny.txt") for _ in range(repeat)]
    return {"what": "diagnose tiny.pcap (6 packets)", "flows": 1, "packets": 6,
            "seconds": statistics.median(s for _, s, _ in runs), "seconds_min": min(s for _, s, _ in runs),
            "seconds_max": max(s for _, s, _ in runs), "peak_bytes": max(p for _, _, p in runs), "runs": len(runs)}


def _tiny_only(args: argparse.Namespace, previous_tiny: dict | None, exclusive_measurement) -> int:
    """Only the tiny file's row of ``--out`` measured again; the rest of the result kept."""
    import json

    try:
        result = json.loads(args.out.read_text())
    except (OSError, ValueError):
        result = {"rows": []}
    with tempfile.TemporaryDirectory(prefix="tcplab-bench-tiny-") as tmp:
        tmp = Path(tmp)
        tiny_capture(tmp / "tiny.pcap")
        with exclusive_measurement(lambda place: print(place.text(), flush=True)):
            load = os.getloadavg()[0]
            row = _tiny_row(tmp / "tiny.pcap", tmp, args.tiny_repeat)
            load_after = os.getloadavg()[0]
    rows = [r for r in result.get("rows", []) if not str(r.get("what", "")).startswith("diagnose tiny.pcap")]
    met = row["seconds"] < GOALS["tiny_s"]
    print(f"tiny file: median {row['seconds']:.3f} s (best {row['seconds_min']:.3f}, worst {row['seconds_max']:.3f}) "
          f"over {row['runs']} runs, peak {row['peak_bytes'] / 2**20:.0f} MiB; load average {load:.2f} before, "
          f"{load_after:.2f} after; goal tiny_s: {'met' if met else 'NOT met'} ({GOALS['tiny_s']})")
    if previous_tiny:
        print(f"  {previous_tiny['seconds']:.3f} s in the result this one replaces ({previous_tiny['time']})")
    extra = {k: v for k, v in result.items() if k not in ("environment", "rows")}
    extra.update(previous_tiny=previous_tiny, met={**extra.get("met", {}), "tiny_s": met},
                 tiny_load_average=[load, load_after],
                 tiny_only_update=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 other_rows_from=result.get("environment", {}).get("time"))
    print(f"  result: {save_to(args.out, rows + [row], **extra)}")
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=50_000, help="connections in the capture")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the command")
    parser.add_argument("--tiny-repeat", type=int, default=15, help="timed runs of the tiny file (a noisy "
                        "machine: the median of many)")
    parser.add_argument("--tiny-only", action="store_true", help="only the tiny file's start: its row of --out")
    parser.add_argument("--out", type=Path, default=RESULTS / "diagnose_all.json")
    args = parser.parse_args()
    previous_tiny = _previous_tiny(args.out)
    sys.path.insert(0, str(ROOT))
    from tcplab.lab.state import exclusive_measurement
    from tests.analysis.pcapgen import many_flows

    if args.tiny_only:
        return _tiny_only(args, previous_tiny, exclusive_measurement)

    with tempfile.TemporaryDirectory(prefix="tcplab-bench-all-") as tmp:
        tmp = Path(tmp)
        capture, tiny = tmp / "server.pcap", tmp / "tiny.pcap"
        start = time.perf_counter()
        meta = many_flows(capture, args.flows)
        tiny_capture(tiny)
        kinds = {k: meta["kinds"].count(k) for k in dict.fromkeys(meta["kinds"])}
        print(f"made {capture.stat().st_size / 1e6:.0f} MB: {meta['packets']:,} packets in {meta['flows']:,} flows "
              f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        command = [TCPLAB, "diagnose", capture, "--all", "-o", tmp / "verdicts.parquet"]
        with exclusive_measurement(lambda place: print(place.text(), flush=True)):
            load = os.getloadavg()[0]
            code, _, _ = timed(command, tmp / "stdout.txt")  # fills numba's cache if it is cold
            if code != 0:
                print((tmp / "stdout.txt").read_text()[-2000:], file=sys.stderr)
                raise RuntimeError(f"tcplab diagnose --all exited with {code}")
            runs = [timed(command, tmp / "stdout.txt") for _ in range(args.repeat)]
            stages = subprocess.run([sys.executable, "-c", _STAGES, str(capture), str(tmp / "stages.parquet")],
                                    capture_output=True, text=True, check=True)
            tiny_row = _tiny_row(tiny, tmp, args.tiny_repeat)
            load_after = os.getloadavg()[0]
        lines = (tmp / "stdout.txt").read_text().splitlines()
    import json

    stage = json.loads(stages.stdout.strip().splitlines()[-1])
    seconds = statistics.median(s for _, s, _ in runs)
    peak = max(p for _, _, p in runs)
    n = meta["packets"]
    row = {"what": "diagnose --all -o .parquet", "flows": meta["flows"], "packets": n, "seconds": seconds,
           "seconds_min": min(s for _, s, _ in runs), "flows_per_s": meta["flows"] / seconds,
           "packets_per_s": n / seconds, "peak_bytes": peak, "bytes_per_packet": peak / n, "runs": len(runs)}
    tiny_s = tiny_row["seconds"]
    rows = [row, tiny_row]
    print(table(rows, [("what", "run", ""), ("flows", "flows", ",d"), ("packets", "packets", ",d"),
                       ("seconds", "median s", ".2f"), ("seconds_min", "best s", ".2f"),
                       ("flows_per_s", "flows/s", ",.0f"), ("bytes_per_packet", "peak B/pkt", ".0f")]))
    print(f"\n  stages (one process): imports {stage['imports_s']:.2f} s, read {stage['read_s']:.2f} s, "
          f"compiled metrics pass {stage['compiled_pass_s']:.2f} s, FlowMetrics objects "
          f"{stage['flow_metrics_objects_s']:.2f} s, verdicts {stage['verdicts_s']:.2f} s, table rows "
          f"{stage['table_rows_s']:.2f} s")
    print(f"  summary line: {lines[-2] if len(lines) > 1 else '-'}")
    print(f"  load average {load:.2f} before, {load_after:.2f} after")
    checks = {"seconds": seconds < GOALS["seconds"], "flows_per_s": row["flows_per_s"] >= GOALS["flows_per_s"],
              "bytes_per_packet": row["bytes_per_packet"] <= GOALS["bytes_per_packet"],
              "tiny_s": tiny_s < GOALS["tiny_s"]}
    for name, ok in checks.items():
        print(f"  goal {name}: {'met' if ok else 'NOT met'} ({GOALS[name]:,})")
    if previous_tiny:
        print(f"  tiny file: {tiny_s:.3f} s, {previous_tiny['seconds']:.3f} s in the result this one replaces "
              f"({previous_tiny['time']})")
    extra = {"capture": {"packets": n, "flows": meta["flows"], "kinds": kinds, "snaplen": 96},
             "previous_tiny": previous_tiny,
             "stages": stage, "goals": GOALS, "met": checks, "load_average": [load, load_after],
             "under_measurement_lock": True}
    saved = save_to(args.out, rows, **extra)
    print(f"  result: {saved}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
