"""What every subcommand shares: its exit codes, ``--set key=value`` parsing and the ``--language`` choice."""

from __future__ import annotations

from typing import Sequence

from ..units import ParameterError
from ..words import default_language, languages

__all__ = ["EXIT_OK", "EXIT_PROBLEM", "EXIT_BAD_INPUT", "EXIT_CANNOT", "EXIT_BUSY", "EXIT_INTERRUPTED",
           "EXIT_UNDETERMINED", "EXIT_INTERNAL", "parse_sets", "language_option"]

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


def language_option(asked: str | None) -> str:
    """``--language``, else ``$TCPLAB_LANG``, else English; refused by the name it was given
    under, with the languages that have a strings file, unless it has one."""
    language = asked or default_language()
    if language not in languages():
        raise ParameterError("--language" if asked else "TCPLAB_LANG", language, "one of " + ", ".join(languages()))
    return language
