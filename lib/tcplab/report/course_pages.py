"""Pages of the course that no run produces: the references, the cheat sheet and the glossary.

Both are data, not code: ``course/references.json`` lists every work the course cites, each
room's ``case.toml`` the ones its case cites (``cites``), and each room's words hold its row
(``cheatsheet.<case>.*``: symptom, signature in ``ss`` and the capture, cause, fix), so a
translation covers them. The
handout shows the cheat sheet after its summary, each case's references under it and the
references page at its end; ``make report`` also writes the cheat sheet as a page of its
own (``cheatsheet.html``, ``cheatsheet.pdf``), and the glossary (:mod:`.glossary`) as its own
pages too (``glossary.html``, ``glossary.pdf``), to which each case's page links its terms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..course import CourseError, case_number, course
from ..files import write_atomically
from ..words import Messages
from .context import ReportContext
from .glossary import PAGE_NAME as GLOSSARY_NAME, Glossary
from .html import page_assets
from .templating import render

__all__ = ["Reference", "CheatRow", "REFERENCES_FILE", "read_references", "cited_by", "cheatsheet_rows",
           "render_cheatsheet", "write_cheatsheet", "CHEATSHEET_NAME", "write_glossary", "GLOSSARY_NAME"]

REFERENCES_FILE = "references.json"
CHEATSHEET_NAME = "cheatsheet"
#: The columns of the cheat sheet, in order: a strings key ``cheatsheet.<case>.<column>`` each.
COLUMNS = ("symptom", "signature", "cause", "fix")


@dataclass(frozen=True)
class Reference:
    id: str
    kind: str
    cite: str
    url: str | None
    cases: tuple[str, ...]
    #: A seed's author and original (Chinese) title, and a note per language ("tail of the
    #: article"), for pages in another language than English, which cite it by that title.
    original: dict | None = None
    more_urls: tuple[str, ...] = ()
    #: The citation in another language, by language, where the English one describes the work
    #: (a manual's summary, a note in brackets); titles stay as written.
    translations: dict | None = None

    def cite_in(self, language: str) -> str:
        """The citation a page in ``language`` shows: a seed's original title, else the entry's
        translation, else ``cite``."""
        return self.original_cite(language) or (self.translations or {}).get(language) or self.cite

    def original_cite(self, language: str) -> str | None:
        """The citation a page in ``language`` shows for a seed: author, original title in
        book-title marks, the note in that language; None for English and for other works
        (cited as ``cite``, in the language they were written in)."""
        if not self.original or language == "en":
            return None
        note = (self.original.get("note") or {}).get(language)
        author = self.original.get("author")
        return ((f"{author}，" if author else "") + f"《{self.original['title']}》"
                + (f"（{note}）" if note else ""))

    @property
    def anchor(self) -> str:
        return "ref-" + "".join(c if c.isalnum() else "-" for c in self.id)

    @property
    def case_numbers(self) -> list[str]:
        """The numbers of the cases that use it (01 of 01-send-buffer)."""
        return [case_number(case) or case for case in self.cases]


@dataclass(frozen=True)
class CheatRow:
    case_id: str
    number: str
    cells: tuple[str, ...]


def read_references(course_dir: str | Path | None = None) -> list[Reference]:
    """The course's references, each with the cases whose rooms cite it (none for a course
    folder without the file). A room that cites a work the file lacks is refused."""
    the_course = course(course_dir)
    path = the_course.folder / REFERENCES_FILE
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    known = {r["id"] for r in data["references"]}
    for room in the_course.rooms:
        unknown = [c for c in room.cites if c not in known]
        if unknown:
            raise CourseError(f"{room.folder / 'case.toml'}: cites {', '.join(unknown)}, which {path} does not list")
    return [Reference(r["id"], r["kind"], r["cite"], r.get("url"),
                      tuple(room.case_id for room in the_course.rooms if r["id"] in room.cites),
                      r.get("original"), tuple(r.get("more_urls", ())), r.get("translations"))
            for r in data["references"]]


def cited_by(references: Sequence[Reference], case_id: str) -> list[Reference]:
    return [r for r in references if case_id in r.cases]


def cheatsheet_rows(t: Messages, case_ids: Iterable[str]) -> list[CheatRow]:
    """A row for each case the strings describe, in the order given."""
    rows = []
    for case_id in case_ids:
        if all(t.has(f"cheatsheet.{case_id}.{column}") for column in COLUMNS):
            rows.append(CheatRow(case_id, case_number(case_id) or case_id,
                                 tuple(t(f"cheatsheet.{case_id}.{column}") for column in COLUMNS)))
    return rows


def render_cheatsheet(case_ids: Iterable[str], *, context: ReportContext) -> str:
    """The cheat sheet as a page of its own (one A4 page, landscape)."""
    t = context.messages()
    return render("cheatsheet.html.j2", messages=t, context=context, assets=page_assets([], []),
                  language=t.language, rows=cheatsheet_rows(t, case_ids), columns=COLUMNS,
                  environment_line=context.environment_line(t))


def write_cheatsheet(case_ids: Iterable[str], html_path: str | Path, *, context: ReportContext) -> Path:
    return write_atomically(html_path, render_cheatsheet(case_ids, context=context))


def write_glossary(glossary: Glossary, html_path: str | Path, *, context: ReportContext) -> Path:
    """The glossary as pages of their own (:mod:`.glossary`), which a case's own page links its
    terms to."""
    t = context.messages()
    return write_atomically(html_path, render("glossary.html.j2", messages=t, context=context,
                                              assets=page_assets([], []), language=t.language, glossary=glossary))
