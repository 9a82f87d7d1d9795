"""Parameter sets: one frozen dataclass per concept, validated once, at the edge.

A parameter set declares each field with :func:`param`, giving its kind (how strings are
read), its accepted range and a one-line help. Building the dataclass parses and checks
every field, so an object that exists is valid; nothing on the system has been touched yet.
The same declarations feed ``tcplab run --help``, the CLI's ``--set key=value`` and the
run records, so the vocabulary is one everywhere.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .units import (
    ParameterError,
    format_duration,
    format_rate,
    format_size,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)
from .words import languages

__all__ = ["Params", "param", "ParameterError", "check_language"]


class _Stored:
    """A value already in the stored unit (seconds, bit/s, bytes): bounds-checked, not re-parsed."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _parse_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ParameterError(name, value, "true or false (also 1/0, yes/no, on/off)")


def _parse_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise ParameterError(name, value, "a whole number")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(name, value, "a whole number") from None
    if not math.isfinite(number) or number != int(number):
        raise ParameterError(name, value, "a whole number")
    return int(number)


def _parse_float(name: str, value: object) -> float:
    if isinstance(value, bool):
        raise ParameterError(name, value, "a number")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(name, value, "a number") from None
    if not math.isfinite(number):
        raise ParameterError(name, value, "a finite number")
    return number


def _parse_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ParameterError(name, value, "a text value")
    return value


_KINDS: dict[str, tuple[Callable[[str, object], Any], Callable[[Any], str]]] = {
    "duration": (parse_duration, format_duration),
    "rate": (parse_rate, format_rate),
    "size": (parse_size, format_size),
    "percent": (parse_percent, lambda v: f"{v:g} %"),
    "int": (_parse_int, str),
    "float": (_parse_float, lambda v: f"{v:g}"),
    "bool": (_parse_bool, lambda v: "on" if v else "off"),
    "str": (_parse_str, str),
    "choice": (_parse_str, str),
}


