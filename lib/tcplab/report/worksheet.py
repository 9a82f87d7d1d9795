"""A case's worksheet: the items a student predicts before the run, and the cell they write them in.

What a worksheet asks is the instructor's data, kept in the case's room (``worksheet.toml``,
:func:`read_worksheet`)::

    version = 1                                  # raise it when an item is renamed, added or removed
    [[items]]
    check = "getsockopt after SO_SNDBUF 16KB"    # the item's id: the name of a check the case publishes
    points = 1
    kind = "bytes"                               # how an answer is read: a kind of prose.KINDS,
                                                 # "label" (one of the diagnosis's) or "word" (choices = [...])
    unit = "B"                                   # the unit the check measures in (a bare number's)
    words = "sndbuf_small"                       # its words: worksheet.<case>.<words>.formula and .why

In the notebook, one code cell tagged :data:`WORKSHEET_TAG` assigns ``predictions = {"check
name": value, ...}`` (a number, a word, or None), each line ending in a comment with the unit; a
release writes it from the worksheet (:func:`worksheet_source`). The cell is read with
:mod:`ast`, never run (:mod:`.answers` reads the answers a student writes, for grading and for a page's box per
prediction: :func:`worksheet_box`).
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tokenize
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from ..course import CourseError, Room
from ..words import Messages
from .answers import written_answers
from .prose import KINDS
from .scores import Value
from .templating import format_value, render

__all__ = ["WORKSHEET_TAG", "WORKSHEET_FILE", "ITEM_KINDS", "Item", "Worksheet", "read_worksheet", "worksheet_source",
           "worksheet_rows", "worksheet_box"]

WORKSHEET_TAG = "worksheet"
WORKSHEET_FILE = "worksheet.toml"
#: How an item's answer is read: a quantity of a prose kind (its unit converted), one of the
#: diagnosis's labels, or one of the item's own listed words.
ITEM_KINDS = (*KINDS, "label", "word")
_ITEM_KEYS = {"check", "points", "kind", "unit", "choices", "words"}


@dataclass(frozen=True)
class Item:
    """One thing a worksheet asks: a check's measurement, predicted before the run."""

    check: str
    points: float
    kind: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    #: Its words in the room: ``worksheet.<case>.<words>.formula`` (theory's formula, as the page
    #: states it) and ``.why`` (one line on why); empty where the room gives none.
    words: str = ""

    def options(self) -> tuple[str, ...]:
        """The answers a word item accepts: the diagnosis's labels, or its own list."""
        if self.kind == "label":
            from ..analysis.diagnose import LABELS  # the diagnosis's registry, loaded only when asked

            return tuple(LABELS)
        return self.choices


@dataclass(frozen=True)
class Worksheet:
    """A case's worksheet as the instructor defined it."""

    case_id: str
    version: int
    items: tuple[Item, ...]

    @property
    def stamp(self) -> dict[str, Any]:
        """What binds a released notebook to this worksheet: the case, the version and a digest of
        what the items are (their ids, kinds and units), so a renamed item is a different release."""
        asked = [[i.check, i.kind, i.unit, list(i.options())] for i in self.items]
        digest = hashlib.sha256(json.dumps([self.case_id, asked], ensure_ascii=False).encode()).hexdigest()[:12]
        return {"case": self.case_id, "worksheet": self.version, "items": digest}

    @property
    def points(self) -> float:
        return sum(i.points for i in self.items)


def read_worksheet(room: Room) -> Worksheet:
    """The worksheet in ``room`` (its ``worksheet.toml``); a :class:`CourseError` naming the file
    and what is wrong with it."""
    path = room.folder / WORKSHEET_FILE
    if not path.is_file():
        raise CourseError(f"{room.folder}: a case's room needs its {WORKSHEET_FILE} (what its worksheet asks)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path}: {exc}") from None
    version, rows = data.get("version"), data.get("items")
    if not isinstance(version, int) or version < 1 or not isinstance(rows, list) or not rows:
        raise CourseError(f"{path}: a worksheet has version = a whole number ≥ 1 and at least one [[items]]")
    items = []
    for number, row in enumerate(rows, 1):
        unknown = set(row) - _ITEM_KEYS
        kind, points = row.get("kind"), row.get("points")
        choices = row.get("choices", [])
        why = (f"unknown keys {', '.join(sorted(unknown))}" if unknown
               else "no check name" if not isinstance(row.get("check"), str) or not row["check"]
               else f"kind {kind!r} is not one of {', '.join(ITEM_KINDS)}" if kind not in ITEM_KINDS
               else "points is not a number ≥ 0" if not isinstance(points, (int, float)) or points < 0
               else "a word item lists its choices" if (kind == "word") != bool(choices)
               else "")
        if why:
            raise CourseError(f"{path}: item {number}: {why}")
        items.append(Item(row["check"], float(points), kind, str(row.get("unit", "")),
                          tuple(map(str, choices)), str(row.get("words", ""))))
    if len({i.check for i in items}) != len(items):
        raise CourseError(f"{path}: an item is listed twice")
    return Worksheet(room.case_id, version, tuple(items))


def worksheet_source(worksheet: Worksheet, language: str | None = None) -> str:
    """The worksheet cell a release hands out: how to write answers, then one line per item,
    ``None`` to fill in, its unit (or the words it accepts) and its points in a comment."""
    t = Messages(language)
    lines = [f"# {line}" for line in t("worksheet.instructions").splitlines()] + ["predictions = {"]
    width = max(len(f"    {i.check!r}: None,") for i in worksheet.items) + 1
    for item in worksheet.items:
        points = t("worksheet.points", points=format_value(item.points))
        if item.options():
            lines.append("    # " + t("worksheet.choices", choices=", ".join(f'"{c}"' for c in item.options())))
            what = t("worksheet.a_word")
        else:
            what = t.unit(item.unit) if item.unit else t(f"worksheet.kind.{item.kind}")
        lines.append(f"    {item.check!r}: None,".ljust(width) + f"# {what} · {points}")
    return "\n".join([*lines, "}"]) + "\n"


def worksheet_rows(source: str) -> list[tuple[str, Value, str]]:
    """(check, the student's value, unit) per line of a worksheet cell, the unit taken from
    the comment at the end of the check's line (``None,  # B``) and the value as written
    (:mod:`.answers`); empty for a cell that holds no worksheet, which the page then shows as it is."""
    answers = written_answers(source)
    units: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                units[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    lines = {}
    for number, line in enumerate(source.splitlines(), 1):
        for check in answers:
            if repr(check) in line or f'"{check}"' in line:
                lines.setdefault(check, number)
    return [(check, written.value, units.get(lines.get(check, 0), "")) for check, written in answers.items()]


#: The unit of a worksheet line whose answer is one of the diagnosis's labels (``# a diagnosis label``).
LABEL_UNIT = "a diagnosis label"


def worksheet_box(source: str, *, language: str | None = None, stop: bool = False) -> str | None:
    """The worksheet as a page shows it: one row per prediction, the student's value or an
    empty box to write in (room on paper for the number and a line of why); None for a cell that
    is not a readable worksheet. ``stop``: the sheet ends with "stop here" (the student edition,
    whose print turns the page there)."""
    rows = worksheet_rows(source)
    if not rows:
        return None
    # A prediction that is a diagnosis label needs the labels to choose from: the diagnosis's own.
    labels = Item("", 0, "label").options() if any(unit == LABEL_UNIT for _, _, unit in rows) else ()
    return render("worksheet_box.html.j2", messages=Messages(language), labels=labels, stop=stop,
                  rows=[(check, None if value is None else format_value(value), unit) for check, value, unit in rows])
