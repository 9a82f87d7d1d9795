"""What every subcommand shares: its exit codes and ``--set key=value`` parsing."""

from __future__ import annotations

from typing import Sequence

from ..units import ParameterError

__all__ = ["EXIT_OK", "EXIT_PROBLEM", "EXIT_BAD_INPUT", "EXIT_CANNOT", "EXIT_BUSY", "EXIT_INTERRUPTED",
           "EXIT_UNDETERMINED", "EXIT_INTERNAL", "parse_sets"]

EXIT_OK = 0
#: The thing ran and found a problem: a failed check, a failed run.
EXIT_PROBLEM = 1
#: A parameter error: nothing was touched.
EXIT_BAD_INPUT = 2
#: The machine cannot do it: not root, a missing tool, no UML kernel.
EXIT_CANNOT = 3
#: ``report``: no case failed, but the machine was too busy to trust some.
EXIT_BUSY = 4
EXIT_INTERRUPTED = 130
#: ``diagnose``: the capture read fine and shows no clear limit.
EXIT_UNDETERMINED = 1
#: ``diagnose``: a fault in tcplab itself, in one line (``TCPLAB_TRACEBACK=1`` shows where).
EXIT_INTERNAL = 3


def parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    """``["rtt=20ms", "rate=100mbit"]`` → dict; a malformed pair is a ParameterError."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParameterError("--set", pair, "key=value, e.g. --set rtt=20ms")
        out[key.strip()] = value.strip()
    return out