def param(
    kind: str,
    default: Any,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    choices: Iterable[str] | None = None,
    optional: bool = False,
) -> Any:
    """Declare one field of a :class:`Params` dataclass.

    ``low``/``high`` bound the parsed value (in the stored unit: seconds, bit/s, bytes,
    percent); ``low_open`` excludes ``low`` itself (a rate of 0 is not a rate).
    ``optional`` lets the field be ``None`` (for example "unset: kernel autotuning").
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown parameter kind {kind!r}")
    meta = {
        "kind": kind, "help": help, "low": low, "high": high, "low_open": low_open,
        "choices": tuple(choices) if choices is not None else None, "optional": optional,
    }
    return dataclasses.field(default=default, metadata={"tcplab": meta})


#: Set while a set is rebuilt from a run record: the checks against this machine are skipped.
_FROM_RECORD = contextvars.ContextVar("tcplab_params_from_record", default=False)


@dataclass(frozen=True)
class Params:
    """Base class of every parameter set. Subclasses are frozen dataclasses of :func:`param` fields."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            meta = f.metadata.get("tcplab")
            if meta is None:
                continue
            object.__setattr__(self, f.name, self._check_field(f.name, meta, getattr(self, f.name)))
        self.validate()
        if not _FROM_RECORD.get():
            self.check_machine()

    @staticmethod
    def _check_field(name: str, meta: dict, value: Any) -> Any:
        if isinstance(value, _Stored):
            value = value.value
            if value is not None:
                value = _Stored(value)
        if value is None or (meta["optional"] and isinstance(value, str) and value.lower() in ("", "none", "unset", "auto")):
            if meta["optional"]:
                return None
            raise ParameterError(name, value, _accepted(meta), "a value is required")
        parse, show = _KINDS[meta["kind"]]
        if isinstance(value, _Stored):
            parsed, value = value.value, show(value.value)
        else:
            parsed = parse(name, value)
        if meta["choices"] is not None and parsed not in meta["choices"]:
            raise ParameterError(name, value, _accepted(meta))
        low, high = meta["low"], meta["high"]
        if low is not None and (parsed < low or (meta["low_open"] and parsed == low)):
            raise ParameterError(name, value, _accepted(meta), "out of range")
        if high is not None and parsed > high:
            raise ParameterError(name, value, _accepted(meta), "out of range")
        return parsed

    def validate(self) -> None:
        """Cross-field checks; subclasses override and raise :class:`ParameterError`."""

    def check_machine(self) -> None:
        """Checks against this machine (a congestion control its kernel has, a sysctl it
        knows); subclasses override. Skipped for a set rebuilt from a run record, which may
        come from another kernel."""

    # --- building ---------------------------------------------------------------------------
    @classmethod
    def from_stored(cls, **values: Any):
        """Build from values already in stored units (e.g. another set's seconds and bit/s)."""
        known = set(cls.names())
        return cls(**{k: (_Stored(v) if k in known else v) for k, v in values.items()})

    @classmethod
    def from_record(cls, values: Mapping[str, Any], **fields: Any):
        """Rebuild from a run record's stored values (``to_dict()``'s output): each value is
        checked as stored, the set's own cross-field rules hold, but not :meth:`check_machine`.
        Keys the set does not declare are ignored; a parameter the record predates takes its
        default. ``fields`` are the set's other fields, as they are."""
        known = set(cls.names())
        token = _FROM_RECORD.set(True)
        try:
            return cls.from_stored(**{k: v for k, v in values.items() if k in known}, **fields)
        finally:
            _FROM_RECORD.reset(token)

    def replaced(self, **changes: Any):
        """A copy with ``changes`` (values as a user writes them, checked as usual); the other
        fields keep their parsed values (20 ms stays 0.02 s, not re-read as 0.02 ms)."""
        known = set(self.names())
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        kept = {k: _Stored(v) for k, v in values.items() if k in known and k not in changes}
        return type(self)(**{**values, **kept, **changes})

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if "tcplab" in f.metadata]

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], *, ignore_unknown: bool = False):
        """Build from a mapping of user settings (e.g. ``--set`` pairs); unknown keys are an error."""
        known = set(cls.names())
        unknown = sorted(set(settings) - known)
        if unknown and not ignore_unknown:
            raise ParameterError(
                unknown[0], settings[unknown[0]], "one of: " + ", ".join(sorted(known)),
                f"unknown parameter for {cls.__name__}",
            )
        return cls(**{k: v for k, v in settings.items() if k in known})

    # --- describing ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain values in stored units (seconds, bit/s, bytes, percent), JSON-ready."""
        return {name: getattr(self, name) for name in self.names()}

    def describe(self) -> dict[str, str]:
        """Human-readable values, e.g. ``{"delay": "10 ms", "rate": "100 Mbit/s"}``."""
        out = {}
        for f in dataclasses.fields(self):
            meta = f.metadata.get("tcplab")
            if meta is None:
                continue
            value = getattr(self, f.name)
            out[f.name] = "unset" if value is None else _KINDS[meta["kind"]][1](value)
        return out

    @classmethod
    def help_rows(cls) -> list[tuple[str, str, str, str]]:
        """(name, default, accepted, help) for every field, for ``--help`` and the docs."""
        rows = []
        for f in dataclasses.fields(cls):
            meta = f.metadata.get("tcplab")
            if meta is None:
                continue
            default = f.default
            shown = "unset" if default is None else _KINDS[meta["kind"]][1](
                _KINDS[meta["kind"]][0](f.name, default)
            )
            rows.append((f.name, shown, _accepted(meta), meta["help"]))
        return rows


def _accepted(meta: dict) -> str:
    kind = meta["kind"]
    if meta["choices"] is not None:
        text = "one of " + ", ".join(meta["choices"])
    else:
        fmt = _KINDS[kind][1]
        low, high = meta["low"], meta["high"]
        unit_hint = {
            "duration": "a duration (20ms, 1.5s; bare number = ms)",
            "rate": "a rate (100mbit, 1gbit; bare number = Mbit/s)",
            "size": "a size (16KB, 22MB; bare number = bytes)",
            "percent": "a percentage (1%, 0.1)",
            "int": "a whole number",
            "float": "a number",
            "bool": "on or off",
            "str": "text",
        }[kind]
        bounds = ""
        if low is not None and high is not None:
            bounds = f" from {fmt(low)}{' (excluded)' if meta['low_open'] else ''} to {fmt(high)}"
        elif low is not None:
            bounds = f" {'above' if meta['low_open'] else 'at least'} {fmt(low)}"
        elif high is not None:
            bounds = f" at most {fmt(high)}"
        text = unit_hint + bounds
    if meta["optional"]:
        text += ", or unset"
    return text


def check_language(language: str) -> str:
    """``language`` when it has a strings file; else a :class:`ParameterError` listing those that do."""
    if language not in languages():
        raise ParameterError("language", language, "one of " + ", ".join(languages()))
    return language
