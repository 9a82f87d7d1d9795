"""What a case notebook calls: run each variant live, or read it back from recorded data.

::

    lab = CaseLab(case_id, mode=mode, profile=profile, fresh=fresh)
    size = lab.pick(size, quick="6MB", full="22MB")
    slow = lab.run("sndbuf-16KB", Bulk(size=size, sndbuf="16KB"), path=PathSpec(rtt="20ms", rate="100mbit"))
    slow.goodput_bps, slow.packets, slow.diagnosis

In live mode each variant is an :class:`~tcplab.experiment.Experiment` on a real path
(a recorded run with the same parameters is reused unless ``fresh``); in replay mode the
same call reads ``data/replay/<case>/<label>/``, after checking that it was recorded with
the parameters the notebook now asks for. Either way the notebook gets a :class:`Trial`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from ..course import PROFILES
from ..experiment import Experiment, RunPlan, reusable_run
from ..lab import NetPath, PathSpec
from ..lab.kernels import AGENT_KERNELS, CAN_RUN, call_in, choose_mode, held_in, on_kernel
from ..lab.state import QueuePlace, Turn, exclusive_measurement
from ..observe import ObserveSpec
from ..observe.health import group_run_delay, health_around, judged, reasons_of, wait_share
from ..runs import Run, key_of, runs_root
from ..units import ParameterError
from ..words import Messages
from . import replay
from .trial import Trial, kernel_label, kernel_of
from .variants import VariantTable

__all__ = ["CaseLab", "ReplayedPath"]

#: How many times a variant runs when the machine disturbs it (``observe.health``) before its
#: last run stands, marked disturbed.
RUN_TRIES = 3


@dataclass
class ReplayedPath:
    """Stands for a path in replay mode: it has the spec, and nothing to act on."""

    spec: PathSpec


PathLike = NetPath | ReplayedPath | PathSpec | Mapping[str, Any]


class CaseLab:
    """One execution of one case notebook: its mode, profile, and the variants it ran."""

    def __init__(self, case_id: str, *, mode: str = "live", profile: str = "quick", fresh: bool = False,
                 kernel: str | None = "auto", runs_dir: str | os.PathLike | None = None,
                 replay_dir: str | os.PathLike | None = None) -> None:
        from .. import plots
        from ..report.tables import use_house_style

        use_house_style()  # every table the notebook shows, written as the pages write numbers
        # Every figure too, from the first: one the notebook makes itself (plt.subplots) before
        # any tcplab plot would otherwise lack the CJK font its translated labels need.
        plots.use_house_style()
        # Without root, the UML kernel runs the lab; with neither, the course replays.
        choice = choose_mode(mode, kernel)
        mode = choice.mode
        #: The kernel the live variants run on ("host", "userns" or "uml"; None in replay) and why.
        self.kernel: str | None = choice.kernel
        self.kernel_why = choice.why if choice.mode == "live" else "replay: nothing runs"
        if profile not in PROFILES:
            raise ParameterError("profile", profile, "one of " + ", ".join(PROFILES))
        self.case_id = case_id
        self.mode = mode
        self.profile = profile
        self.fresh = bool(fresh)
        self.runs_dir = runs_dir
        self.trials: dict[str, Trial] = {}
        #: Health readings of the measurements made outside run records (:meth:`measure`).
        self._measured: dict[str, dict[str, Any]] = {}
        self._backends: list[str] = []
        self._kernels: list[str] = []  # "6.1.176 (UML)": the kernels the variants ran on
        self._moved: set[str] = set()  # why paths ran in another kernel than the lab's (kernels.path_kernel)
        self._turn = Turn()  # the machine's measurement queue's turn the live path has
        self._case_runs = runs_root(runs_dir) / case_id
        self._replay = replay.replay_root(replay_dir) / case_id
        if mode == "replay":
            if not (self._replay / replay.INDEX).exists():
                raise replay.ReplayMissing("no_data", case=case_id, folder=self._replay)
            self._recorded = replay.read_index(self._replay)
            #: The recorded variants, which replay looks each label up in.
            self._variants = VariantTable.of_index(case_id, self._replay, self._recorded)
            self._backends = list(self._recorded["backends"])
        elif (self._case_runs / replay.INDEX).exists():
            # The index names what this execution of the case uses, so a variant a notebook
            # no longer runs is not shipped as replay data.
            replay.write_index(self._case_runs, replay.empty_index())

    def __reduce__(self):
        raise TypeError("a CaseLab stays in the notebook: give keep() and live() a function of the path "
                        "(lambda: f(path)), not one that uses the lab")

    # --- parameters -------------------------------------------------------------------------------
    def pick(self, value: Any, *, quick: Any, full: Any) -> Any:
        """``value`` if the notebook was given one, else the profile's default."""
        if value is not None:
            return value
        return quick if self.profile == "quick" else full

    # --- paths ----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def path(self, spec: PathSpec | Mapping[str, Any] | None = None, **settings: Any) -> Iterator[NetPath | ReplayedPath]:
        """A path kept up for several variants in a row (state carried between them, such as
        tcp_metrics); in replay mode a stand-in with only the spec."""
        spec = self._on_kernel(_spec(spec, settings))
        if self.mode == "replay":
            yield ReplayedPath(spec)
            return
        # The wait is news for the terminal and the learner, not for the page (_QueueNote).
        note = _QueueNote(self.case_id)
        with exclusive_measurement(note, what=f"case {self.case_id}") as turn, NetPath(spec) as live:
            note.done()
            self._turn = turn
            self._saw_backend(live.backend)
            self._index(backend=live.backend, kernel=kernel_label(live.kernel, live.release))
            try:
                yield live
            finally:
                self._turn = Turn()

    def _on_kernel(self, spec: PathSpec) -> PathSpec:
        """The spec as this execution runs it: on the lab's kernel when that is one of its own
        (UML, a user namespace), so its runs are told from the host's (a different run key);
        a path a user namespace cannot make (a host-global setting) on the UML kernel, and the
        page says why (:meth:`environment`)."""
        if self.kernel in AGENT_KERNELS and spec.kernel is None:
            spec, why = on_kernel(spec, self.kernel)
            if why:
                self._moved.add(why)
        return spec

    def kernels_side_by_side(self) -> tuple[list[str], str]:
        """The lab kernels a side-by-side section compares, the lab's own first, and why the
        other one is missing where it is: live, the other kernel joins where it can run here
        too (the host's needs root, UML its kernel); replay shows what was recorded."""
        name = "kernels side by side"
        if self.mode == "replay":
            kept = self._recorded["kept"].get(name)
            if kept is None:
                raise replay.ReplayMissing("no_kernels", case=self.case_id)
            return list(kept["kernels"]), kept["why"]
        own = self.kernel or "host"
        other = "host" if own == "uml" else "uml"  # a user namespace's kernel is the host's
        can, why = CAN_RUN[other]()
        kernels = [own, other] if can else [own]
        why = "" if can else f"the {other} kernel cannot run the lab here ({why})"
        self._index(kept={name: {"kernels": kernels, "why": why}})
        return kernels, why

    def in_lab(self, action: Callable[[], Any]) -> Any:
        """``action()`` in the lab's kernel: here, or inside the UML kernel (where a path's
        stand-in in ``action``'s closure is the live path itself)."""
        return call_in(self.kernel, action)

    @contextlib.contextmanager
    def holding(self, factory: Callable[..., Any], *args: Any) -> Iterator[Any]:
        """``factory(*args)`` (a context manager, such as another application's sockets)
        entered in the lab's kernel around the variants of the ``with`` block, when the lab is
        live; None in replay (the recorded runs had theirs). Use what it gives inside
        :meth:`keep`, :meth:`live` or :meth:`in_lab`, which run in that kernel too."""
        if self.mode != "live":
            yield None
            return
        with held_in(self.kernel, factory, *args) as held:
            yield held

    def live(self, action: Callable[[], Any]) -> Any:
        """Do ``action`` in the lab's kernel, only when the lab is live (a flush between
        variants); None in replay."""
        return self.in_lab(action) if self.mode == "live" else None

    def keep(self, name: str, compute: Callable[[], Any]) -> Any:
        """A JSON value measured live (``compute()``, in the lab's kernel) and shipped with the
        replay data."""
        if self.mode == "replay":
            kept = self._recorded["kept"]
            if name not in kept:
                raise replay.ReplayMissing("no_value", case=self.case_id, name=repr(name), names=replay.listed(sorted(kept)))
            return kept[name]
        value = json.loads(json.dumps(self.in_lab(compute), default=str))
        self._index(kept={name: value})
        return value

    def measure(self, name: str, path: NetPath | ReplayedPath, compute: Callable[[], Any]) -> Any:
        """:meth:`keep` for a measurement made outside a run record on ``path`` (case 00's): taken
        with a run's health readings around it, made again when the machine disturbed it
        (RUN_TRIES in all, as a variant), its readings kept beside the value (``NAME.health``)
        so the page is judged busy as a disturbed variant's would be, live and in replay."""
        health_name = f"{name}.health"
        if self.mode == "replay":
            value = self.keep(name, lambda: None)
            self._measured[name] = self._recorded["kept"].get(health_name) or {}
            return value
        for _ in range(RUN_TRIES):
            value, health = self._health_around(path, compute)
            if not health.get("disturbed"):
                break
        value = json.loads(json.dumps(value, default=str))  # as replay will give it back
        self._index(kept={name: value, health_name: health})
        self._measured[name] = health
        return value

    def _health_around(self, path: Any, compute: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
        """``health_around`` in the lab's kernel; for a UML kernel, with its wait for a host
        CPU read here, as :meth:`Experiment.run` does."""
        remote = getattr(path, "remote", None)
        pgid = remote.host_pgid if remote is not None else None
        waits, start = (group_run_delay(pgid) if pgid else {}), time.monotonic()
        value, health = self.in_lab(lambda: health_around(path, compute))
        if pgid and health:
            health = judged(health, uml_cpu_wait_share=wait_share(waits, group_run_delay(pgid),
                                                                  time.monotonic() - start))
        if (beside := self._turn.health()) is not None:
            health = judged(health, measured_beside=beside)
        return value, health

    # --- variants -------------------------------------------------------------------------------------
    def run(self, label: str, workload: Any, *, path: PathLike, observe: ObserveSpec | Mapping[str, Any] | None = None,
            repetition: int = 1) -> Trial:
        """Run (or replay) one variant; ``label`` names it in tables and in the replay data."""
        if not label or "/" in label or label.startswith("."):
            raise ParameterError("label", label, "a name without '/' that does not start with '.'")
        observe = observe if isinstance(observe, ObserveSpec) else ObserveSpec(**dict(observe or {}))
        # Worked out once: replay matches it, reuse looks it up, a new record is filed under it.
        plan = RunPlan.of(self._on_kernel(_spec_of(path)), workload, observe, repetition)
        if self.mode == "replay":
            trial = self._replayed(label, plan)
        elif (earlier := reusable_run(self.case_id, plan.key, fresh=self.fresh, runs_dir=self.runs_dir)) is not None:
            # Checked before a path is built: re-rendering a case costs no lab time.
            trial = self._indexed(label, earlier)
        elif isinstance(path, NetPath):
            trial = self._live(label, workload, path, observe, plan)
        else:
            with self.path(_spec_of(path)) as live:
                trial = self._live(label, workload, live, observe, plan)
        self.trials[label] = trial
        if trial.backend:
            self._saw_backend(trial.backend)
        self._saw_kernel(kernel_of(trial.run))
        return trial

    def repeat(self, label: str, workload: Any, *, path: PathLike, times: int,
               observe: ObserveSpec | Mapping[str, Any] | None = None) -> list[Trial]:
        """``times`` runs of one variant, labelled ``label#1`` …, for spreads and confidence
        bands; a single run is plain ``label``, as pages name it."""
        if not isinstance(times, int) or times < 1:
            raise ParameterError("repetitions", times, "a whole number ≥ 1")
        if times == 1:
            return [self.run(label, workload, path=path, observe=observe)]
        return [self.run(f"{label}#{i}", workload, path=path, observe=observe, repetition=i)
                for i in range(1, times + 1)]

    def _live(self, label: str, workload: Any, path: NetPath, observe: ObserveSpec, plan: RunPlan) -> Trial:
        experiment = Experiment(path, workload, case=self.case_id, runs_dir=self.runs_dir, observe=observe, plan=plan)
        # A run the machine disturbed measured the machine: run it again, a few times at most;
        # the last one stands, and if it too was disturbed the page says so (status "busy").
        for _ in range(RUN_TRIES):
            run = experiment.run()
            if (beside := self._turn.health()) is not None:  # it could not wait for the machine
                run.amend_observe("health", judged(run.observe.get("health") or {}, measured_beside=beside))
            if not reasons_of(run):
                break
        return self._indexed(label, run)

    def _indexed(self, label: str, run: Run) -> Trial:
        self._index(runs={label: run.dir.name}, kernel=kernel_of(run))
        return Trial(label, run)

    def _index(self, *, runs: Mapping[str, str] = {}, kept: Mapping[str, Any] = {}, backend: str | None = None,
               kernel: str | None = None) -> None:
        """Note in the live index what replay will need; it also names the kernel that ran."""
        index = replay.read_index(self._case_runs)
        index["runs"].update(runs)
        index["kept"].update(kept)
        if backend and backend not in index["backends"]:
            index["backends"].append(backend)
        if kernel:
            self._saw_kernel(kernel)
        index["kernel"] = ", ".join(self._kernels) or index.get("kernel") or platform.release()
        index["profile"] = self.profile
        replay.write_index(self._case_runs, index)

    def _replayed(self, label: str, plan: RunPlan) -> Trial:
        run = self._variants.run_of(label)
        # The recorded key is worked out again from the recorded parameters: an older key_of
        # may have stored another.
        if key_of(run.params) != plan.key:
            raise replay.ReplayMissing("other_parameters", case=self.case_id, label=label,
                                       profile=self._recorded.get("profile", "?"))
        return Trial(label, run, replayed=True)

    def _saw_kernel(self, kernel: str) -> None:
        if kernel not in self._kernels:
            self._kernels.append(kernel)

    def _saw_backend(self, backend: str | None) -> None:
        if backend and backend not in self._backends:
            self._backends.append(backend)

    # --- reporting ------------------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """The link emulation backend(s) the variants ran on, e.g. "delayline"."""
        return ",".join(self._backends) or "none"

    def environment(self) -> dict[str, str]:
        """Where the numbers come from: this machine, or the one that recorded them."""
        from ..report import scores

        env = scores.default_environment()
        if self.mode == "replay":
            env["kernel"] = self._recorded.get("kernel", "unknown")
            env["data"] = "recorded runs (replay)"
        elif self._kernels:
            env["kernel"] = ", ".join(self._kernels)
        if self.kernel is not None:
            env["lab kernel"] = f"{self.kernel} ({self.kernel_why})"
            if self._moved:
                env["lab kernel"] += "; " + "; ".join(sorted(self._moved))
        return env

    def publish(self, title: str, checks: Sequence[Any]) -> None:
        """Show the case's scored checks and leave them in the notebook for the report."""
        from ..report import publish

        runs_read, disturbed = self.health()
        publish(self.case_id, title, checks, backend=self.backend, mode=self.mode, environment=self.environment(),
                runs_read=runs_read, disturbed=disturbed)

    def say(self, name: str, **values: Any) -> None:
        """Show one of this case's sentences (``prose.<case>.<name>``) with this run's values:
        how a page states a measured number (:mod:`tcplab.report.prose`)."""
        from ..report.prose import say

        say(self.case_id, name, **values)

    def tell(self, name: str, **words: Any) -> None:
        """Show one of this case's notes (``note.<case>.<name>``, Markdown) in the page's
        language: what ran, named in words (a congestion control, a backend, settings read back);
        a measured number is said with :meth:`say` instead."""
        from IPython.display import Markdown, display  # only where a notebook runs

        t = Messages()
        if words.get("backend"):  # a code ("delayline"; "delayline,netem" where both ran) in words
            words["backend"] = t.backends(str(words["backend"]))
        display(Markdown(t(f"note.{self.case_id}.{name}", **words)))

    def health(self) -> tuple[int, list[str]]:
        """How many of the variants and measurements read so far carry a health reading, and
        why the machine disturbed any of them ("label: reason")."""
        read = {t.label: t.health for t in self.trials.values() if t.health}
        read.update({name: health for name, health in self._measured.items() if health})
        return len(read), [f"{label}: {reason}" for label, health in read.items()
                           for reason in health.get("disturbed", [])]

    def table(self, trials: Sequence[Trial] | None = None) -> pd.DataFrame:
        """One row per variant: goodput, duration, the buffers the kernel granted, cc."""
        chosen = list(trials) if trials is not None else list(self.trials.values())
        return pd.DataFrame([t.row() for t in chosen]).set_index("variant")

    def _repr_markdown_(self) -> str:
        t = Messages()
        if self.mode == "live" and self.kernel == "uml":
            return t("page.banner.live_uml", why=self.kernel_why, profile=self.profile)
        if self.mode == "live":
            return t("page.banner.live", profile=self.profile)
        return t("page.banner.replay", kernel=self._recorded.get("kernel", "?"),
                 profile=self._recorded.get("profile", "?"))


class _QueueNote:
    """Where the case waits in the machine's measurement queue (:func:`exclusive_measurement`):
    in a notebook, in the cell while it waits, emptied when the turn comes so that no page
    keeps it; elsewhere on stderr. (Not on a notebook kernel's stderr: the kernel sends what
    its process writes there to the cell, where it would stay.)"""

    def __init__(self, case_id: str) -> None:
        self.case_id = case_id
        self.handle: Any = None

    def __call__(self, place: QueuePlace) -> None:
        try:
            from IPython import get_ipython
            from IPython.display import Markdown, display
        except ImportError:
            get_ipython = None
        if get_ipython is None or get_ipython() is None:
            print(f"{self.case_id}: {place.text()}", file=sys.__stderr__, flush=True)
            return
        if self.handle is None:
            self.handle = display(Markdown(place.text()), display_id=True)
        else:
            self.handle.update(Markdown(place.text()))

    def done(self) -> None:
        if self.handle is not None:
            from IPython.display import Markdown

            self.handle.update(Markdown(""))
            self.handle = None


def _spec(spec: PathSpec | Mapping[str, Any] | None, settings: Mapping[str, Any]) -> PathSpec:
    if spec is not None and settings:
        raise TypeError("give a PathSpec or keyword settings, not both")
    if isinstance(spec, PathSpec):
        return spec
    return PathSpec(**dict(spec or settings))


def _spec_of(path: PathLike) -> PathSpec:
    if isinstance(path, (NetPath, ReplayedPath)):
        return path.spec
    return _spec(path, {})
