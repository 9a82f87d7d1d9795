"""Packet captures as tables: a fast pcap/pcapng reader and Wireshark's TCP expert analysis;
per-flow metrics and the diagnosis of what limited a transfer.

The names below load on first use (PEP 562), not with the package: importing any one module
of it (``tcplab.analysis._jit`` above all, which must act before the kernels load) would
otherwise load pandas, numba and every kernel first.
"""

from __future__ import annotations

import importlib
import sys
import types

#: Public name → the module of this package that defines it.
_HOMES = {
    "Diagnosis": "diagnose", "DiagnosisContext": "diagnose", "diagnose": "diagnose",
    "analyze": "expert",
    "FlowMetrics": "metrics", "flow_metrics": "metrics",
    "PacketTable": "packets", "PcapError": "packets", "PcapSource": "packets", "PcapWarning": "packets",
    "read_packets": "packets",
}

__all__ = sorted(_HOMES, key=str.lower)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


class _Package(types.ModuleType):
    """Importing the module ``.diagnose`` binds it here under its name, which is also the
    function's; the package's ``diagnose`` stays the function, as when it was imported eagerly."""

    def __setattr__(self, name: str, value) -> None:
        if _HOMES.get(name) == name and value is sys.modules.get(f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
