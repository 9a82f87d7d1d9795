"""What the application saw: one :class:`AppResult` per workload run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AppResult:
    """The application's view of a run, built from the JSON each side printed.

    ``start`` is the first payload write, ``end`` the last payload byte read (epoch seconds,
    ``time.time()``; both sides share the machine's clock). A result with ``ok=False`` (a
    timeout, a failed side) is partial: the times are ``None`` when a side never got there.
    """

    workload: str
    ok: bool
    error: str | None
    bytes: int = 0
    start: float | None = None
    end: float | None = None
    duration: float | None = None
    goodput_bps: float | None = None
    requests: list[dict] = field(default_factory=list)
    sockets: dict[str, dict] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None:
            if self.duration is None:
                self.duration = max(self.end - self.start, 0.0)
            if self.goodput_bps is None and self.duration > 0:
                self.goodput_bps = self.bytes * 8 / self.duration

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of_run(cls, run: Any) -> "AppResult | None":
        """What the application saw in a run record (:class:`tcplab.runs.Run`); None where it
        recorded nothing (a run killed before its workload ended)."""
        data = run.meta.get("app")
        return None if data is None else cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AppResult":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"not AppResult fields: {', '.join(unknown)}")
        return cls(**data)
