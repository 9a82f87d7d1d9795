"""``tcplab lab --set KEY=VALUE …``: build a path and keep it up for exploring by hand."""

from __future__ import annotations

import argparse
import time
from typing import Sequence

from .common import EXIT_OK, parse_sets


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab lab", description="Build a path and keep it up for exploring "
                                     "by hand.")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="path parameter, e.g. --set rtt=20ms --set rate=100mbit")
    parser.add_argument("--seconds", type=float, default=0, help="tear down after this long (0: on Ctrl-C)")
    return parser


def main(argv: Sequence[str]) -> int:
    from ..lab import NetPath, PathSpec

    args = build_parser().parse_args(list(argv))
    spec = PathSpec.from_settings(parse_sets(args.set))
    with NetPath(spec) as path:
        print(f"path {path.id} is up ({path.backend}); Ctrl-C tears it down.")
        for host in (path.client, path.router, path.server):
            shell = host.shell()
            print(f"  {host.name:<7} {host.address:<12} " + (" ".join(shell) if shell else
                  f"inside {path.remote.title}: explore it with a function run there (tcplab.lab.kernels.call_in)"))
        try:
            if args.seconds:
                time.sleep(args.seconds)
            else:
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            pass
    print("path torn down")
    return EXIT_OK
