"""``tcplab cleanup``: remove what killed runs left behind and restore host settings."""

from __future__ import annotations

import argparse
from typing import Sequence

from .common import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab cleanup", description=__doc__.split(": ", 1)[1].strip())
    parser.add_argument("--force", action="store_true", help="also remove namespaces of runs still alive")
    return parser


def main(argv: Sequence[str]) -> int:
    from ..lab.cleanup import cleanup

    args = build_parser().parse_args(list(argv))
    for line in cleanup(force=args.force).lines():
        print(line)
    return EXIT_OK
