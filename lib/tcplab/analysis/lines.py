"""The lines ``tcplab diagnose`` prints: a flow's diagnosis, the list of flows, one line per
flow of ``--all`` and per capture of a folder, each table headed in the language asked for.

Light on purpose (units and words only): the command imports it before the capture's size has
chosen how the kernels run (:func:`~tcplab.analysis._jit.interpret_if_small`).
"""

from __future__ import annotations

import unicodedata
from typing import Any, TextIO

from ..units import format_duration, format_rate, format_size
from ..words import Messages

__all__ = ["Lines"]

#: The columns the tables of lines are headed by (``diagnosis.head.<name>``).
HEADS = ("flow", "capture", "sender", "receiver", "client", "server", "packets", "data", "duration", "goodput",
         "diagnosis")


def pad(text: object, width: int, align: str = "<") -> str:
    """``text`` padded to ``width`` terminal columns: a Chinese character takes two."""
    text = str(text)
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    return format(text, f"{align}{max(0, width - wide)}")


def goodput(bps: float) -> str:
    """A flow's goodput as the lines print it; "-" where it has none (NaN)."""
    return format_rate(bps) if bps == bps else "-"


def counts_of(counts: Any) -> str:
    """``Counter`` of labels as the closing line says them: most first."""
    return ", ".join(f"{n} {label}" for label, n in counts.most_common())


class Lines:
    """Writes the lines to ``out`` in ``words``' language."""

    def __init__(self, words: Messages, out: TextIO) -> None:
        self.words, self.out = words, out
        self.h = {name: words(f"diagnosis.head.{name}") for name in HEADS}

    def say(self, key: str, **values: Any) -> None:
        self.out.write(self.words(key, **values) + "\n")

    def diagnosis(self, result: Any) -> None:
        m = result.metrics
        self.say("diagnosis.line.flow", flow=m.flow, client=m.client, arrow="->" if m.data_dir == 0 else "<-",
                 server=m.server, size=format_size(m.payload_bytes), duration=format_duration(m.transfer_s),
                 goodput=goodput(m.goodput_bps))
        self.say("diagnosis.line.diagnosis", title=result.title)
        for sentence in result.sentences:
            self.out.write(f"  - {sentence}\n")
        self.say("diagnosis.line.limits", limits=", ".join(f"{label} {share:.0%}" for label, share in result.limits))

    def flows(self, rows: list[dict]) -> None:
        h = self.h
        self.out.write(f"{pad(h['flow'], 4, '>')}  {pad(h['client'], 24)} {pad(h['server'], 24)} "
                       f"{pad(h['packets'], 8, '>')} {'c->s':>10} {'s->c':>10} {pad(h['duration'], 10, '>')}\n")
        for r in rows:
            self.out.write(f"{r['flow']:>4}  {r['client']:<24} {r['server']:<24} {r['packets']:>8} "
                           f"{format_size(r['bytes_c2s']):>10} {format_size(r['bytes_s2c']):>10} "
                           f"{format_duration(r['duration_s']):>10}\n")

    def every_flow_head(self) -> None:
        h = self.h
        self.out.write(f"{pad(h['flow'], 4, '>')}  {pad(h['sender'], 24)} {pad(h['receiver'], 24)} "
                       f"{pad(h['data'], 10, '>')} {pad(h['duration'], 10, '>')} {pad(h['goodput'], 13, '>')}  "
                       f"{h['diagnosis']}\n")

    def every_flow(self, result: Any) -> None:
        m = result.metrics
        sender, receiver = m.data_endpoints
        self.out.write(f"{m.flow:>4}  {sender:<24} {receiver:<24} {format_size(m.payload_bytes):>10} "
                       f"{format_duration(m.transfer_s):>10} {goodput(m.goodput_bps):>13}  {result.label}\n")

    def folder(self, done: Any, failed: Any, captures: int) -> None:
        """One line per diagnosed flow of a folder's table, one per capture that failed, and the count."""
        h = self.h
        width = max(len(h["capture"]), *(len(c) for c in done["capture"]), *(len(c) for c in failed["capture"]))
        self.out.write(f"{pad(h['capture'], width)}  {pad(h['flow'], 4, '>')}  {pad(h['sender'], 24)} "
                       f"{pad(h['data'], 10, '>')} {pad(h['duration'], 10, '>')} {pad(h['goodput'], 13, '>')}  "
                       f"{h['diagnosis']}\n")
        for r in done.itertuples():
            self.out.write(f"{r.capture:<{width}}  {int(r.flow):>4}  {r.sender:<24} {format_size(r.bytes):>10} "
                           f"{format_duration(r.duration_s):>10} {goodput(r.goodput_bps):>13}  {r.label}\n")
        for r in failed.itertuples():
            self.out.write(f"{r.capture:<{width}}  " + self.words("diagnosis.line.not_diagnosed", error=r.error) + "\n")
        from collections import Counter

        self.out.write(self.words("diagnosis.line.captures", captures=captures, flows=len(done),
                                  counts=counts_of(Counter(done["label"])))
                       + (self.words("diagnosis.line.not_diagnosed_count", n=len(failed)) if len(failed) else "")
                       + "\n")
