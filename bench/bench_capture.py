"""Observation overhead (make bench): does watching a transfer change it?

Goodput of a 100 Mbit/s, 20 ms bulk transfer without any observer, then with tcpdump at
the sender plus socket sampling (the inet_diag dump ``ss`` makes, ``observe/sockdiag.py``)
at shrinking intervals (and tracepoints on top). Goal: less than 3 % goodput difference;
the table says the shortest sampling interval that keeps to it.
Configurations are interleaved round by round, so a disturbance on the machine hits all
of them alike, and each is summarised by its median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from common import run_alone, save, table

from tcplab.experiment import Experiment
from tcplab.lab import NetPath
from tcplab.observe import ObserveSpec
from tcplab.traffic import WORKLOADS, AppResult

GOAL = 0.03


def configurations(intervals: list[int]) -> dict[str, ObserveSpec]:
    off = dict(capture="none", telemetry=False, tracepoints=False)
    configs = {"none": ObserveSpec(**off), "tcpdump": ObserveSpec(**{**off, "capture": "sender"})}
    for ms in intervals:
        configs[f"tcpdump+ss {ms}ms"] = ObserveSpec(capture="sender", telemetry=True, interval=f"{ms}ms",
                                                   tracepoints=False)
    configs[f"tcpdump+ss {intervals[-1]}ms+trace"] = ObserveSpec(
        capture="sender", telemetry=True, interval=f"{intervals[-1]}ms", tracepoints=True)
    return configs


def measure(size: str, rounds: int, intervals: list[int]) -> list[dict]:
    configs = configurations(intervals)
    goodputs: dict[str, list[float]] = {name: [] for name in configs}
    samples: dict[str, list[int]] = {name: [] for name in configs}
    workload = WORKLOADS["bulk"](size=size, port=5401)
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as runs_dir, \
            NetPath(rtt="20ms", rate="100mbit") as path:
        for round_ in range(rounds):
            for name, spec in configs.items():
                run = Experiment(path, workload, case="bench", runs_dir=runs_dir, observe=spec).run()
                goodput = AppResult.of_run(run).goodput_bps
                goodputs[name].append(goodput)
                samples[name].append(run.observe.get("telemetry", {}).get("samples", 0))
                print(f"  round {round_ + 1} {name}: {goodput / 1e6:.1f} Mbit/s", file=sys.stderr)
        backend = path.backend
    base = statistics.median(goodputs["none"])
    rows = []
    for name, spec in configs.items():
        median = statistics.median(goodputs[name])
        rows.append({
            "observers": name, "backend": backend, "interval_ms": spec.interval * 1e3 if spec.telemetry else None,
            "goodput_mbit": median / 1e6, "min_mbit": min(goodputs[name]) / 1e6,
            "max_mbit": max(goodputs[name]) / 1e6, "difference": median / base - 1,
            "ok": abs(median / base - 1) < GOAL, "ss_samples": statistics.median(samples[name]),
            "runs": len(goodputs[name]),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="22MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--intervals", default="50,20,10,5", help="ss intervals in ms, longest first")
    args = parser.parse_args()
    intervals = [int(x) for x in args.intervals.split(",")]
    rows = measure(args.size, args.rounds, intervals)
    ok_intervals = [r["interval_ms"] for r in rows if r["interval_ms"] and r["ok"] and "trace" not in r["observers"]]
    shortest = min(ok_intervals) if ok_intervals else None
    print(f"\nObservation overhead, 100 Mbit/s 20 ms bulk of {args.size}, median of {args.rounds} "
          f"(goal: within {GOAL:.0%} of no observers)")
    print(table(rows, [("observers", "observers", ""), ("goodput_mbit", "goodput Mbit/s", ".1f"),
                       ("min_mbit", "min", ".1f"), ("max_mbit", "max", ".1f"),
                       ("difference", "difference", "+.1%"), ("ok", "ok", ""), ("ss_samples", "ss samples", ".0f")]))
    print(f"shortest ss interval within the goal: {shortest} ms" if shortest else "no ss interval met the goal")
    path = save("capture", rows, shortest_ok_interval_ms=shortest, goal=GOAL, size=args.size, rounds=args.rounds)
    print(f"\nsaved {path}")
    return 0


if __name__ == "__main__":
    run_alone(main)
