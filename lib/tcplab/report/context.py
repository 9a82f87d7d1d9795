"""What every page of a report states about the run: where, how, and for whom it was made."""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field, replace
from typing import Iterable

from .editions import check_edition
from .text import Messages

__all__ = ["ReportContext", "MODES", "combine_backends"]

MODES = ("live", "replay")


@dataclass(frozen=True)
class ReportContext:
    """The facts printed on the cover and in each page's header and footer."""

    edition: str = "instructor"
    mode: str = "live"
    backend: str | None = None
    profile: str | None = None
    kernel: str = field(default_factory=platform.release)
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())
    title: str | None = None
    language: str | None = None

    def __post_init__(self) -> None:
        check_edition(self.edition)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")

    def messages(self) -> Messages:
        return Messages(self.language)

    def with_backend(self, backend: str | None) -> "ReportContext":
        return replace(self, backend=backend)

    def environment_line(self, t: Messages | None = None) -> str:
        """One line for page footers, e.g. "Linux 6.1.0 · backend: netem · mode: live"."""
        t = t or self.messages()
        return t("env.line", kernel=self.kernel, backend=self.backend_label(t),
                 mode=t.label("mode", self.mode))

    def backend_label(self, t: Messages | None = None) -> str:
        t = t or self.messages()
        if not self.backend:
            return t("value.unknown")
        return ", ".join(t.label("backend", b.strip()) for b in self.backend.split(","))


def combine_backends(backends: Iterable[str | None]) -> str | None:
    """The backends cases ran on, first-seen order, comma-separated; None if none said."""
    seen: list[str] = []
    for b in backends:
        if b and b not in seen:
            seen.append(b)
    return ",".join(seen) or None
