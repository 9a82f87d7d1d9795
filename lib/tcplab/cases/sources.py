"""Where a case's runs come from: a live lab, or the runs recorded with the case. Chosen once.

A :class:`~.lab.CaseLab` asks its source for everything that differs between the two, through
one interface (:class:`RunSource`), and never asks which one it has:

- :class:`LiveSource` builds paths in the lab's kernel (the host's, the host's in the learner's
  own user namespace, or a UML kernel's), in its turn in the machine's measurement queue, runs a
  variant there (or reuses a recorded run with the same parameters: the rule is
  :func:`~tcplab.experiment.reusable_run`'s), makes a disturbed run again, and notes in the case's
  live index (``data/runs/<case>/index.json``) what replay will need;
- :class:`ReplaySource` reads the case's recorded runs (``tcplab replay save``), after checking
  that each was recorded with the parameters the notebook asks for now, and touches nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from typing import Any, Callable, ContextManager, Iterator, Protocol

from ..experiment import Experiment, RunPlan, measured, reusable_run
from ..lab import NetPath, PathSpec
from ..lab.kernels import call_in, held_in
from ..lab.state import QueuePlace, Turn, exclusive_measurement
from ..observe import ObserveSpec
from ..observe.health import judged
from ..runs import Run, key_of, runs_root
from . import replay
from .trial import kernel_label, kernel_of
from .variants import VariantTable

__all__ = ["RunSource", "LiveSource", "ReplaySource", "ReplayedPath", "RUN_TRIES", "SIDE_BY_SIDE"]

#: How many times a variant runs when the machine disturbs it (``observe.health``) before its
#: last run stands, marked disturbed.
RUN_TRIES = 3
#: The name under which a side-by-side section's kernels are kept for replay.
SIDE_BY_SIDE = "kernels side by side"


class ReplayedPath:
    """Stands for a path in replay mode: it has the spec, and nothing to act on."""

    def __init__(self, spec: PathSpec) -> None:
        self.spec = spec


class RunSource(Protocol):
    """What a case needs of the place its runs come from."""

    mode: str  # "live" or "replay"
    #: The lab's kernel ("host", "userns" or "uml"; None in replay) and why it was chosen.
    kernel: str | None
    kernel_why: str

    def path(self, spec: PathSpec) -> ContextManager[NetPath | ReplayedPath]: ...
    def run(self, label: str, plan: RunPlan, workload: Any, observe: ObserveSpec, where: NetPath | PathSpec) -> Run:
        """``label``'s run: on the live path ``where``, or on a path of spec ``where`` made for it."""
    def keep(self, name: str, compute: Callable[[], Any], *, kernel: str | None = None) -> Any: ...
    def measure(self, name: str, path: NetPath | ReplayedPath, compute: Callable[[], Any]) -> tuple[Any, dict]: ...
    def in_lab(self, action: Callable[[], Any]) -> Any: ...
    def live(self, action: Callable[[], Any], *, kernel: str | None = None) -> Any: ...
    def holding(self, factory: Callable[..., Any], *args: Any) -> ContextManager[Any]: ...
    def side_by_side(self) -> tuple[list[str], str]: ...
    def backends(self) -> list[str]: ...
    def kernels(self) -> str | None: ...
    def recorded_profile(self) -> str | None: ...


