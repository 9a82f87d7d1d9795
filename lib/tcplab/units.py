"""Quantities as people write them ("20ms", "100mbit", "16KB", "1%") turned into numbers.

Conventions, chosen to match the tools the course talks about:

* durations are stored in seconds; a bare number means milliseconds (``rtt=20``);
* rates are stored in bit/s; ``kbit``/``mbit``/``gbit`` are decimal as in tc(8), a bare
  number means Mbit/s (``rate=100``); ``MB/s`` means bytes per second;
* sizes are stored in bytes; ``KB``/``MB``/``GB`` are binary (1024) as in tc(8) and in the
  kernel's buffer sysctls, a bare number means bytes;
* percentages are stored as percent (``loss="1%"`` and ``loss=1`` are both 1.0).

Every parse failure raises :class:`ParameterError`, which names the parameter and what
it accepts, so the message can be shown to a user as it is.
"""

from __future__ import annotations

import math
import re

from .words import SaidWhereItArose, messages

__all__ = [
    "ParameterError",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "parse_percent",
    "format_duration",
    "format_rate",
    "format_byte_rate",
    "format_size",
    "format_share",
]


#: What separates groups of three digits in every number a page writes (12 345).
THIN_SPACE = "\u202f"


class ParameterError(SaidWhereItArose, ValueError):
    """A parameter value that cannot be used; says which parameter and what is accepted."""

    def __init__(self, name: str, value: object, accepted: str, why: str = "") -> None:
        self.name = name
        self.value = value
        self.accepted = accepted
        self.why = why
        # Said in the language in force where it arose (a page's, or --language): ``accepted`` and
        # ``why`` are English phrases, which the strings files translate (words.error_phrase).
        super().__init__(messages().parameter_error(name, value, accepted, why))

    def _rebuilt_by(self):
        return type(self), (self.name, self.value, self.accepted, self.why)


_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"

_TIME_UNITS = {
    "": 1e-3, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0,
    "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0, "min": 60.0,
}
_RATE_UNITS = {
    "": 1e6, "bit": 1.0, "bit/s": 1.0, "kbit": 1e3, "kbit/s": 1e3, "mbit": 1e6, "mbit/s": 1e6,
    "gbit": 1e9, "gbit/s": 1e9, "b/s": 8.0, "kb/s": 8e3, "mb/s": 8e6, "gb/s": 8e9,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
    "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
}


def _split(name: str, value: str, accepted: str) -> tuple[float, str]:
    match = re.fullmatch(_NUMBER + r"\s*([a-zA-Zµ/%]*)", value.strip())
    if not match:
        raise ParameterError(name, value, accepted, "not a number with a unit")
    return float(match.group(1)), match.group(2)


def _finite(name: str, number: float, value: object, accepted: str) -> float:
    if not math.isfinite(number):
        raise ParameterError(name, value, accepted, "not a finite number")
    return number


def parse_duration(name: str, value: object) -> float:
    """Seconds from ``"20ms"``, ``"1.5s"``, ``"250us"`` or a number of milliseconds."""
    accepted = "a duration such as 20ms, 1.5s, 250us, or a number of milliseconds"
    if isinstance(value, bool):
        raise ParameterError(name, value, accepted)
    if isinstance(value, (int, float)):
        return _finite(name, float(value), value, accepted) * 1e-3
    if not isinstance(value, str):
        raise ParameterError(name, value, accepted)
    number, unit = _split(name, value, accepted)
    scale = _TIME_UNITS.get(unit.lower() if unit != "µs" else unit)
    if scale is None:
        raise ParameterError(name, value, accepted, f"unknown time unit {unit!r}")
    return _finite(name, number * scale, value, accepted)


def parse_rate(name: str, value: object) -> float:
    """Bits per second from ``"100mbit"``, ``"1gbit"``, ``"12.5MB/s"`` or a number of Mbit/s."""
    accepted = "a rate such as 100mbit, 1gbit, 500kbit, 12.5MB/s, or a number of Mbit/s"
    if isinstance(value, bool):
        raise ParameterError(name, value, accepted)
    if isinstance(value, (int, float)):
        return _finite(name, float(value), value, accepted) * 1e6
    if not isinstance(value, str):
        raise ParameterError(name, value, accepted)
    number, unit = _split(name, value, accepted)
    key = unit.lower()
    if key.endswith("bps"):
        raise ParameterError(
            name, value, accepted,
            "ambiguous: tc reads 'mbps' as megabytes per second; write 100mbit or 12.5MB/s",
        )
    scale = _RATE_UNITS.get(key)
    if scale is None:
        raise ParameterError(name, value, accepted, f"unknown rate unit {unit!r}")
    return _finite(name, number * scale, value, accepted)


