"""The course across machines, simulated on this one: one runner against a matrix of shards.

    .venv/bin/python bench/bench_shards.py [--profile full] [--shards 12] [--cases all] [--no-baseline]

Runs the course once unsharded (one runner), then its N shards one after another, each as a
fresh machine would (its own empty data directory, so nothing is reused), then the merge.
A matrix with one runner per shard would take as long as its longest shard plus the merge;
that is the figure set against the one runner's wall time. The merged summary must list the
same cases and checks as the unsharded one (the values differ: each is a live run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import save, table


def report(args: list[str], data: Path | None) -> tuple[dict, float, int]:
    """One ``tcplab report`` run: its summary, wall time and exit code."""
    env = {**os.environ, **({"TCPLAB_DATA": str(data)} if data else {})}
    reports = Path(args[args.index("--reports-dir") + 1])
    start = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "tcplab.commands", "report", *args], env=env, check=False).returncode
    wall = time.monotonic() - start
    return json.loads((reports / "summary.json").read_text()), wall, code


def _shape(summary: dict) -> list[tuple]:
    return [(c["case_id"], tuple(x["name"] for x in c["checks"])) for c in summary["cases"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full", choices=("quick", "full"))
    parser.add_argument("--cases", default="all")
    parser.add_argument("--shards", type=int, default=0, help="number of shards (default: one per case)")
    parser.add_argument("--kernel", default="auto", choices=("host", "uml", "auto"))
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unsharded run (the one-runner figure is then the shards' sum)")
    args = parser.parse_args()
    from tcplab.course import select_cases

    cases = select_cases(args.cases)
    count = args.shards or len(cases)
    common = ["--cases", args.cases, "--profile", args.profile, "--mode", "live", "--kernel", args.kernel]
    rows, extra = [], {"profile": args.profile, "shards": count, "cases": cases}
    with tempfile.TemporaryDirectory(prefix="tcplab-bench-shards-") as tmp:
        tmp = Path(tmp)
        whole = None
        if not args.no_baseline:
            whole, wall, code = report([*common, "--reports-dir", str(tmp / "whole")], tmp / "data-whole")
            rows.append({"run": "one runner", "cases": len(whole["cases"]), "wall_s": wall, "exit": code})
        dirs = []
        for index in range(1, count + 1):
            shard_dir = tmp / f"shard-{index}"
            summary, wall, code = report([*common, "--shard", f"{index}/{count}", "--reports-dir", str(shard_dir)],
                                         tmp / f"data-{index}")
            dirs.append(shard_dir)
            rows.append({"run": f"shard {index}/{count}", "cases": len(summary["cases"]), "wall_s": wall,
                         "exit": code, "case_ids": [c["case_id"] for c in summary["cases"]]})
        merged, merge_wall, code = report(["--merge", *map(str, dirs), "--reports-dir", str(tmp / "merged")], None)
        rows.append({"run": "merge", "cases": len(merged["cases"]), "wall_s": merge_wall, "exit": code})
    shard_walls = [r["wall_s"] for r in rows if r["run"].startswith("shard")]
    extra["matrix_wall_s"] = max(shard_walls) + merge_wall
    extra["shards_sum_s"] = sum(shard_walls)
    extra["one_runner_wall_s"] = rows[0]["wall_s"] if whole else None
    one_runner = extra["one_runner_wall_s"] or extra["shards_sum_s"]
    extra["speedup"] = one_runner / extra["matrix_wall_s"]
    extra["merge_matches_unsharded"] = None if whole is None else _shape(merged) == _shape(whole)
    print(table(rows, [("run", "run", "s"), ("cases", "cases", "d"), ("wall_s", "wall s", ".0f"), ("exit", "exit", "d")]))
    print(f"one runner {one_runner:.0f} s ({'measured' if whole else 'sum of the shards'}); a matrix of {count} "
          f"runners {extra['matrix_wall_s']:.0f} s (longest shard + merge): {extra['speedup']:.1f}x")
    if whole is not None:
        print(f"merged summary lists the unsharded run's cases and checks: {extra['merge_matches_unsharded']}")
    print(f"saved {save(f'shards-{args.profile}', rows, **extra)}")
    return 0 if extra["merge_matches_unsharded"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
