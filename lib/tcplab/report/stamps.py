"""When a student's predictions were written: the worksheet as it stood when the first run started.

A released notebook (:mod:`.release`) calls :meth:`tcplab.report.page.CasePage.record_predictions`
right after its worksheet cell. Just before the lab gets its first measurement, live or replayed,
:func:`record` reads the worksheet the kernel last ran (IPython's input history: what the student
wrote, a line that is no Python included) and appends it, with the time, to
``<case>.stamps.jsonl`` beside the notebook, which a hand-in collects with it. Grading
(:mod:`.autograde`) scores each item as it stood at the earliest stamp, the prediction written
before the run, and reports every item edited since.

A stamp rather than a lock: a lock would need a JupyterLab extension on every hub and is undone by
editing one metadata field, where a stamp needs nothing but the kernel and works wherever the
notebook runs. It is evidence for a fair class, not proof against a student who deletes the file
and runs again; the feedback says when there is no stamp at all.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .answers import written_answers

__all__ = ["STAMPS_SUFFIX", "stamps_path", "record", "first_stamp", "last_worksheet"]

STAMPS_SUFFIX = ".stamps.jsonl"


def stamps_path(folder: str | Path, case_id: str) -> Path:
    return Path(folder) / f"{case_id}{STAMPS_SUFFIX}"


def last_worksheet() -> dict[str, str] | None:
    """The answers of the last worksheet cell this kernel ran (by IPython's input history, newest
    first), each as written; None outside IPython or when no cell assigned ``predictions``."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return None
    shell = get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    for source in reversed(history):
        if "predictions" in source:
            answers = written_answers(source)
            if answers:
                return {key: written.text for key, written in answers.items()}
    return None


def record(case_id: str, folder: str | Path | None = None) -> dict[str, Any]:
    """Append the worksheet as it stands now to the case's stamps file; the stamp written."""
    stamp = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "epoch": time.time(),
             "event": "first run", "answers": last_worksheet()}
    path = stamps_path(folder or Path.cwd(), case_id)
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(stamp, ensure_ascii=False) + "\n")
    except OSError:
        stamp["unwritten"] = str(path)  # a read-only folder: the page says so
    return stamp


def first_stamp(folder: str | Path, case_id: str) -> dict[str, Any] | None:
    """The earliest stamp in the case's stamps file (lines that do not read are skipped); None
    when there is none."""
    path = stamps_path(folder, case_id)
    stamps = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        try:
            stamp = json.loads(line)
        except ValueError:
            continue
        if isinstance(stamp, dict) and isinstance(stamp.get("epoch"), (int, float)):
            stamps.append(stamp)
    return min(stamps, key=lambda s: s["epoch"]) if stamps else None
