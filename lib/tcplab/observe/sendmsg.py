"""How ``tcp_sendmsg`` fills the send buffer, traced: the ``tcp:tcp_sendmsg_locked`` tracepoint in
a private tracefs instance (:mod:`tcplab.lab.tracefs`), one event per turn of the copy loop.

Case 01 reads it to show that only a *new* buffer is checked against ``sk_sndbuf`` (cubic appends
past a small send buffer to an unfinished tail); :func:`tcplab.cases.buffers.sendmsg_summary`
says what the turns were. Unlike :mod:`.trace`, which records a run's events beside its capture,
this traces one workload run on its own, and needs only the event's text.
"""

from __future__ import annotations

import contextlib
import re
from typing import Callable, Iterator

import pandas as pd

from ..lab import tracefs

__all__ = ["parse_sendmsg", "sendmsg_trace"]


_SENDMSG = re.compile(r"^\s*(?P<comm>\S+)-(?P<pid>\d+)\s.*tcp_sendmsg_locked: skb_addr (?P<addr>\S+) "
                      r"skb_len (?P<len>-?\d+) msg_left (?P<left>\d+) size_goal (?P<goal>\d+)")


def parse_sendmsg(text: str, *, comm: str = "python") -> pd.DataFrame:
    """The ``tcp:tcp_sendmsg_locked`` events of the busiest ``comm`` process in a trace.

    The event has no socket identity, so the sender is told apart by its process: the
    busiest process named ``comm`` (tcplab's side programs run as "python"). One row per
    turn of the copy loop in ``tcp_sendmsg_locked``: the write queue's tail buffer
    (``addr`` 0: the queue is empty), its length, the bytes of the call still to copy, the
    size goal."""
    rows = [m.groupdict() for m in map(_SENDMSG.match, text.splitlines()) if m and m["comm"] == comm]
    frame = pd.DataFrame(rows, columns=["comm", "pid", "addr", "len", "left", "goal"])
    if frame.empty:
        return frame
    frame[["pid", "len", "left", "goal"]] = frame[["pid", "len", "left", "goal"]].astype(int)
    frame["addr"] = frame["addr"].map(lambda a: int(a, 16))
    busiest = frame["pid"].value_counts().idxmax()
    return frame[frame["pid"] == busiest].reset_index(drop=True)


@contextlib.contextmanager
def sendmsg_trace() -> Iterator[Callable[[], str]]:
    """Record ``tcp:tcp_sendmsg_locked`` in a private tracefs instance (removed on exit, and by
    ``tcplab cleanup`` if this process dies); yields a function that returns the trace text."""
    if not tracefs.ensure_tracefs():
        raise RuntimeError("tracefs is not available")
    instance = tracefs.new_instance()
    instance.mkdir()
    enable = instance / "events" / "tcp" / "tcp_sendmsg_locked" / "enable"
    try:
        (instance / "buffer_size_kb").write_text("4096")
        enable.write_text("1")
        yield lambda: (instance / "trace").read_text()
    finally:
        with contextlib.suppress(OSError):
            enable.write_text("0")
        instance.rmdir()
