"""``tcplab replay save [CASES]``: ship the last live runs of cases as replay data."""

from __future__ import annotations

import argparse
from typing import Sequence

from .common import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab replay", description="Ship the last live runs of cases as "
                                     "replay data (data/replay/).")
    parser.add_argument("action", choices=("save",))
    parser.add_argument("cases", nargs="?", default="all", help="all, or e.g. 01,04 (default: all)")
    return parser


def main(argv: Sequence[str]) -> int:
    from ..cases import replay
    from ..course import select_cases

    args = build_parser().parse_args(list(argv))
    for case in select_cases(args.cases):
        print(f"{case}: saved {replay.save(case)}")
    return EXIT_OK
