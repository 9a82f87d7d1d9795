"""``tcplab uml fetch``: unpack the UML kernel into the user's cache (no root).
``tcplab uml run -- CMD …``: boot the kernel, run CMD in it as its root, print its output,
power off; the exit status is CMD's (the test suite's UML leg runs this way)."""

from __future__ import annotations

import argparse
import os
from typing import Sequence

from ..units import ParameterError
from .common import EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab uml", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("fetch", "run"))
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="with run: the command, after --")
    return parser


def main(argv: Sequence[str]) -> int:
    from ..lab import uml

    args = build_parser().parse_args(list(argv))
    if args.action == "fetch":
        install = uml.fetch_install()
        print(f"UML kernel {install.release}: {install.binary}")
        return EXIT_OK
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        raise ParameterError("command", "", "a command after --, e.g. tcplab uml run -- uname -r")
    with uml.UmlKernel(mem=os.environ.get("TCPLAB_UML_MEM", "1G")) as kernel:
        kernel.echo = lambda line: print(line, flush=True)
        status = kernel.call(uml.run_command, command)
        kernel.echo = None  # the power-off messages are not the command's
        return status
