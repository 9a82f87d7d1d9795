"""The kernel's TCP/IP counters of a namespace (what ``nstat`` shows), before and after a run.

Counters such as ``TcpExtTCPToZeroWindowAdv`` or ``TcpExtDelayedACKs`` are per network
namespace and only ever grow, so what a run did is the difference of two readings.
:func:`counters_in` reads them (``/proc/net/netstat`` and ``/proc/net/snmp``, nstat's
names: table prefix + field); :func:`counter_delta` keeps the ones that changed.
"""

from __future__ import annotations

from typing import Mapping

from ..lab import netns

__all__ = ["parse_counters", "counters_in", "counter_delta"]

#: Read through thread-self: :func:`netns.run_in` moves only the calling thread.
FILES = ("/proc/thread-self/net/netstat", "/proc/thread-self/net/snmp")


def parse_counters(text: str) -> dict[str, int]:
    """``TcpExt: A B`` / ``TcpExt: 1 2`` line pairs → {"TcpExtA": 1, "TcpExtB": 2}."""
    out: dict[str, int] = {}
    lines = [line.split() for line in text.splitlines() if line.strip()]
    for names, values in zip(lines[::2], lines[1::2]):
        if not names or names[0] != values[0] or not names[0].endswith(":"):
            continue
        prefix = names[0][:-1]
        for name, value in zip(names[1:], values[1:]):
            try:
                out[prefix + name] = int(value)
            except ValueError:
                continue
    return out


def _read() -> dict[str, int]:
    out: dict[str, int] = {}
    for name in FILES:
        with open(name) as fh:
            out.update(parse_counters(fh.read()))
    return out


def counters_in(ns: str) -> dict[str, int]:
    """Every counter of namespace ``ns`` now."""
    return netns.run_in(ns, _read)


def counter_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What changed between two readings (counters that did not move are left out)."""
    return {name: after[name] - before.get(name, 0) for name in sorted(after)
            if after[name] != before.get(name, 0)}
