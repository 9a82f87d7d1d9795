"""The course: which cases exist, where they and their reports live, and its profiles.

A case is a notebook in ``notebooks/`` named ``NN-name.ipynb``; its number is its id for
``CASES=01,04``. What each case measures and asserts lives in the notebook (with
:mod:`tcplab.cases` doing the running); ``tcplab report`` (:mod:`tcplab.commands.report`)
runs and renders them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .units import ParameterError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(os.environ.get("TCPLAB_NOTEBOOKS", ROOT / "notebooks"))
REPORTS = Path(os.environ.get("TCPLAB_REPORTS", ROOT / "reports"))
#: How much of each case runs (each notebook's parameters cell says what a profile changes).
PROFILES = ("quick", "full")
_CASE_FILE = re.compile(r"^(\d\d)-[a-z0-9-]+\.ipynb$")


def available_cases(notebooks: Path = NOTEBOOKS) -> list[str]:
    """Case ids (notebook stems) in course order."""
    return sorted(p.stem for p in notebooks.glob("*.ipynb") if _CASE_FILE.match(p.name))


def case_number(case_id: str) -> str | None:
    """The course's number of a case ("01" of ``01-send-buffer``), the one numbering of titles,
    page headers, contents and cross-references; None for a case named otherwise."""
    head = case_id.split("-", 1)[0]
    return head if head.isdigit() else None


def cases_named(name: str, cases: list[str]) -> list[str]:
    """The cases ``name`` means: a whole id (``01-send-buffer``) or a number (``1``, ``01``)."""
    return [c for c in cases if c == name or case_number(c) == name.zfill(2)]


def select_cases(selection: str, notebooks: Path = NOTEBOOKS) -> list[str]:
    """``all`` or a comma list of numbers or names (``01,04`` or ``01-send-buffer``)."""
    cases = available_cases(notebooks)
    if selection.strip().lower() in ("", "all"):
        return cases
    chosen = []
    for item in (x.strip() for x in selection.split(",") if x.strip()):
        match = cases_named(item, cases)
        if not match:
            raise ParameterError("CASES", item, "all, or numbers/names of: " + ", ".join(cases))
        chosen.extend(m for m in match if m not in chosen)
    return chosen
