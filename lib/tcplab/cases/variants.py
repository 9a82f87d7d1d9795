"""A case's variants as a table: each label → the run record that holds its path spec,
workload, observers and repetition.

Every execution of a case indexes the variants it ran (``data/runs/<case>/index.json``, see
:mod:`.replay`); shipped replay data carries an index of the same form. Read back as a
:class:`VariantTable`, that index is what replay mode looks a variant up in, what
``tcplab run --case C --variant L`` reruns from a shell (the same parameters, so the same
run key: the notebook then reuses that run), and what an exercise can lay out as a grid
(:meth:`VariantTable.frame`).

Labels follow the parameters they name (``sndbuf-16KB`` from ``sndbuf_small="16KB"``):
:func:`size_tag` and :func:`ms_tag` write a value the same way in every case.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..lab import PathSpec
from ..runs import Run, runs_root
from ..traffic import Workload
from ..units import ParameterError, parse_duration, parse_size
from . import replay

__all__ = ["VariantTable", "size_tag", "ms_tag"]


def size_tag(value: Any) -> str:
    """A byte count as a label writes it: ``16KB``, ``4MB`` (binary multiples, as the
    parameters write them), or plain bytes (``131071``) when it is neither."""
    size = parse_size("size", value)
    for unit, factor in (("MB", 1024**2), ("KB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def ms_tag(value: Any) -> str:
    """A duration as a label writes it, in milliseconds without a unit: ``40`` for 40 ms."""
    return f"{parse_duration('duration', value) * 1e3:g}"


@dataclass(frozen=True)
class VariantTable:
    """The variants one execution of a case ran, by label."""

    case: str
    #: The folder whose index this table was read from (this machine's runs, or replay data).
    source: Path
    #: label → the run record's folder.
    runs: Mapping[str, Path]

    @classmethod
    def read(cls, case: str, case_dir: str | os.PathLike) -> "VariantTable":
        """The table in ``case_dir``'s index (empty when there is none)."""
        return cls.of_index(case, case_dir, replay.read_index(Path(case_dir)))

    @classmethod
    def of_index(cls, case: str, case_dir: str | os.PathLike, index: Mapping[str, Any]) -> "VariantTable":
        """The table of an index already read from ``case_dir``."""
        case_dir = Path(case_dir)
        return cls(case, case_dir, {label: case_dir / name for label, name in index["runs"].items()})

    @classmethod
    def latest(cls, case: str, *, runs_dir: str | os.PathLike | None = None,
               replay_dir: str | os.PathLike | None = None) -> "VariantTable":
        """The table of the last execution of ``case`` on this machine whose records are all
        still here, else the one shipped with the replay data."""
        local = cls.read(case, runs_root(runs_dir) / case)
        if local.runs and all(folder.is_dir() for folder in local.runs.values()):
            return local
        shipped = cls.read(case, replay.case_replay_dir(case, replay_dir))
        if not shipped.runs:
            raise ParameterError("--case", case, "a case that ran here or has replay data",
                                 f"no variants of {case} are indexed in {local.source} or {shipped.source}")
        return shipped

    @property
    def labels(self) -> list[str]:
        return list(self.runs)

    def run_of(self, label: str) -> Run:
        """The run record of ``label``; :class:`~.replay.ReplayMissing` naming the labels there are."""
        if label not in self.runs:
            raise replay.ReplayMissing("no_variant", case=self.case, label=repr(label), source=self.source,
                                       labels=replay.listed(self.labels))
        return Run.load(self.runs[label])

    def frame(self) -> pd.DataFrame:
        """One row per variant: its label, workload and what sets it apart, as a user writes
        them (the path and workload settings that differ between variants, plus rtt and rate)."""
        rows = {}
        for label in self.labels:
            run = self.run_of(label)
            spec, workload = PathSpec.of_run(run), Workload.of_run(run)
            sysctls = {**spec.host, **spec.sysctls}
            rows[label] = {"workload": workload.name, "repetition": run.params.get("repetition", 1),
                           **spec.describe(), **workload.describe(),
                           "sysctls": ", ".join(f"{k}={v}" for k, v in sorted(sysctls.items())) or "none"}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        always = [c for c in ("workload", "rtt", "rate") if c in frame.columns]
        # What sets variants apart; a table of one shows every setting it has.
        varying = [c for c in frame.columns if c not in always
                   and (frame[c].astype(str).nunique() > 1 or (len(frame) == 1 and frame[c].iloc[0] != "unset"))]
        return frame[always + varying].rename_axis("variant")
