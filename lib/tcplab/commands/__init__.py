"""The ``tcplab`` command: doctor | uml | lab | run | diagnose | report | release | i18n | replay | cleanup.

One module per subcommand, each a thin shell over a library function with a ``main(argv)``
that parses its own options. Nothing in the library imports this package. Exit codes
(:mod:`.common`): 0 success, 1 the thing ran and found a problem (a failed check or run;
``diagnose``: no clear limit), 2 bad input (nothing was touched), 3 the machine cannot do it
(not root, missing tool; ``diagnose``: an internal error), 4 (``report``) no case failed but
the machine was too busy to trust some, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from ..units import ParameterError
from .common import EXIT_BAD_INPUT, EXIT_CANNOT, EXIT_INTERRUPTED

__all__ = ["main", "COMMANDS"]

#: Subcommand → its one-line help; each is the module of that name in this package.
COMMANDS = {
    "doctor": "what this machine can do, and a short fidelity check",
    "uml": "the User-mode Linux lab kernel: fetch it without root, run a command in it",
    "lab": "build a path and keep it up for exploring by hand",
    "run": "run one experiment (tcplab run --help)",
    "diagnose": "diagnose a pcap (tcplab diagnose --help)",
    "report": "execute notebooks and render reports (tcplab report --help)",
    "release": "write the case notebooks students run, plain or as an nbgrader assignment (tcplab release --help)",
    "i18n": "check translations against their English; stub a case's translation (tcplab i18n --help)",
    "replay": "ship the last live runs of cases as replay data (data/replay/)",
    "cleanup": "remove what killed runs left behind; restore host settings",
}


def build_parser() -> argparse.ArgumentParser:
    """The top level: names the subcommands for ``tcplab --help`` and a usage error."""
    parser = argparse.ArgumentParser(prog="tcplab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # --help (exit 0), or the usage error naming the commands (exit 2)
        return EXIT_BAD_INPUT
    command = importlib.import_module(f".{argv[0]}", __name__)
    try:
        return command.main(argv[1:])
    except ParameterError as exc:
        print(f"tcplab: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("tcplab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not (isinstance(exc, PermissionError) or _is_uml_error(exc)):
            raise
        print(f"tcplab: {exc}", file=sys.stderr)
        return EXIT_CANNOT


def _is_uml_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a :class:`tcplab.lab.uml.UmlError`. Looked up, not imported: only a
    command that loaded the lab can raise one, and importing the lab here would load pyroute2
    (~0.1 s) into every command, ``tcplab diagnose`` on a tiny file included."""
    uml = sys.modules.get("tcplab.lab.uml")
    return uml is not None and isinstance(exc, uml.UmlError)
