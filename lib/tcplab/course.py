"""The course: its cases in teaching order, each in a room of its own, and its profiles.

The course folder (``course/``, or ``$TCPLAB_COURSE``) holds ``course.toml``, the table of
contents, and one folder per case, its *room*, named by the case's id (``04-nagle-delayed-ack``;
its number, ``04``, is what ``CASES=01,04`` selects)::

    course/
      course.toml            cases = ["00-path-check", …]: the order of the course
      references.json        every work the course cites (the handout's references page)
      SOURCES.md             the seeds: the practitioners' articles the cases retell
      04-nagle-delayed-ack/  a room
        case.toml            what the case cites, where its recorded runs are, its own modules
        worksheet.toml       what its worksheet asks: the items students predict, their points
                             (tcplab.report.worksheet)
        04-nagle-delayed-ack.ipynb   the notebook: story, calls, plots
        words/en.json        its own words: sentences a run fills in, check names, notes, its
                             cheat-sheet row (the words several cases share stay in tcplab/strings/)
        words/zh.json, zh.sources.json, zh.cells.json   the Chinese translation (tcplab.i18n)
        nagle.py             code of this case alone, imported as ``tcplab.rooms.nagle``
        SOURCES.md           what the case takes from the seeds

Adding a case is adding its room and its line in ``course.toml``. :class:`Course` reads both;
nothing else lists the cases.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .folders import COURSE_DIR, REPORTS_DIR, ROOT, WORDS
from .units import ParameterError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ROOT", "COURSE_DIR", "REPORTS_DIR", "PROFILES", "Room", "Course", "CourseError", "WORDS", "course",
           "available_cases", "case_number", "cases_named", "select_cases", "room"]

#: How much of each case runs (each notebook's parameters cell says what a profile changes).
PROFILES = ("quick", "full")
TABLE_OF_CONTENTS = "course.toml"
MANIFEST = "case.toml"
_CASE_ID = re.compile(r"^\d\d-[a-z0-9-]+$")
_MANIFEST_KEYS = {"notebook", "cites", "replay", "modules"}


class CourseError(ValueError):
    """The course folder does not say what a course must (a room or a line missing, a manifest
    with a key it should not have): the file and what is wrong with it."""


@dataclass(frozen=True)
class Room:
    """One case's folder and what its manifest (``case.toml``) says of it."""

    case_id: str
    folder: Path
    #: The notebook's file name in the room.
    notebook_name: str
    #: Ids of the works it cites, in the course's ``references.json``.
    cites: tuple[str, ...] = ()
    #: Its recorded runs, relative to the data folder (data/, or $TCPLAB_DATA).
    replay: str = ""
    #: Python modules of this case alone (``tcplab.rooms.<name>``).
    modules: tuple[str, ...] = ()

    @property
    def notebook(self) -> Path:
        return self.folder / self.notebook_name

    @property
    def words_dir(self) -> Path:
        """Its words: ``en.json`` (the source) and each translation's files."""
        return self.folder / WORDS

    @classmethod
    def read(cls, folder: Path) -> "Room":
        manifest = folder / MANIFEST
        if not manifest.is_file():
            raise CourseError(f"{folder}: a case's room needs its {MANIFEST}")
        try:
            data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise CourseError(f"{manifest}: {exc}") from None
        unknown = set(data) - _MANIFEST_KEYS
        if unknown:
            raise CourseError(f"{manifest}: unknown keys {', '.join(sorted(unknown))} "
                              f"(a room's manifest has {', '.join(sorted(_MANIFEST_KEYS))})")
        room = cls(folder.name, folder, str(data.get("notebook", f"{folder.name}.ipynb")),
                   tuple(data.get("cites", ())), str(data.get("replay", f"replay/{folder.name}")),
                   tuple(data.get("modules", ())))
        missing = [p.name for p in (room.notebook, *(folder / f"{m}.py" for m in room.modules)) if not p.is_file()]
        if missing:
            raise CourseError(f"{manifest}: names {', '.join(missing)}, which {folder} does not hold")
        return room


@dataclass(frozen=True)
class Course:
    """The course in ``folder``: its rooms in the order of its table of contents."""

    folder: Path
    rooms: tuple[Room, ...]

    @property
    def cases(self) -> list[str]:
        return [r.case_id for r in self.rooms]

    def room(self, case_id: str) -> Room:
        for r in self.rooms:
            if r.case_id == case_id:
                return r
        raise ParameterError("case", case_id, "a case of the course: " + ", ".join(self.cases))

    @classmethod
    def read(cls, folder: str | Path) -> "Course":
        folder = Path(folder)
        toc = folder / TABLE_OF_CONTENTS
        if not toc.is_file():
            raise CourseError(f"{folder}: no {TABLE_OF_CONTENTS} (a course lists its cases there)")
        try:
            listed = tomllib.loads(toc.read_text(encoding="utf-8")).get("cases", [])
        except tomllib.TOMLDecodeError as exc:
            raise CourseError(f"{toc}: {exc}") from None
        bad = [c for c in listed if not isinstance(c, str) or not _CASE_ID.match(c)]
        if bad or len(set(listed)) != len(listed):
            raise CourseError(f"{toc}: cases are distinct folder names such as 04-nagle-delayed-ack; got {bad or listed}")
        absent = [c for c in listed if not (folder / c).is_dir()]
        if absent:
            raise CourseError(f"{toc}: lists {', '.join(absent)}, which {folder} does not hold")
        return cls(folder, tuple(Room.read(folder / c) for c in listed))


@lru_cache(maxsize=8)
def _read(folder: Path) -> Course:
    return Course.read(folder)


def course(course_dir: str | Path | None = None) -> Course:
    """The course in ``course_dir`` (default: the checkout's), read once per folder."""
    return _read(Path(course_dir or COURSE_DIR).resolve())


def room(case_id: str, course_dir: str | Path | None = None) -> Room:
    """The room of ``case_id``."""
    return course(course_dir).room(case_id)


def available_cases(course_dir: str | Path | None = None) -> list[str]:
    """Case ids in course order."""
    return course(course_dir).cases


def case_number(case_id: str) -> str | None:
    """The course's number of a case ("01" of ``01-send-buffer``), the one numbering of titles,
    page headers, contents and cross-references; None for a case named otherwise."""
    head = case_id.split("-", 1)[0]
    return head if head.isdigit() else None


def cases_named(name: str, cases: list[str]) -> list[str]:
    """The cases ``name`` means: a whole id (``01-send-buffer``) or a number (``1``, ``01``)."""
    return [c for c in cases if c == name or case_number(c) == name.zfill(2)]


def select_cases(selection: str, course_dir: str | Path | None = None) -> list[str]:
    """``all`` or a comma list of numbers or names (``01,04`` or ``01-send-buffer``)."""
    cases = available_cases(course_dir)
    if selection.strip().lower() in ("", "all"):
        return cases
    chosen = []
    for item in (x.strip() for x in selection.split(",") if x.strip()):
        match = cases_named(item, cases)
        if not match:
            raise ParameterError("CASES", item, "all, or numbers/names of: " + ", ".join(cases))
        chosen.extend(m for m in match if m not in chosen)
    return chosen
