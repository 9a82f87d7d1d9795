"""What every page of a report states about the run: where, how, and for whom it was made."""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field, replace
from typing import Iterable

from ..lab.kernels import MODES
from .editions import check_edition
from .exercises import check_exercises
from ..words import Messages

__all__ = ["ReportContext", "combine_backends", "combine_kernels"]


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
    #: "skip": the cases ran without their exercises (:mod:`.exercises`).
    exercises: str = "run"

    def __post_init__(self) -> None:
        check_edition(self.edition)
        check_exercises(self.exercises)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")

    def messages(self) -> Messages:
        return Messages(self.language)

    def with_backend(self, backend: str | None) -> "ReportContext":
        return replace(self, backend=backend)

    def with_kernel(self, kernel: str | None) -> "ReportContext":
        """The kernel the numbers came from: in replay mode, the one that recorded them."""
        return replace(self, kernel=kernel) if kernel else self

    def environment_line(self, t: Messages | None = None) -> str:
        """One line for page footers, e.g. "Linux 6.1.0 · backend: netem · mode: live"."""
        t = t or self.messages()
        return t("env.line", kernel=t.kernels(self.kernel), backend=self.backend_label(t),
                 mode=t.label("mode", self.mode))

    def backend_label(self, t: Messages | None = None) -> str:
        t = t or self.messages()
        if not self.backend:
            return t("value.unknown")
        return t.backends(self.backend)


def combine_backends(backends: Iterable[str | None]) -> str | None:
    """The backends cases ran on, first-seen order, comma-separated; None if none said."""
    seen: list[str] = []
    for b in backends:
        for one in (b or "").split(","):
            if one and one not in seen:
                seen.append(one)
    return ",".join(seen) or None


def combine_kernels(environments: Iterable[dict]) -> str | None:
    """The kernels named by published scores (``environment["kernel"]``), as one label."""
    return combine_backends(env.get("kernel") for env in environments)
