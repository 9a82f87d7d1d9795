"""Wall time of `make report` on this machine: every case live, per case and in all.

    .venv/bin/python bench/bench_course.py [--profiles quick,full] [--cases all] [--kernel uml]

Runs ``tcplab report`` as `make report` does (HTML and PDF), with fresh runs (an empty
data directory, so nothing is reused), once per profile, and keeps per case the notebook's
execution time and whether its checks held. Goal (issue 5): the quick profile under
10 minutes in all, every case under 90 s.
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

QUICK_CASE_GOAL_S, QUICK_TOTAL_GOAL_S = 90, 600


def run_course(profile: str, cases: str, kernel: str) -> tuple[list[dict], float]:
    with tempfile.TemporaryDirectory(prefix="tcplab-bench-course-") as tmp:
        reports, data = Path(tmp) / "reports", Path(tmp) / "data"
        env = {**os.environ, "TCPLAB_DATA": str(data)}
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "tcplab.commands", "report", "--cases", cases, "--profile", profile,
                        "--mode", "live", "--kernel", kernel, "--reports-dir", str(reports)], env=env, check=False)
        wall = time.monotonic() - start
        summary = json.loads((reports / "summary.json").read_text())
    rows = [{"profile": profile, "kernel": summary["kernel"], "case": c["case_id"], "status": c["status"],
             "checks": f"{sum(x['passed'] for x in c['checks'])}/{len(c['checks'])}",
             "execution_s": c["execution_s"]} for c in summary["cases"]]
    return rows, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="quick", help="quick, full or quick,full (default: quick)")
    parser.add_argument("--cases", default="all")
    parser.add_argument("--kernel", default="auto", choices=("host", "uml", "auto"),
                        help="lab kernel; a named one keeps its results apart, in course-host.json or "
                             "course-uml.json, so the two can be compared case by case")
    args = parser.parse_args()
    if args.kernel == "uml":
        from tcplab.lab import uml

        if uml.find_install() is None:
            print("no UML kernel installed: " + uml.missing_message())
            return 0
    rows, walls = [], {}
    for profile in args.profiles.split(","):
        profile_rows, walls[profile] = run_course(profile, args.cases, args.kernel)
        rows += profile_rows
    print(table(rows, [("profile", "profile", "s"), ("kernel", "kernel", "s"), ("case", "case", "s"), ("status", "status", "s"),
                       ("checks", "checks", "s"), ("execution_s", "execution s", ".1f")]))
    for profile, wall in walls.items():
        print(f"{profile}: make report wall time {wall:.0f} s (HTML + PDF, fresh runs)")
    quick = [r for r in rows if r["profile"] == "quick"]
    goals = {"quick_case_goal_s": QUICK_CASE_GOAL_S, "quick_total_goal_s": QUICK_TOTAL_GOAL_S,
             "quick_slowest_case_s": max((r["execution_s"] or 0 for r in quick), default=None),
             "wall_s": walls}
    print(f"saved {save('course' if args.kernel == 'auto' else f'course-{args.kernel}', rows, **goals)}")
    return 0 if all(r["status"] == "passed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
