"""``tcplab release [CASES] [-o DIR] [--language LANG]``: the case notebooks students run.

Writes each case's notebook without its worked answers and instructor's notes, and with no
outputs, to DIR (default ``release/``), in the language asked for; the worksheet cell stays, for
``tcplab grade`` to read back. Exit codes: 0 written; 2 bad input (an unknown case or language,
an output that is a file), with nothing written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ..words import speaking
from .common import EXIT_OK, language_option


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tcplab release", description="Write the case notebooks students run in JupyterLab: no worked "
                                           "answers, no instructor's notes, no outputs; the worksheet kept.",
        epilog="exit codes: 0 written; 2 bad input (nothing written)")
    parser.add_argument("cases", nargs="?", default="all", help="all, or e.g. 01,04 (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=Path("release"), metavar="DIR",
                        help="folder for the notebooks, <case>.ipynb (default: release/)")
    parser.add_argument("--language", default=None, metavar="LANG",
                        help="language of the notebooks: en, zh, … (default: $TCPLAB_LANG, else en)")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    language = language_option(args.language)
    from ..course import select_cases
    from ..report.release import release

    with speaking(language):
        for path in release(select_cases(args.cases), args.output, language):
            print(path)
    return EXIT_OK
