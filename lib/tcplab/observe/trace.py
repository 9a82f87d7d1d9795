"""Kernel tracepoints through tracefs, in a private instance that is removed afterwards.

Each run gets a tracefs instance of its own (:mod:`tcplab.lab.tracefs`): its own ring buffer,
events and filters, so it neither disturbs nor sees other tracers. A reader thread
drains ``trace_pipe`` while the run goes on, so a long transfer does not overwrite its
own beginning; the ring's overrun counter is kept in case it still did. A missing
tracefs or event is recorded as "not available" for that event, never an error.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..lab.tracefs import ensure_tracefs, new_instance

__all__ = ["EVENTS", "Tracepoints", "parse_trace"]

#: Trace-pipe timestamps use CLOCK_MONOTONIC, converted to epoch seconds like the pcaps.
CLOCK = "mono"


@dataclass(frozen=True)
class Event:
    system: str
    name: str
    #: Whether the event carries the connection's ports, so it can be filtered by port.
    has_ports: bool


EVENTS = {
    e.name: e for e in (
        Event("tcp", "tcp_probe", True),
        Event("sock", "sock_exceed_buf_limit", False),  # no socket identity: every TCP socket on the host
        Event("tcp", "tcp_rcv_space_adjust", True),
        Event("tcp", "tcp_rcvbuf_grow", True),
    )
}
_LINE = re.compile(r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+(?P<body>.*)$")
_FIELD = re.compile(r"(\w+)[=:](\S+)")
_RESERVED = {"time", "event", "cpu", "task", "pid"}


def _value(key: str, text: str) -> Any:
    """A field as a number where the kernel printed one; pointers and addresses stay text."""
    if key.endswith(("addr", "addrv6")) or key in ("src", "dest", "family", "kind", "proto"):
        return text
    if key == "sock_cookie":  # %llx without 0x
        return int(text, 16)
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_trace(text: str, *, clock_offset: float = 0.0) -> pd.DataFrame:
    """Trace-pipe lines → DataFrame(time, event, cpu, <event fields>); ``time`` = stamp + offset."""
    rows = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        row: dict[str, Any] = {"time": float(match["ts"]) + clock_offset, "event": match["event"],
                               "cpu": int(match["cpu"])}
        for key, value in _FIELD.findall(match["body"]):
            row[f"{key}_field" if key in _RESERVED else key] = _value(key, value)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame({"time": pd.Series(dtype="float64"), "event": pd.Series(dtype="string"),
                             "cpu": pd.Series(dtype="int64")})
    # Parquet wants one type per column; a field that is text for one event stays text.
    for column in df.columns:
        if df[column].dtype == object:
            df[column] = df[column].map(lambda v: v if v is None or isinstance(v, str) or v != v else str(v))
    return df


class Tracepoints:
    """Record :data:`EVENTS` (or ``events``) for the sockets of ``port`` while in use.

    ``availability`` maps each event to "recorded" or "not available: <why>".
    """

    def __init__(self, port: int, events: Iterable[str] = EVENTS, *, buffer_kb: int = 4096) -> None:
        self.port = port
        self.events = [EVENTS[name] for name in events]
        self.buffer_kb = buffer_kb
        self._instance = new_instance()
        self.name = self._instance.name
        self.availability: dict[str, str] = {}
        self.overrun = 0
        self._dir: Path | None = None
        self._chunks: list[bytes] = []
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._clock_offset = 0.0

    def __enter__(self) -> "Tracepoints":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "Tracepoints":
        if not ensure_tracefs():
            self.availability = {e.name: "not available: no tracefs" for e in self.events}
            return self
        try:
            self._dir = self._instance
            self._dir.mkdir()
            self._write("trace_clock", CLOCK)
            self._write("buffer_size_kb", str(self.buffer_kb))
            for event in self.events:
                self.availability[event.name] = self._enable(event)
            self._clock_offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)
            self._reader = threading.Thread(target=self._drain, name=f"trace-{self.name}", daemon=True)
            self._reader.start()
            self._write("tracing_on", "1")
        except BaseException:
            self.stop()
            raise
        return self

    def _write(self, rel: str, value: str) -> None:
        assert self._dir is not None
        (self._dir / rel).write_text(value)

    def _enable(self, event: Event) -> str:
        assert self._dir is not None
        where = self._dir / "events" / event.system / event.name
        if not where.is_dir():
            return "not available: this kernel has no such tracepoint"
        try:
            if event.has_ports:
                (where / "filter").write_text(f"sport == {self.port} || dport == {self.port}")
            (where / "enable").write_text("1")
        except OSError as exc:
            return f"not available: {exc.strerror or exc}"
        return "recorded"

    def _drain(self) -> None:
        assert self._dir is not None
        fd = os.open(self._dir / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        try:
            while True:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    chunk = b""
                if chunk:
                    self._chunks.append(chunk)
                elif self._stop.is_set():
                    return  # stopped and drained
                else:
                    time.sleep(0.05)
        finally:
            os.close(fd)

    def stop(self) -> None:
        if self._dir is None:
            return
        try:
            if self._dir.exists():
                self._write("tracing_on", "0")
        finally:
            self._stop.set()
            if self._reader is not None:
                self._reader.join(timeout=30)
            self.overrun = self._overrun()
            for event in self.events:
                enable = self._dir / "events" / event.system / event.name / "enable"
                if enable.exists():
                    enable.write_text("0")
            try:
                self._dir.rmdir()
            finally:
                self._dir = None

    def _overrun(self) -> int:
        assert self._dir is not None
        total = 0
        for stats in self._dir.glob("per_cpu/cpu*/stats"):
            match = re.search(r"^overrun:\s*(\d+)", stats.read_text(), re.M)
            total += int(match.group(1)) if match else 0
        return total

    def frame(self) -> pd.DataFrame:
        return parse_trace(b"".join(self._chunks).decode(errors="replace"), clock_offset=self._clock_offset)

    def summary(self) -> dict[str, Any]:
        return {"instance": self.name, "events": dict(self.availability), "overrun": self.overrun}
