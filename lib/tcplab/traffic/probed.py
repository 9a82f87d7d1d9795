"""A bulk transfer with a latency probe beside it (program: programs/probed.py).

The probe is what a call (voice, video) does on the same path: a small UDP datagram every
``probe_interval``, whether or not the last one came back, which the server sends straight back.
It starts ``probe_lead`` before the bulk transfer, so its first round trips measure the path
without it, and stops when the transfer ends. Each probe's send time and round trip (None for
one that never came back) are in the client's report (:func:`probes_of`); the rest of the result
is the bulk transfer's, as for :class:`~.streams.Bulk`. The capture and the ``ss`` samples follow
the transfer's TCP port, so they never mix the probe in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..params import param
from ..units import ParameterError
from .base import SIDES, program, register
from .streams import Bulk

#: The probe's datagrams: small, as a call's are (8 bytes carry its number).
PROBE_SIZE = (8, 1400)


@register
@dataclass(frozen=True)
class Probed(Bulk):
    """``bulk``, and a latency probe beside it: a UDP datagram of ``probe_size`` bytes every
    ``probe_interval``, echoed by the server, from ``probe_lead`` before the transfer until it ends."""

    name: ClassVar[str] = "probed"

    probe_interval: float = param("duration", "20ms", "time between two probes (each goes on time, answered or not)",
                                  low=0.001, high=10.0)
    probe_size: int = param("size", 64, "bytes of each probe's datagram (its echo is as large)", low=PROBE_SIZE[0],
                            high=PROBE_SIZE[1])
    probe_lead: float = param("duration", "1s", "probes alone before the transfer starts: the path without it",
                              low=0.0, high=600.0)
    probe_port: int = param("int", 5002, "the server's UDP port for the probe", low=1, high=65535)

    def commands(self, path: Any) -> dict[str, list[str]]:
        probe = {"port": self.probe_port, "size": self.probe_size, "interval": self.probe_interval,
                 "lead": self.probe_lead}
        return {side: program("probed", {**self._config(path, side), "probe": probe}) for side in SIDES}


def probes_of(app: Any) -> list[tuple[float, float | None]]:
    """(sent, round trip) of each probe of a run, from its :class:`AppResult`: epoch and seconds,
    the round trip None for a probe that never came back; empty where the run had no probe."""
    extra = ((app.extra or {}).get("sides", {}).get("client", {}).get("extra", {})) if app is not None else {}
    return [(float(sent), None if rtt is None else float(rtt)) for sent, rtt in extra.get("probes", [])]
