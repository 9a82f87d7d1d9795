"""What a case notebook calls to get its runs: each variant run live, or read back from recorded data.

::

    lab = CaseLab(case_id, mode=mode, profile=profile, fresh=fresh)
    size = lab.pick(size, quick="6MB", full="22MB")
    slow = lab.run("sndbuf-16KB", Bulk(size=size, sndbuf="16KB"), path=PathSpec(rtt="20ms", rate="100mbit"))
    slow.goodput_bps, slow.packets, slow.diagnosis

Where the runs come from is chosen once, when the lab is made (:mod:`.sources`): a live lab on this
machine's kernel or a UML kernel (an :class:`~tcplab.experiment.Experiment` per variant on a real
path; a recorded run with the same parameters is reused unless ``fresh``), or the runs recorded
with the case (replay mode, after checking that each was recorded with the parameters the notebook
now asks for). Either way the notebook gets a :class:`Trial`. What the page says of them is the
page's (:class:`tcplab.report.page.CasePage`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from ..course import PROFILES
from ..experiment import RunPlan
from ..lab import NetPath, PathSpec
from ..lab.kernels import AGENT_KERNELS, check_needs, choose_mode, on_kernel
from ..observe import ObserveSpec
from ..observe.health import late_worst_s
from ..units import ParameterError
from .sources import RUN_TRIES, LiveSource, ReplayedPath, ReplaySource, RunSource
from .sweep import whole_runs
from .trial import Trial

__all__ = ["CaseLab", "ReplayedPath", "RUN_TRIES"]

PathLike = NetPath | ReplayedPath | PathSpec | Mapping[str, Any]


class CaseLab:
    """One execution of one case notebook: its mode, profile, and the variants it ran."""

    def __init__(self, case_id: str, *, mode: str = "live", profile: str = "quick", fresh: bool = False,
                 kernel: str | None = "auto", runs_dir: str | os.PathLike | None = None,
                 replay_dir: str | os.PathLike | None = None) -> None:
        if profile not in PROFILES:
            raise ParameterError("profile", profile, "one of " + ", ".join(PROFILES))
        # Without root, the UML kernel runs the lab; with neither, the course replays.
        choice = choose_mode(mode, kernel)
        self.case_id = case_id
        self.profile = profile
        self.source: RunSource = (
            LiveSource(case_id, kernel=choice.kernel, kernel_why=choice.why, profile=profile, fresh=bool(fresh),
                       runs_dir=runs_dir)
            if choice.mode == "live" else ReplaySource(case_id, replay_dir=replay_dir))
        self.trials: dict[str, Trial] = {}
        #: Health readings of the measurements made outside run records (:meth:`measure`).
        self.measured: dict[str, dict[str, Any]] = {}
        #: Why paths ran in another kernel than the lab's (:func:`tcplab.lab.kernels.path_kernel`),
        #: which the page says beside the lab's kernel.
        self.moved: set[str] = set()
        self._before_first: list[Callable[[], Any]] = []
        #: The lab kernels of the paths open now (:meth:`path`), innermost last.
        self._path_kernels: list[str | None] = []

    def before_first_run(self, callback: Callable[[], Any]) -> None:
        """Call ``callback()`` once, just before the lab gets its first measurement (a run, a
        kept value), live or replayed: what a page records of the moment (the predictions as
        they stood, :meth:`tcplab.report.page.CasePage.record_predictions`)."""
        self._before_first.append(callback)

    def _starting(self) -> None:
        while self._before_first:
            self._before_first.pop(0)()

    def __reduce__(self):
        raise TypeError("a CaseLab stays in the notebook: give keep() and live() a function of the path "
                        "(lambda: f(path)), not one that uses the lab")

    @property
    def mode(self) -> str:
        return self.source.mode

    @property
    def kernel(self) -> str | None:
        """The kernel the live variants run on ("host", "userns" or "uml"; None in replay)."""
        return self.source.kernel

    @property
    def kernel_why(self) -> str:
        return self.source.kernel_why

    # --- parameters -------------------------------------------------------------------------------
    def pick(self, value: Any, *, quick: Any, full: Any) -> Any:
        """``value`` if the notebook was given one, else the profile's default."""
        if value is not None:
            return value
        return quick if self.profile == "quick" else full

    # --- paths ----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def path(self, spec: PathSpec | Mapping[str, Any] | None = None, *, needs: Sequence[str] = (),
             **settings: Any) -> Iterator[NetPath | ReplayedPath]:
        """A path kept up for several variants in a row (state carried between them, such as
        tcp_metrics); in replay mode a stand-in with only the spec. ``needs`` names what the
        notebook will do on it that only the machine's administrator may
        (:data:`~tcplab.lab.kernels.ADMIN_ONLY`, such as "tcp_metrics flush"): a user
        namespace's lab runs such a path in the UML kernel, and the page says why. Inside the
        ``with`` block, :meth:`live` and :meth:`keep` act in the kernel the path lives in."""
        spec = self._on_kernel(_spec(spec, settings), check_needs(needs))
        with self.source.path(spec) as path:
            self._path_kernels.append(getattr(path, "kernel", None))
            try:
                yield path
            finally:
                self._path_kernels.pop()

    def _on_kernel(self, spec: PathSpec, needs: tuple[str, ...] = ()) -> PathSpec:
        """The spec as this execution runs it: on the lab's kernel when that is one of its own
        (UML, a user namespace), so its runs are told from the host's (a different run key);
        a path a user namespace cannot make (a host-global setting, an administrator's
        action) on the UML kernel, and the page says why (:attr:`moved`)."""
        if self.kernel in AGENT_KERNELS and spec.kernel is None:
            spec, why = on_kernel(spec, self.kernel, needs)
            if why:
                self.moved.add(why)
        return spec

    def _acting_kernel(self) -> str | None:
        """Where :meth:`live` and :meth:`keep` act: in the innermost open path's kernel where
        that is another lab kernel of its own than the lab's (a path sent to UML), so a
        function of that path finds it; else None, the lab's kernel."""
        inner = self._path_kernels[-1] if self._path_kernels else None
        return inner if inner in AGENT_KERNELS and inner != self.kernel else None

    def kernels_side_by_side(self) -> tuple[list[str], str]:
        """The lab kernels a side-by-side section compares, the lab's own first, and why the
        other one is missing where it is: live, the other kernel joins where it can run here
        too (the host's needs root, UML its kernel); replay shows what was recorded."""
        return self.source.side_by_side()

    def in_lab(self, action: Callable[[], Any]) -> Any:
        """``action()`` in the lab's kernel: here, or inside the UML kernel (where a path's
        stand-in in ``action``'s closure is the live path itself)."""
        return self.source.in_lab(action)

    def holding(self, factory: Callable[..., Any], *args: Any) -> contextlib.AbstractContextManager[Any]:
        """``factory(*args)`` (a context manager, such as another application's sockets)
        entered in the lab's kernel around the variants of the ``with`` block, when the lab is
        live; None in replay (the recorded runs had theirs). Use what it gives inside
        :meth:`keep`, :meth:`live` or :meth:`in_lab`, which run in that kernel too."""
        return self.source.holding(factory, *args)

    def live(self, action: Callable[[], Any]) -> Any:
        """Do ``action`` in the lab's kernel (in an open path's own, :meth:`path`), only when
        the lab is live (a flush between variants); None in replay."""
        return self.source.live(action, kernel=self._acting_kernel())

    def keep(self, name: str, compute: Callable[[], Any], *, kernel: str | None = None) -> Any:
        """A JSON value measured live (``compute()``, in the lab's kernel or an open path's own,
        or in ``kernel``: one that :meth:`kernels_side_by_side` named) and shipped with the
        replay data."""
        self._starting()
        return self.source.keep(name, compute, kernel=kernel or self._acting_kernel())

    def measure(self, name: str, path: NetPath | ReplayedPath, compute: Callable[[], Any]) -> Any:
        """:meth:`keep` for a measurement made outside a run record on ``path`` (case 00's): taken
        with a run's health readings around it, made again when the machine disturbed it
        (RUN_TRIES in all, as a variant), its readings kept beside the value (``NAME.health``)
        so the page is judged busy as a disturbed variant's would be, live and in replay."""
        self._starting()
        value, self.measured[name] = self.source.measure(name, path, compute)
        return value

    def late_s(self, name: str) -> float:
        """The latest the path's delay line released a packet past its due time during measurement
        ``name`` (:meth:`measure`; its kept health): how far the times it read can lag the line,
        as :attr:`Trial.late_s` says of a run. 0 where no delay line ran."""
        return late_worst_s(self.measured.get(name) or {})

    # --- variants -------------------------------------------------------------------------------------
    def run(self, label: str, workload: Any, *, path: PathLike, observe: ObserveSpec | Mapping[str, Any] | None = None,
            repetition: int = 1) -> Trial:
        """Run (or replay) one variant; ``label`` names it in tables and in the replay data."""
        if not label or "/" in label or label.startswith("."):
            raise ParameterError("label", label, "a name without '/' that does not start with '.'")
        self._starting()
        observe = observe if isinstance(observe, ObserveSpec) else ObserveSpec(**dict(observe or {}))
        # Worked out once: replay matches it, reuse looks it up, a new record is filed under it.
        spec = self._on_kernel(_spec_of(path))
        plan = RunPlan.of(spec, workload, observe, repetition)
        run = self.source.run(label, plan, workload, observe, path if isinstance(path, NetPath) else spec)
        trial = self.trials[label] = Trial(label, run, replayed=self.mode == "replay")
        return trial

    def repeat(self, label: str, workload: Any, *, path: PathLike, times: int,
               observe: ObserveSpec | Mapping[str, Any] | None = None) -> list[Trial]:
        """``times`` runs of one variant, labelled ``label#1`` …, for spreads and confidence
        bands; a single run is plain ``label``, as pages name it."""
        if whole_runs("repetitions", times) == 1:
            return [self.run(label, workload, path=path, observe=observe)]
        return [self.run(f"{label}#{i}", workload, path=_drawn_anew(path, i), observe=observe, repetition=i)
                for i in range(1, times + 1)]

    # --- what the variants were -----------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """The link emulation backend(s) the variants ran on, e.g. "delayline"."""
        seen = [*self.source.backends(), *(t.backend for t in self.trials.values() if t.backend)]
        return ",".join(dict.fromkeys(seen)) or "none"

    @property
    def kernels(self) -> str | None:
        """The lab kernels the numbers come from ("6.18.44 (host)"): the ones the paths and
        variants ran on here, or in replay the ones that recorded them."""
        return self.source.kernels()

    @property
    def runs_profile(self) -> str | None:
        """The profile the runs were made with: this execution's, or the recorded runs'."""
        return self.source.recorded_profile()

    def health(self) -> tuple[int, list[str]]:
        """How many of the variants and measurements read so far carry a health reading, and
        why the machine disturbed any of them ("label: reason")."""
        read = {t.label: t.health for t in self.trials.values() if t.health}
        read.update({name: health for name, health in self.measured.items() if health})
        return len(read), [f"{label}: {reason}" for label, health in read.items()
                           for reason in health.get("disturbed", [])]

    def table(self, trials: Sequence[Trial] | None = None) -> pd.DataFrame:
        """One row per variant: goodput, duration, the buffers the kernel granted, cc."""
        chosen = list(trials) if trials is not None else list(self.trials.values())
        return pd.DataFrame([t.row() for t in chosen]).set_index("variant")


def _spec(spec: PathSpec | Mapping[str, Any] | None, settings: Mapping[str, Any]) -> PathSpec:
    if spec is not None and settings:
        raise TypeError("give a PathSpec or keyword settings, not both")
    if isinstance(spec, PathSpec):
        return spec
    return PathSpec(**dict(spec or settings))


def _drawn_anew(path: PathLike, repetition: int) -> PathLike:
    """The path of repetition ``repetition``: where the delay line draws random loss or jitter, a
    draw of its own (the seed moved on by ``repetition`` − 1), since the same seed on the same
    path drops the same packets again and a spread of such repeats measures nothing of loss's
    luck. The first keeps the seed, so its key is the single run's. A path already up (a
    NetPath) keeps its delay line, whose draws go on from one run to the next."""
    if repetition == 1 or isinstance(path, (NetPath, ReplayedPath)):
        return path
    spec = _spec_of(path)
    if not any(shape.loss or shape.jitter for shape in spec.shapes().values()):
        return path
    return spec.replaced(seed=spec.seed + repetition - 1)


def _spec_of(path: PathLike) -> PathSpec:
    if isinstance(path, (NetPath, ReplayedPath)):
        return path.spec
    return _spec(path, {})
