"""``tcplab grade NOTEBOOK... [-o DIR] [--scores SOURCE]``: grade students' predictions.

Each notebook's worksheet cell (tagged ``worksheet``: ``predictions = {check name: value}``) is
read, never run, and judged against what the case measured: the notebook's own scores output
when it was executed, else the case's in ``--scores`` (an executed notebook or a
``summary.json`` of ``tcplab report``). The rule is :mod:`tcplab.report.grading`'s. Writes per
notebook ``<stem>.grade.json`` and ``<stem>.grade.html``, and ``grades.csv`` for all of them,
into DIR; prints one line per notebook. Exit codes: 0 graded; 2 bad input (a file that is no
notebook, no or a broken worksheet cell, no measurement, unreadable ``--scores``), with nothing
written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ..units import ParameterError
from ..words import Messages
from .common import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tcplab grade", description="Grade the predictions in students' case notebooks (their cell tagged "
                                         "worksheet) against what the case measured.",
        epilog="A number is right within the check's own tolerance of the measured value (a quarter of it for a "
               "check that only sets a bound), a word when it is the same; a missing prediction scores 0; unknown "
               "checks and unmeasured ones are not scored. exit codes: 0 graded; 2 bad input (nothing written)")
    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK",
                        help="a student's case notebook (.ipynb); executed, or graded against --scores")
    parser.add_argument("-o", "--output", type=Path, default=Path("grades"), metavar="DIR",
                        help="folder for <notebook>.grade.json, <notebook>.grade.html and grades.csv "
                             "(default: grades/)")
    parser.add_argument("--scores", metavar="SOURCE", default=None,
                        help="the measurement for notebooks that were not executed: an executed notebook of the case, "
                             "or the summary.json of tcplab report (matched by the notebooks' case_id)")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    # Imported here: the report layer (nbformat, Jinja) costs a second at start-up.
    from ..report.grading import TABLE_NAME, grade_notebooks, summary_line, write_grade, write_table

    out_dir: Path = args.output
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError("--output", str(out_dir), "a folder for the grades", "it is a file")
    # Every notebook is read and graded before the first file is written: bad input writes nothing.
    grades = grade_notebooks(args.notebooks, scores=args.scores)
    try:
        pages = [write_grade(g, out_dir) for g in grades]
        table = write_table(grades, out_dir / TABLE_NAME)
    except OSError as exc:
        raise ParameterError("--output", str(out_dir), "a folder this user can write",
                             str(exc.strerror or exc)) from None
    for g, files in zip(grades, pages):
        print(f"{summary_line(g)}  {files['html']}")
    print(Messages()("grade.written", count=len(grades), table=table))
    return EXIT_OK