def parse_size(name: str, value: object) -> int:
    """Bytes from ``"16KB"``, ``"22MB"``, ``"1500"`` or a number of bytes (K = 1024)."""
    accepted = "a size such as 16KB, 22MB, 1500 (bytes); KB/MB/GB are powers of 1024"
    if isinstance(value, bool):
        raise ParameterError(name, value, accepted)
    if isinstance(value, (int, float)):
        number, scale = _finite(name, float(value), value, accepted), 1
    elif isinstance(value, str):
        number, unit = _split(name, value, accepted)
        scale = _SIZE_UNITS.get(unit.lower())
        if scale is None:
            raise ParameterError(name, value, accepted, f"unknown size unit {unit!r}")
    else:
        raise ParameterError(name, value, accepted)
    result = number * scale
    if result != int(result):
        raise ParameterError(name, value, accepted, "not a whole number of bytes")
    return int(result)


def parse_percent(name: str, value: object) -> float:
    """Percent from ``"1%"``, ``"0.1%"`` or a number of percent."""
    accepted = "a percentage such as 1%, 0.1%, or a number of percent"
    if isinstance(value, bool):
        raise ParameterError(name, value, accepted)
    if isinstance(value, (int, float)):
        return _finite(name, float(value), value, accepted)
    if not isinstance(value, str):
        raise ParameterError(name, value, accepted)
    number, unit = _split(name, value, accepted)
    if unit not in ("", "%"):
        raise ParameterError(name, value, accepted, f"unknown unit {unit!r}")
    return _finite(name, number, value, accepted)


def format_duration(seconds: float) -> str:
    if seconds == 0:
        return "0 ms"
    return _scaled(seconds, ((1, "s"), (1e-3, "ms"), (1e-6, "µs"))) or f"{seconds * 1e6:.3g} µs"


def _scaled(value: float, scales: tuple[tuple[float, str], ...]) -> str | None:
    """``value`` in the largest unit it reaches once rounded to three significant digits,
    never in exponent form (1023.9 KB is "1 MB", 1020.4 KB "1020 KB"); None below the smallest."""
    for scale, unit in scales:
        rounded = float(f"{value / scale:.3g}")
        if abs(rounded) >= 1:
            return f"{rounded:g} {unit}"
    return None


def format_rate(bits_per_second: float) -> str:
    scaled = _scaled(bits_per_second, ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"), (1, "bit/s")))
    return scaled or f"{bits_per_second:.3g} bit/s"


def format_byte_rate(bytes_per_second: float) -> str:
    """Bytes per second in decimal units, as the course defines them (MB/s = 10⁶ B/s; buffer
    sizes, in :func:`format_size`, count KB = 1024 B)."""
    scaled = _scaled(bytes_per_second, ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1, "B/s")))
    return scaled or f"{bytes_per_second:.3g} B/s"


def format_size(size: float) -> str:
    return _scaled(size, ((1024**3, "GB"), (1024**2, "MB"), (1024, "KB"))) or f"{int(size)} B"


def format_share(fraction: float, *, signed: bool = False) -> str:
    """A fraction as a percentage to one decimal (0.354 → "35.4 %", 0.5 → "50 %"); ``signed``,
    a change from a reference ("+6.1 %", "-12 %"). A nonzero share too small for one decimal (3
    resent segments of thousands) is "< 0.1 %", never a bare "0 %"."""
    if not math.isfinite(fraction):
        return "—"
    percent = 100 * fraction
    if 0 < abs(percent) < 0.05:
        return "< 0.1 %"
    text = f"{round(percent, 1):,.1f}".removesuffix(".0").replace(",", THIN_SPACE)
    if text == "-0":
        text = "0"
    return f"{'+' if signed and percent > 0 else ''}{text} %"
