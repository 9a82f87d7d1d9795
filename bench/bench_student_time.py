"""The time a class spends: a student's Run All of each released case, live, in the quick profile.

    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_student_time.py [--kernels host,uml] [--cases all]

What a student runs is the released notebook (``tcplab release``: no answers, no instructor's
notes; an instructor's cell stays where a kept cell reads what it binds), opened from its own
folder with its defaults (the quick profile) and the lab kernel given here, every run fresh
(an empty data folder: nothing recorded is reused). Each notebook runs once, as JupyterLab's
Run All does, and papermill keeps each cell's time; the row splits it into the case's own part
and its exercises (cells tagged ``exercise``), which a class may run later and apart. Kernel
start and imports fall in the case's part, as they do for a student.

Goals (issue 38, item 8): a case's own part at most 60 s on the host and twice that in UML;
the whole quick course at most 8 minutes of case time on 2 cores. Saved in
``bench/results/student-time.json``; docs/teaching.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from common import save_to, table

from tcplab.course import available_cases
from tcplab.report.execute import execute_notebook
from tcplab.report.exercises import EXERCISE_TAG

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "student-time.json"
#: Issue 38, item 8: a student's Run All of a case, exercises apart, on the host kernel; UML may take twice.
CASE_GOAL_S = {"host": 60.0, "userns": 60.0, "uml": 120.0}
#: The quick course's case time on the host, all cases' own parts together.
COURSE_GOAL_S = 8 * 60.0


def exercise_seconds(nb: nbformat.NotebookNode) -> float:
    """Seconds the executed notebook's exercise cells took (papermill's time of each cell)."""
    return sum(cell.metadata.get("papermill", {}).get("duration") or 0.0 for cell in nb.cells
               if EXERCISE_TAG in cell.metadata.get("tags", []))


def slowest_cells(nb: nbformat.NotebookNode, count: int = 3) -> list[dict]:
    """The case's own cells (exercises apart) that took longest: where its time goes."""
    timed = [{"cell": i, "first_line": next((line for line in cell.source.splitlines()
                                               if line.strip() and not line.startswith("%%")), "")[:70],
              "s": round(cell.metadata.get("papermill", {}).get("duration") or 0.0, 1)}
             for i, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and EXERCISE_TAG not in cell.metadata.get("tags", [])]
    return sorted(timed, key=lambda c: -c["s"])[:count]


def run_case(released: Path, case: str, kernel: str, out: Path) -> dict:
    executed = out / f"{case}.ipynb"
    start = time.monotonic()
    result = execute_notebook(released / f"{case}.ipynb", executed, parameters={"mode": "live", "kernel": kernel},
                              cwd=released, progress=False)
    wall = time.monotonic() - start
    nb = nbformat.read(str(executed), as_version=4) if executed.is_file() else None
    exercises = exercise_seconds(nb) if nb is not None else None
    # The kernel's start and the parameters papermill injects are in the wall time, not in any
    # cell: they count to the case's own part, which a student waits for before the first plot.
    case_s = wall - exercises if exercises is not None else None
    return {"kernel": kernel, "case": case, "ok": result.ok, "error": result.error,
            "run_all_s": round(wall, 1), "case_s": round(case_s, 1) if case_s is not None else None,
            "exercises_s": round(exercises, 1) if exercises is not None else None,
            "goal_s": CASE_GOAL_S[kernel],
            "within_goal": bool(result.ok and case_s is not None and case_s <= CASE_GOAL_S[kernel]),
            "slowest_cells": slowest_cells(nb) if nb is not None else []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="host,uml", help="lab kernels, comma-separated (host, uml, userns)")
    parser.add_argument("--cases", default="all", help="case ids, comma-separated, or all")
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file (default: %(default)s)")
    args = parser.parse_args()
    kernels = args.kernels.split(",")
    for kernel in kernels:
        if kernel not in CASE_GOAL_S:
            parser.error(f"--kernels: {kernel!r} is not one of {', '.join(CASE_GOAL_S)}")
    cases = available_cases() if args.cases == "all" else args.cases.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcplab-bench-student-") as tmp:
        released = Path(tmp) / "release"
        subprocess.run([sys.executable, "-m", "tcplab.commands", "release", "all", "-o", str(released)], check=True,
                       stdout=subprocess.DEVNULL)
        for kernel in kernels:
            # A data folder of its own per kernel and nothing in it: every run is measured afresh.
            os.environ["TCPLAB_DATA"] = str(Path(tmp) / f"data-{kernel}")
            for case in cases:
                row = run_case(released, case, kernel, Path(tmp) / f"executed-{kernel}")
                print(row, flush=True)
                rows.append(row)
    totals = {k: round(sum(r["case_s"] or 0 for r in rows if r["kernel"] == k), 1) for k in kernels}
    print(table(rows, [("kernel", "kernel", ""), ("case", "case", ""), ("ok", "ran", ""),
                       ("case_s", "case s", ".1f"), ("exercises_s", "exercises s", ".1f"),
                       ("run_all_s", "Run All s", ".1f"), ("within_goal", "within goal", "")]))
    print("case time of the course (exercises apart):", totals, "goal on the host:", COURSE_GOAL_S)
    save_to(args.out, rows, case_goal_s=CASE_GOAL_S, course_goal_s=COURSE_GOAL_S, course_case_s=totals,
            cases=cases, profile="quick")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    # Not run_alone: each notebook's lab takes the machine's measurement turn itself.
    sys.exit(main())