class LiveSource:
    """Runs made here, in the lab's kernel, and the live index replay data is saved from."""

    mode = "live"

    def __init__(self, case_id: str, *, kernel: str, kernel_why: str, profile: str, fresh: bool = False,
                 runs_dir: str | os.PathLike | None = None) -> None:
        self.case_id, self.kernel, self.kernel_why = case_id, kernel, kernel_why
        self.profile, self.fresh, self.runs_dir = profile, fresh, runs_dir
        self._backends: list[str] = []
        self._kernels: list[str] = []  # "6.1.176 (UML)": the kernels the variants ran on
        self._turn = Turn()  # the machine's measurement queue's turn the live path has
        #: The runs this execution made or reused, by key: ``fresh`` asks for none from before it,
        #: and a variant asked for twice in it (a single run, then the same point repeated for its
        #: spread: repetition 1 has the single run's key) is the one run, not two.
        self._this_execution: dict[str, Run] = {}
        self._case_runs = runs_root(runs_dir) / case_id
        if (self._case_runs / replay.INDEX).exists():
            # The index names what this execution of the case uses, so a variant a notebook
            # no longer runs is not shipped as replay data.
            replay.write_index(self._case_runs, replay.empty_index())

    @contextlib.contextmanager
    def path(self, spec: PathSpec) -> Iterator[NetPath]:
        # The wait is news for the terminal and the learner, not for the page (_QueueNote).
        note = _QueueNote(self.case_id)
        with exclusive_measurement(note, what=f"case {self.case_id}") as turn, NetPath(spec) as live:
            note.done()
            self._turn = turn
            self._index(backend=live.backend, kernel=kernel_label(live.kernel, live.release))
            try:
                yield live
            finally:
                self._turn = Turn()

    def run(self, label: str, plan: RunPlan, workload: Any, observe: ObserveSpec, where: NetPath | PathSpec) -> Run:
        # Checked before a path is built: re-rendering a case costs no lab time.
        run = self._this_execution.get(plan.key) or reusable_run(self.case_id, plan.key, fresh=self.fresh,
                                                                 runs_dir=self.runs_dir)
        if run is None:
            with contextlib.nullcontext(where) if isinstance(where, NetPath) else self.path(where) as path:
                run = Experiment(path, workload, case=self.case_id, runs_dir=self.runs_dir, observe=observe,
                                 plan=plan).run(tries=RUN_TRIES)
                if (beside := self._turn.health()) is not None:  # it could not wait for the machine
                    run.amend_observe("health", judged(run.observe.get("health") or {}, measured_beside=beside))
        self._this_execution[plan.key] = run
        self._index(runs={label: run.dir.name}, kernel=kernel_of(run))
        return run

    def keep(self, name: str, compute: Callable[[], Any], *, kernel: str | None = None) -> Any:
        done = self.live(compute, kernel=kernel)
        value = json.loads(json.dumps(done, default=str))  # as replay will give it back
        self._index(kept={name: value})
        return value

    def measure(self, name: str, path: NetPath | ReplayedPath, compute: Callable[[], Any]) -> tuple[Any, dict]:
        for _ in range(RUN_TRIES):
            value, health = measured(path, compute)
            if not health.get("disturbed"):
                break
        if (beside := self._turn.health()) is not None:  # it could not wait for the machine
            health = judged(health, measured_beside=beside)
        value = json.loads(json.dumps(value, default=str))  # as replay will give it back
        self._index(kept={name: value, f"{name}.health": health})
        return value, health

    def in_lab(self, action: Callable[[], Any]) -> Any:
        return call_in(self.kernel, action)

    def live(self, action: Callable[[], Any], *, kernel: str | None = None) -> Any:
        return call_in(kernel, action) if kernel is not None else self.in_lab(action)

    @contextlib.contextmanager
    def holding(self, factory: Callable[..., Any], *args: Any) -> Iterator[Any]:
        with held_in(self.kernel, factory, *args) as held:
            yield held

    def side_by_side(self) -> tuple[list[str], str]:
        from ..lab.kernels import host_can_run, uml_can_run

        other = "host" if self.kernel == "uml" else "uml"  # a user namespace's kernel is the host's
        can, why = (uml_can_run if other == "uml" else host_can_run)()
        kernels = [self.kernel, other] if can else [self.kernel]
        why = "" if can else f"the {other} kernel cannot run the lab here ({why})"
        self._index(kept={SIDE_BY_SIDE: {"kernels": kernels, "why": why}})
        return kernels, why

    def backends(self) -> list[str]:
        return list(self._backends)

    def kernels(self) -> str | None:
        """The kernels this execution's paths and variants ran on, in the order they first did."""
        return ", ".join(self._kernels) or None

    def recorded_profile(self) -> str | None:
        return self.profile

    def _index(self, *, runs: dict[str, str] | None = None, kept: dict[str, Any] | None = None,
               backend: str | None = None, kernel: str | None = None) -> None:
        """Note in the live index what replay will need; it also names the kernel that ran."""
        if backend and backend not in self._backends:
            self._backends.append(backend)
        if kernel and kernel not in self._kernels:
            self._kernels.append(kernel)
        index = replay.read_index(self._case_runs)
        index["runs"].update(runs or {})
        index["kept"].update(kept or {})
        index["backends"] = list(dict.fromkeys([*index["backends"], *self._backends]))
        index["kernel"] = ", ".join(self._kernels) or index.get("kernel") or platform.release()
        index["profile"] = self.profile
        replay.write_index(self._case_runs, index)


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


class ReplaySource:
    """The runs and values recorded with the case; it refuses what was recorded otherwise."""

    mode = "replay"
    kernel = None
    kernel_why = "replay: nothing runs"

    def __init__(self, case_id: str, *, replay_dir: str | os.PathLike | None = None) -> None:
        self.case_id = case_id
        folder = replay.case_replay_dir(case_id, replay_dir)
        if not (folder / replay.INDEX).exists():
            raise replay.ReplayMissing("no_data", case=case_id, folder=folder)
        self._recorded = replay.read_index(folder)
        #: The recorded variants, which replay looks each label up in.
        self._variants = VariantTable.of_index(case_id, folder, self._recorded)

    @contextlib.contextmanager
    def path(self, spec: PathSpec) -> Iterator[ReplayedPath]:
        yield ReplayedPath(spec)

    def run(self, label: str, plan: RunPlan, workload: Any, observe: ObserveSpec, where: NetPath | PathSpec) -> Run:
        run = self._variants.run_of(label)
        # The recorded key is worked out again from the recorded parameters: an older key_of
        # may have stored another.
        if key_of(run.params) != plan.key:
            raise replay.ReplayMissing("other_parameters", case=self.case_id, label=label,
                                       profile=self._recorded.get("profile", "?"))
        return run

    def keep(self, name: str, compute: Callable[[], Any], *, kernel: str | None = None) -> Any:
        kept = self._recorded["kept"]
        if name not in kept:
            raise replay.ReplayMissing("no_value", case=self.case_id, name=repr(name), names=replay.listed(sorted(kept)))
        return kept[name]

    def measure(self, name: str, path: NetPath | ReplayedPath, compute: Callable[[], Any]) -> tuple[Any, dict]:
        return self.keep(name, compute), self._recorded["kept"].get(f"{name}.health") or {}

    def in_lab(self, action: Callable[[], Any]) -> Any:
        return action()  # no lab kernel: here

    def live(self, action: Callable[[], Any], *, kernel: str | None = None) -> Any:
        return None

    @contextlib.contextmanager
    def holding(self, factory: Callable[..., Any], *args: Any) -> Iterator[Any]:
        yield None  # the recorded runs had theirs

    def side_by_side(self) -> tuple[list[str], str]:
        kept = self._recorded["kept"].get(SIDE_BY_SIDE)
        if kept is None:
            raise replay.ReplayMissing("no_kernels", case=self.case_id)
        return list(kept["kernels"]), kept["why"]

    def backends(self) -> list[str]:
        return list(self._recorded["backends"])

    def kernels(self) -> str | None:
        """The kernels that recorded the runs (None where the index does not say)."""
        return self._recorded.get("kernel")

    def recorded_profile(self) -> str | None:
        return self._recorded.get("profile")
