"""One-way streams: bulk, slowreader, ratelimited, shortconns (program: programs/stream.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..params import param
from ..units import ParameterError
from .base import BUFFER_MAX, IO_MAX, SIDES, SIZE_MAX, Workload, program, register

DIRECTIONS = ("download", "upload")


@register
@dataclass(frozen=True)
class Bulk(Workload):
    """One side writes ``size`` bytes, the other reads them: a query result or a batch insert."""

    name: ClassVar[str] = "bulk"

    size: int = param("size", "4MB", "payload bytes moved (per connection)", low=0, low_open=True, high=SIZE_MAX)
    direction: str = param("choice", "download",
                           "download: server -> client (query result); upload: client -> server (batch insert)",
                           choices=DIRECTIONS)
    sndbuf: int | None = param("size", None, "sender's SO_SNDBUF (the kernel doubles it); unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    rcvbuf: int | None = param("size", None, "receiver's SO_RCVBUF (the kernel doubles it); unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    write_size: int = param("size", "64KB", "bytes per application write", low=1, high=IO_MAX)
    write_rate: float | None = param("rate", None,
                                     "sender's writing pace, like a producer of logs or video (2mbit, 250KB/s): "
                                     "one write_size write whenever the pace allows; unset: as fast as it can",
                                     low=0.0, low_open=True, optional=True)
    # Optional, not off by default: an unset parameter leaves the key of runs recorded before it.
    nodelay: bool | None = param("bool", None, "sender's TCP_NODELAY: each write leaves at once as its own segment; "
                                               "unset or off: Nagle and autocorking merge small writes",
                                 optional=True)
    read_size: int = param("size", "64KB", "bytes per application read", low=1, high=IO_MAX)
    read_rate: float | None = param("rate", None,
                                    "receiver's reading pace, like curl --limit-rate (100KB/s, 800kbit); "
                                    "unset: as fast as it can", low=0.0, low_open=True, optional=True)
    pause_after: int | None = param("size", None, "bytes read before the receiver stops reading; unset: never",
                                    low=1, high=SIZE_MAX, optional=True)
    pause_for: float = param("duration", "1s", "how long the receiver stops reading after pause_after",
                             low=0.0, high=600.0)
    silent_after: int | None = param("size", None, "bytes read before the receiver's host goes silent for "
                                     "pause_for (drops every packet in and out, as a host that hung): the sender "
                                     "resends into silence until its kernel gives up; unset: never",
                                     low=1, high=SIZE_MAX, optional=True)

    def sender(self) -> str:
        return "server" if self.direction == "download" else "client"

    def connection_count(self) -> int:
        return 1

    def expected_bytes(self) -> int | None:
        if self.silent_after is not None:
            return None  # the connection dies in the silence
        return self.size * self.connection_count()

    def commands(self, path: Any) -> dict[str, list[str]]:
        return {side: program("stream", self._config(path, side)) for side in SIDES}

    def _config(self, path: Any, side: str) -> dict[str, Any]:
        sends = side == self.sender()
        return {
            "role": side, "address": path.server.address, "port": self.port,
            "connections": self.connection_count(),
            "socket": {"cc": self.cc, "sndbuf": self.sndbuf if sends else None,
                       "rcvbuf": None if sends else self.rcvbuf,
                       "nodelay": bool(self.nodelay) and sends},
            "send": {"size": self.size, "write_size": self.write_size,
                     "write_rate": None if self.write_rate is None else self.write_rate / 8} if sends else None,
            "receive": None if sends else {
                "read_size": self.read_size, "pause_after": self.pause_after, "pause_for": self.pause_for,
                "read_rate": None if self.read_rate is None else self.read_rate / 8,  # bit/s -> bytes/s
            },
            **({"silent_after": self.silent_after, "reset_ok": True} if self.silent_after is not None else {}),
        }


@register
@dataclass(frozen=True)
class Slowreader(Bulk):
    """The receiver stops reading for ``pause_for`` after ``pause_after`` bytes (or reads at
    ``read_rate``): the advertised window closes to zero, then reopens."""

    name: ClassVar[str] = "slowreader"

    size: int = param("size", "1MB", "payload bytes moved", low=0, low_open=True, high=SIZE_MAX)
    pause_after: int | None = param("size", "128KB", "bytes read before the receiver stops reading",
                                    low=1, high=SIZE_MAX, optional=True)
    reset_ok: bool | None = param("bool", None, "a connection that dies (reset at the reader, timed out at the "
                                                "writer, as behind a middlebox that drops the probes) ends the run "
                                                "as recorded; unset or off: it fails the run", optional=True)

    def validate(self) -> None:
        super().validate()
        if self.pause_after is None and self.read_rate is None:
            raise ParameterError("pause_after", None, "a size, or unset with read_rate set",
                                 "a slow reader needs a pause or a reading pace")

    def expected_bytes(self) -> int | None:
        return None if self.reset_ok else super().expected_bytes()  # a connection that dies moves less

    def _config(self, path: Any, side: str) -> dict[str, Any]:
        return {**super()._config(path, side), **({"reset_ok": True} if self.reset_ok else {})}


@register
@dataclass(frozen=True)
class Ratelimited(Bulk):
    """The receiver reads at ``read_rate``, like ``curl --limit-rate`` (try it with a small rcvbuf)."""

    name: ClassVar[str] = "ratelimited"

    size: int = param("size", "1MB", "payload bytes moved", low=0, low_open=True, high=SIZE_MAX)
    read_rate: float = param("rate", "4mbit", "receiver's reading pace, like curl --limit-rate (100KB/s, 800kbit)",
                             low=0.0, low_open=True)


@register
@dataclass(frozen=True)
class Shortconns(Bulk):
    """``connections`` short connections, one after the other, each moving ``size`` bytes:
    slow start every time, unless the route's tcp_metrics (ssthresh) or initcwnd help."""

    name: ClassVar[str] = "shortconns"

    size: int = param("size", "64KB", "payload bytes moved per connection", low=0, low_open=True, high=SIZE_MAX)
    connections: int = param("int", 20, "connections made one after the other", low=1, high=100_000)

    def connection_count(self) -> int:
        return self.connections
