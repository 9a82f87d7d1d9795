"""Round trips on one connection: reqresp and idleburst (program: programs/rpc.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..params import param
from .base import BUFFER_MAX, IO_MAX, SIDES, SIZE_MAX, Workload, program, register


@register
@dataclass(frozen=True)
class Reqresp(Workload):
    """``requests`` round trips: the client writes a request (16-byte header + body), the server
    answers once the whole request is in. ``split`` writes header and body separately: with
    Nagle on, the body waits for the header's (delayed) ACK."""

    name: ClassVar[str] = "reqresp"

    requests: int = param("int", 10, "round trips on one connection", low=1, high=100_000)
    request_size: int = param("size", "1KB", "request body bytes (after a 16-byte header)", low=0, high=SIZE_MAX)
    response_size: int = param("size", "1KB", "response bytes", low=0, high=SIZE_MAX)
    split: bool = param("bool", False, "write each request as header + body in two writes (HTTP POST with Expect)")
    nodelay: bool = param("bool", False, "client's TCP_NODELAY (off: Nagle holds a small write while data is unacked)")
    server_nodelay: bool = param("bool", False, "server's TCP_NODELAY")
    sndbuf: int | None = param("size", None, "sender's SO_SNDBUF (the kernel doubles it); unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    rcvbuf: int | None = param("size", None, "receiver's SO_RCVBUF (the kernel doubles it); unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    write_size: int = param("size", "64KB", "bytes per write of the server's response", low=1, high=IO_MAX)

    def sender(self) -> str:
        return "server" if self.response_size >= self.request_size else "client"

    def expected_bytes(self) -> int:
        each = self.response_size if self.sender() == "server" else self.request_size
        return each * self.requests

    def idle_between(self) -> float:
        return 0.0

    def commands(self, path: Any) -> dict[str, list[str]]:
        return {side: program("rpc", self._config(path, side)) for side in SIDES}

    def _config(self, path: Any, side: str) -> dict[str, Any]:
        sends = side == self.sender()
        config: dict[str, Any] = {
            "role": side, "address": path.server.address, "port": self.port,
            "socket": {"cc": self.cc, "sndbuf": self.sndbuf if sends else None,
                       "rcvbuf": None if sends else self.rcvbuf,
                       "nodelay": self.nodelay if side == "client" else self.server_nodelay},
        }
        if side == "client":
            config.update(requests=self.requests, request_size=self.request_size, response_size=self.response_size,
                          split=self.split, idle=self.idle_between())
        else:
            config.update(write_size=self.write_size)
        return config


@register
@dataclass(frozen=True)
class Idleburst(Reqresp):
    """Bursts of ``response_size`` bytes on a kept-alive connection, ``idle`` apart: after an idle
    period the sender may restart from a small window (tcp_slow_start_after_idle)."""

    name: ClassVar[str] = "idleburst"

    requests: int = param("int", 4, "bursts (round trips) on one connection", low=1, high=100_000)
    request_size: int = param("size", 16, "request body bytes (after a 16-byte header)", low=0, high=SIZE_MAX)
    response_size: int = param("size", "256KB", "bytes of each burst", low=1, high=SIZE_MAX)
    idle: float = param("duration", "1s", "pause between bursts", low=0.0, high=600.0)

    def idle_between(self) -> float:
        return self.idle
