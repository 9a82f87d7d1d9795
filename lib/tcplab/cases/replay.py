"""Recorded runs shipped with the course, for readers who cannot run the lab (no Linux root).

Live case runs leave an index in ``data/runs/<case>/index.json``: each variant's label →
its run directory, the values the case kept with :meth:`CaseLab.keep`, and the link
backends its paths used. :func:`save` copies what an index names into the case's replay
folder, which its room's ``case.toml`` names (``replay = "replay/<case>"``, under the data
folder: ``data/replay/<case>/``), one folder per label, without the process logs, and an index
of the same form: what a case reads in replay mode.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..files import partial_name, write_atomically
from ..runs import RUN_JSON, Run, data_root, runs_root
from ..course import room
from ..units import ParameterError
from ..words import SaidByReason, messages

__all__ = ["INDEX", "empty_index", "ReplayMissing", "listed", "replay_root", "case_replay_dir", "read_index", "write_index", "save"]

INDEX = "index.json"


class ReplayMissing(SaidByReason, LookupError):
    """The recorded data has no run (or value) for what the notebook asks: ``reason`` is a key
    under ``replay_missing.`` in the strings files, said in the language in force where it
    arose (a page's), with ``fields`` filled in."""

    KEYS = "replay_missing"


def listed(names: Any) -> str:
    """Names for a ReplayMissing's sentence: comma-separated, or the word for none."""
    return ", ".join(names) or messages()("replay_missing.none")


def replay_root(replay_dir: str | os.PathLike | None = None) -> Path:
    return Path(replay_dir) if replay_dir is not None else data_root() / "replay"


def case_replay_dir(case: str, replay_dir: str | os.PathLike | None = None) -> Path:
    """Where ``case``'s recorded runs are: ``replay_dir/<case>`` when given, else where its room
    points (under the data folder); ``data/replay/<case>`` for a case outside the course."""
    if replay_dir is None:
        try:
            return data_root() / room(case).replay
        except ParameterError:
            pass
    return replay_root(replay_dir) / case


def _write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def empty_index() -> dict[str, Any]:
    return {"runs": {}, "kept": {}, "backends": []}


def read_index(case_dir: Path) -> dict[str, Any]:
    path = case_dir / INDEX
    if not path.exists():
        return empty_index()
    return {**empty_index(), **json.loads(path.read_text())}


def write_index(case_dir: Path, index: dict[str, Any]) -> None:
    _write_json(case_dir / INDEX, index)


def save(case: str, *, runs_dir: str | os.PathLike | None = None,
         replay_dir: str | os.PathLike | None = None) -> Path:
    """Replace the case's replay folder (:func:`case_replay_dir`) with the runs the last live
    execution of ``case`` used."""
    index = read_index(runs_root(runs_dir) / case)
    if not index["runs"] and not index["kept"]:
        raise ParameterError("CASES", case, "a case run live at least once",
                             f"no live runs of {case} are indexed in {runs_root(runs_dir) / case}")
    target = case_replay_dir(case, replay_dir)
    staging = target.with_name(f".{case}.saving")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for label, run_dir in index["runs"].items():
        run = Run.load(runs_root(runs_dir) / case / run_dir)
        shutil.copytree(run.dir, staging / label, ignore=shutil.ignore_patterns("logs", partial_name("*").name))
        meta = json.loads((staging / label / RUN_JSON).read_text())
        meta["files"] = [f for f in meta.get("files", []) if not f.startswith("logs/")]
        _write_json(staging / label / RUN_JSON, meta)
    write_index(staging, {**index, "runs": {label: label for label in index["runs"]}})
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return target
