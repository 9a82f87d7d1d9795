"""http: Python's http.server serves a generated file, real curl downloads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..params import param
from .base import BUFFER_MAX, IO_MAX, SIZE_MAX, Workload, program, register


@register
@dataclass(frozen=True)
class Http(Workload):
    """One GET of a ``size``-byte file from http.server with curl, optionally ``--limit-rate``."""

    name: ClassVar[str] = "http"

    size: int = param("size", "4MB", "bytes of the file served", low=0, low_open=True, high=SIZE_MAX)
    read_rate: float | None = param("rate", None, "curl --limit-rate (100KB/s, 800kbit); unset: no limit",
                                    low=0.0, low_open=True, optional=True)
    sndbuf: int | None = param("size", None, "server's SO_SNDBUF (the kernel doubles it); unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    write_size: int = param("size", "64KB", "bytes per write of the server", low=1, high=IO_MAX)

    def sender(self) -> str:
        return "server"

    def expected_bytes(self) -> int:
        return self.size

    def commands(self, path: Any) -> dict[str, list[str]]:
        address = path.server.address
        return {
            "server": program("httpserve", {
                "address": address, "port": self.port, "size": self.size, "write_size": self.write_size,
                "socket": {"cc": self.cc, "sndbuf": self.sndbuf},
            }),
            "client": program("httpget", {
                "url": f"http://{address}:{self.port}/file",
                # curl's --limit-rate counts bytes per second
                "limit_rate": None if self.read_rate is None else max(int(self.read_rate / 8), 1),
            }),
        }
