"""Many cases → one handout: cover, contents, summary of every check, then one section per case.

Every case section starts on a new page and is a CSS *named page* of its own, so the
page header names the case and the footer the kernel and backend of that case's runs (chromium
prints ``@page`` margin boxes); the summary's pages name every kernel and backend of the handout,
and pages of no run (cover, cheat sheet, glossary, references) name none. On screen, where there
are no pages, a banner line at the top of each section says the same. A case that did not run is
listed in the summary with its error and still gets its section; it never stops the
cases after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..course import case_number
from ..files import write_atomically
from .context import ReportContext
from .course_pages import COLUMNS, Reference, cheatsheet_rows, cited_by
from .glossary import Glossary
from .html import page_assets, section_anchor
from .scores import Scores
from .templating import render

__all__ = ["CaseSection", "STATUSES", "case_status", "render_handout", "write_handout",
           "section_anchor"]

#: passed: ran and every check passed; failed: ran, some check failed;
#: error: did not run to the end; unscored: ran but published no checks;
#: busy: the machine disturbed a run behind the checks even after reruns (``observe.health``),
#: so they are neither passed nor failed: the result is not trusted.
STATUSES = ("passed", "failed", "error", "unscored", "busy")


def case_status(error: str | None, scores: list[Scores]) -> str:
    if error:
        return "error"
    if not any(s.checks for s in scores):
        return "unscored"
    if any(s.disturbed for s in scores):
        return "busy"
    return "passed" if all(s.passed for s in scores) else "failed"


@dataclass
class CaseSection:
    """One case as the handout shows it."""

    case_id: str
    title: str
    status: str
    scores: list[Scores] = field(default_factory=list)
    error: str | None = None
    traceback: str | None = None
    cells_html: str = ""
    cells_css: str = ""
    #: The kernels and backends of the case's own runs (``combine_kernels``/``combine_backends``),
    #: which its pages' footer names; None where the case published none.
    kernel: str | None = None
    backend: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {self.status!r}")

    @property
    def anchor(self) -> str:
        return section_anchor(self.case_id)

    @property
    def number(self) -> str | None:
        return case_number(self.case_id)

    def header(self, t, index: int) -> str:
        """The running header of the section's pages: "Case 01 · title" (its place in the
        handout where the case id has no number)."""
        return f"{t('handout.case')} {self.number or index} · {self.title}"

    def environment_line(self, context: ReportContext, t) -> str:
        """The footer of the section's pages: the kernel and backend its runs used."""
        return context.with_backend(self.backend or context.backend).with_kernel(self.kernel).environment_line(t)

    @property
    def n_checks(self) -> int:
        return sum(s.n_checks for s in self.scores)

    @property
    def n_passed(self) -> int:
        return sum(s.n_passed for s in self.scores)

    @property
    def checks(self):
        return [c for s in self.scores for c in s.checks]


def render_handout(sections: list[CaseSection], *, context: ReportContext,
                   katex_dir: str | Path | None = None, references: list[Reference] | None = None,
                   pages: dict[str, int] | None = None, glossary: Glossary | None = None) -> str:
    """The handout as one self-contained HTML page; with ``references`` (the course's), each
    case lists its own and a references page closes it; with ``glossary`` (the course's), its page
    comes after the cases, which link their terms to it; with ``pages`` (section anchor → the
    page a print of it began on), the contents give page numbers on paper."""
    t = context.messages()
    assets = page_assets([s.cells_html for s in sections], [s.cells_css for s in sections],
                         katex_dir=katex_dir)
    n_failed = sum(1 for s in sections if s.status not in ("passed", "busy"))
    n_busy = sum(1 for s in sections if s.status == "busy")
    references = references or []
    return render(
        "handout.html.j2", messages=t, context=context, sections=sections, assets=assets,
        language=t.language, title=context.title or t("handout.default_title"),
        environment_line=context.environment_line(t), n_failed=n_failed, n_busy=n_busy,
        rows=cheatsheet_rows(t, [s.case_id for s in sections]), columns=COLUMNS, references=references,
        cited={s.case_id: cited_by(references, s.case_id) for s in sections}, pages=pages or {},
        glossary=glossary,
    )


def write_handout(sections: list[CaseSection], html_path: str | Path, *,
                  context: ReportContext, katex_dir: str | Path | None = None,
                  references: list[Reference] | None = None, pages: dict[str, int] | None = None,
                  glossary: Glossary | None = None) -> Path:
    return write_atomically(html_path, render_handout(sections, context=context, katex_dir=katex_dir,
                                                      references=references, pages=pages, glossary=glossary))
