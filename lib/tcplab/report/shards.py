"""The course split across machines: which cases one shard runs, and the report made again
from the shards' executed notebooks, running nothing.

A CI matrix, a Kubernetes Indexed Job or a Slurm job array runs ``tcplab report --shard I/N``
once per index, each into its own directory: its executed notebooks, its pages and a partial
``summary.json`` that records I, N and the whole selection. ``tcplab report --merge DIR…``
then renders the handout and the summary from those directories as one run would have. The
engine distributes the work; tcplab only splits and merges, with no scheduler of its own.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..units import ParameterError
from .pipeline import SUMMARY, render_only

__all__ = ["Shard", "ShardDir", "read_shards", "missing", "gather", "merge"]

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1 to ``count``) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``"2/4"`` -> Shard(2, 4)."""
        match = _SPEC.match(str(text))
        accepted = "I/N with 1 <= I <= N, e.g. 2/4 (a job array index from 0 needs +1)"
        if not match:
            raise ParameterError("--shard", text, accepted)
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise ParameterError("--shard", text, accepted)
        return cls(index, count)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def pick(self, cases: Sequence[str]) -> list[str]:
        """This shard's cases: round robin in course order (case k goes to shard k mod N + 1),
        so each shard gets early short cases and later long ones alike, and N shards for N
        cases run one case each."""
        if self.count > len(cases):
            raise ParameterError("--shard", self.label, f"I/N with N at most the {len(cases)} selected case(s)",
                                 "a shard would have no case")
        return list(cases[self.index - 1::self.count])

    def record(self, selection: Sequence[str]) -> dict[str, Any]:
        """What a shard's summary says of it, for :func:`read_shards`."""
        return {"shard": {"index": self.index, "count": self.count, "selection": list(selection)}}


@dataclass(frozen=True)
class ShardDir:
    """One shard's output directory and what its summary says."""

    path: Path
    shard: Shard
    selection: tuple[str, ...]
    #: The cases this shard ran, as its summary lists them.
    cases: tuple[str, ...]
    profile: str | None
    mode: str
    exercises: str


def _read_one(path: Path) -> ShardDir:
    accepted = "directories written by tcplab report --shard I/N"
    summary_path = path / SUMMARY
    if not summary_path.is_file():
        raise ParameterError("--merge", str(path), accepted, f"no {SUMMARY} there")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ParameterError("--merge", str(path), accepted, f"its {SUMMARY} is not JSON: {exc}") from None
    if not isinstance(summary, dict) or "shard" not in summary:
        raise ParameterError("--merge", str(path), accepted,
                             f"its {SUMMARY} is a whole run's, not a shard's (no shard record)")
    try:
        record = summary["shard"]
        return ShardDir(path=path, shard=Shard(int(record["index"]), int(record["count"])),
                        selection=tuple(record["selection"]),
                        cases=tuple(c["case_id"] for c in summary["cases"]),
                        profile=summary.get("profile"), mode=summary["mode"],
                        exercises=summary.get("exercises", "run"))
    except (ValueError, KeyError, TypeError) as exc:
        raise ParameterError("--merge", str(path), accepted,
                             f"its {SUMMARY} is damaged ({type(exc).__name__}: {exc})") from None


def read_shards(dirs: Iterable[str | Path]) -> list[ShardDir]:
    """The shards in ``dirs``, in shard order, checked to come from one split of one course
    run: the same selection, count, profile, mode and exercises, and no shard twice."""
    shards = sorted((_read_one(Path(d)) for d in dirs), key=lambda s: s.shard.index)
    if not shards:
        raise ParameterError("--merge", "", "one or more directories written by tcplab report --shard I/N")
    first = shards[0]
    for other in shards[1:]:
        for what in ("selection", "profile", "mode", "exercises"):
            if getattr(other, what) != getattr(first, what):
                raise ParameterError("--merge", str(other.path), f"shards of one run ({what} {getattr(first, what)!r} "
                                     f"as in {first.path})", f"its {what} is {getattr(other, what)!r}")
        if other.shard.count != first.shard.count:
            raise ParameterError("--merge", str(other.path), f"shards of one split into {first.shard.count}",
                                 f"it is shard {other.shard.label}")
    seen: dict[int, Path] = {}
    for s in shards:
        if s.shard.index in seen:
            raise ParameterError("--merge", str(s.path), "each shard once",
                                 f"shard {s.shard.label} is also {seen[s.shard.index]}")
        seen[s.shard.index] = s.path
    return shards


def missing(shards: Sequence[ShardDir]) -> list[str]:
    """Shards of the split that no directory holds, as ``I/N`` labels."""
    count = shards[0].shard.count
    present = {s.shard.index for s in shards}
    return [f"{i}/{count}" for i in range(1, count + 1) if i not in present]


def gather(shards: Sequence[ShardDir], output_dir: Path) -> None:
    """Copy each shard's executed notebooks into ``output_dir``, the merge renders from
    there, and remove any older notebook of a case no shard delivered, so that a missing
    shard shows as cases that did not run, never as an earlier run's results."""
    output_dir.mkdir(parents=True, exist_ok=True)
    delivered = set()
    for s in shards:
        for case in s.cases:
            source = s.path / f"{case}.ipynb"
            target = output_dir / source.name
            if source.is_file():
                delivered.add(case)
                if not (target.exists() and target.samefile(source)):
                    shutil.copyfile(source, target)
    for case in set(shards[0].selection) - delivered:
        (output_dir / f"{case}.ipynb").unlink(missing_ok=True)


def merge(dirs: Iterable[str | Path], *, output_dir: str | Path, **render: Any):
    """The report of the whole selection from its shards' directories, running nothing:
    :func:`tcplab.report.pipeline.render_only` over the gathered notebooks, with the shards' profile,
    mode and exercises. ``render``: render_only's other options (edition, formats, course_dir, …)."""
    shards = read_shards(dirs)
    output_dir = Path(output_dir)
    gather(shards, output_dir)
    first = shards[0]
    result = render_only(list(first.selection), reports_dir=output_dir, profile=first.profile,
                         mode=first.mode, exercises=first.exercises, **render)
    result.origin = {"merged_from": [{"dir": str(s.path), "shard": s.shard.label} for s in shards],
                     "missing_shards": missing(shards)}
    return result
