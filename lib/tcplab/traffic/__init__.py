"""Workloads: real programs in the client and server namespaces that behave like applications
(step 2 of the journey). ``WORKLOADS[name](**settings).launch(path, logdir).wait()``.

The names below load on first use (PEP 562). The side programs (:mod:`.programs`) run as
processes of their own, and a program's start imports this package first: loaded eagerly, it
brought pyroute2 and the lab with it, 0.26 s a start on the host and 1.2 s in a UML kernel,
twice a run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for readers and type checkers
    from .base import WORKLOADS, Workload
    from .http import Http
    from .iperf import Iperf
    from .probed import Probed
    from .result import AppResult
    from .roundtrips import Idleburst, Reqresp
    from .running import RunningWorkload, WorkloadError, WorkloadFailed, WorkloadTimeout
    from .streams import Bulk, Ratelimited, Shortconns, Slowreader

#: Each name this package offers, and the module that owns it.
_OWNERS = {
    "WORKLOADS": "base", "Workload": "base", "Bulk": "streams", "Slowreader": "streams", "Ratelimited": "streams",
    "Shortconns": "streams", "Reqresp": "roundtrips", "Idleburst": "roundtrips", "Http": "http", "Iperf": "iperf",
    "Probed": "probed", "RunningWorkload": "running", "AppResult": "result", "WorkloadTimeout": "running",
    "WorkloadFailed": "running", "WorkloadError": "running",
}
#: The modules whose workloads register themselves in WORKLOADS: all load before any name is
#: handed out, so the registry is whole whichever name is asked for first.
_REGISTERING = ("http", "iperf", "probed", "roundtrips", "streams")

__all__ = list(_OWNERS)


def __getattr__(name: str) -> Any:
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in _REGISTERING:
        importlib.import_module(f".{module}", __name__)
    value = getattr(importlib.import_module(f".{owner}", __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_OWNERS})
