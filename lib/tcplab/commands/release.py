"""``tcplab release [CASES] [-o DIR] [--language LANG] [--assignment NAME --reference FILE...]``.

Without ``--assignment``: writes each case's notebook as students run it (no worked answers,
instructor's notes or outputs; the worksheet written from the case's worksheet.toml; the checks
without their rules) to DIR/<case>.ipynb (default ``release/``). With ``--assignment``: writes
the nbgrader source tree of a course in DIR (default: the current folder, nbgrader's course
root), ``source/NAME/<case>.ipynb``, each ending in hidden autograder tests that score every
worksheet item against the class's reference run (``--reference``: the summary.json of
``tcplab report``, or an executed case notebook; several give a spread), and
``nbgrader_config.py`` where the course has none. Then nbgrader's own commands:
``generate_assignment NAME``, ``release_assignment``, ``collect``, ``autograde``,
``generate_feedback``, ``export`` (docs/grading.md). Exit codes: 0 written; 2 bad input (an
unknown case or language, an output that is a file or holds a notebook a student worked in, a
reference that does not measure every item), with nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..words import speaking
from ..params import ParameterError
from .common import EXIT_OK, language_option


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tcplab release", description="Write the case notebooks students run in JupyterLab: no worked "
                                           "answers, no instructor's notes, no outputs, no check rules; the "
                                           "worksheet kept. With --assignment, as an nbgrader assignment that "
                                           "grades each worksheet item against the class's reference run.",
        epilog="exit codes: 0 written; 2 bad input (nothing written)")
    parser.add_argument("cases", nargs="?", default="all", help="all, or e.g. 01,04 (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="DIR",
                        help="folder for the notebooks, <case>.ipynb (default: release/); with --assignment, the "
                             "nbgrader course folder (default: the current folder)")
    parser.add_argument("--language", default=None, metavar="LANG",
                        help="language of the notebooks: en, zh, … (default: $TCPLAB_LANG, else en)")
    parser.add_argument("--assignment", default=None, metavar="NAME",
                        help="write the nbgrader source tree source/NAME/<case>.ipynb of the course in DIR")
    parser.add_argument("--reference", action="append", default=[], metavar="FILE",
                        help="with --assignment: the class's reference run the worksheets are scored against "
                             "(summary.json of tcplab report, or an executed case notebook); repeat for a spread")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    language = language_option(args.language)
    from ..course import select_cases
    from ..report.release import release, release_course

    with speaking(language):
        cases = select_cases(args.cases)
        if args.assignment is None and args.reference:
            raise ParameterError("--reference", args.reference[0], "only with --assignment NAME",
                                 "a reference run scores an nbgrader assignment's worksheets")
        if args.assignment is None:
            written, notes = release(cases, args.output or Path("release"), language), []
        else:
            written, notes = release_course(cases, args.output or Path("."), args.assignment, args.reference, language)
        for path in written:
            print(path)
        for note in notes:
            print(f"tcplab: {note}", file=sys.stderr)
    return EXIT_OK
