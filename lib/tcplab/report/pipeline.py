"""The render pipeline: case notebooks → executed notebooks → HTML → PDF → one handout.

:func:`build_report` runs every case notebook with papermill and renders the results;
:func:`render_only` renders again from notebooks already executed (another edition,
a fixed template) without running anything. Both write, per case,
``<reports_dir>/<case>.ipynb``, ``<case>.html`` and ``<case>.pdf``, then
``handout.html`` and ``handout.pdf``, and return a :class:`ReportResult`, whose
:meth:`ReportResult.to_json` is the reports folder's ``summary.json`` (:data:`SUMMARY`).

A case that fails — the notebook raises, the kernel dies, a cell times out — is
recorded with its error and shown as such in its page and in the handout's summary;
the other cases go on. A page that fails to render is recorded the same way.

``language`` picks the language of everything rendered: the strings, the notebooks' Markdown
cells where a fresh translation exists (English cell by cell elsewhere), and what the kernels
write (they run with ``TCPLAB_LANG`` set to it). Rendering again in another language than the
one the notebooks ran in writes their bound sentences and scores tables again from the values
they keep; figures stay as they were drawn.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..course import PROFILES, CourseError, room
from ..i18n import ran_in, read_translation, translate_notebook, translated_title
from ..lab.kernels import MODES
from ..files import write_atomically
from ..units import ParameterError
from ..params import check_language
from ..words import FALLBACK_LANGUAGE, default_language
from .context import ReportContext, combine_backends, combine_kernels
from .editions import check_edition
from .exercises import EXERCISES, check_exercises
from .execute import DEFAULT_CELL_TIMEOUT_S, ExecutionResult, execute_notebook
from .course_pages import (CHEATSHEET_NAME, GLOSSARY_NAME, cheatsheet_rows, cited_by, read_references, write_cheatsheet,
                           write_glossary)
from .glossary import read_glossary
from .handout import CaseSection, case_status, write_handout
from .html import (RenderedCells, case_page, load_notebook, notebook_error, notebook_title,
                   render_cells, section_anchor)
from .relabel import relabel_outputs
from .pdf import PdfError, find_chromium, first_pages, html_to_pdf
from .scores import Check, Scores, scores_in

__all__ = ["build_report", "render_only", "Case", "CaseReport", "ReportResult", "FORMATS", "SUMMARY",
           "check_formats"]

log = logging.getLogger(__name__)

FORMATS = ("html", "pdf")
HANDOUT_NAME = "handout"
#: The file a reports folder's summary is written to (``tcplab report``) and read from (a render
#: of that folder, a merge of shards, grading).
SUMMARY = "summary.json"


@dataclass(frozen=True)
class Case:
    """One case to report on: an id, its notebook, and parameters of its own."""

    case_id: str
    #: Defaults to the notebook in the case's room of the course.
    notebook: Path | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def notebook_path(self, course_dir: Path | None) -> Path:
        return Path(self.notebook) if self.notebook else room(self.case_id, course_dir).notebook


@dataclass
class CaseReport:
    """How one case went, and where its files are."""

    case_id: str
    title: str
    #: One of :data:`.handout.STATUSES`: passed, failed, error, unscored, busy.
    status: str
    scores: list[Scores] = field(default_factory=list)
    execution: ExecutionResult | None = None
    error: str | None = None
    traceback: str | None = None
    #: format ("ipynb", "html", "pdf") -> file written.
    outputs: dict[str, Path] = field(default_factory=dict)
    #: Rendering problems (a page or PDF that could not be made); results are unaffected.
    render_errors: list[str] = field(default_factory=list)
    #: Seconds the notebook ran: this run's execution, or (re-rendering, merging shards)
    #: what papermill recorded in the executed notebook.
    execution_s: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def checks(self) -> list[Check]:
        return [c for s in self.scores for c in s.checks]


@dataclass
class ReportResult:
    cases: list[CaseReport]
    context: ReportContext
    #: format -> handout file written.
    handout: dict[str, Path] = field(default_factory=dict)
    #: format -> the cheat sheet's own page (:mod:`.course_pages`).
    cheatsheet: dict[str, Path] = field(default_factory=dict)
    #: format -> the glossary's own pages, which the case pages link to (:mod:`.glossary`).
    glossary: dict[str, Path] = field(default_factory=dict)
    render_errors: list[str] = field(default_factory=list)
    #: Where the cases came from when not from one run: ``{"index": I, "count": N,
    #: "selection": [...]}`` for a shard (:mod:`.shards`), ``{"merged_from": [...]}`` for a merge.
    origin: dict[str, Any] = field(default_factory=dict)

    @property
    def all_passed(self) -> bool:
        """Every case ran, published checks, and every check passed."""
        return bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def busy(self) -> list[str]:
        """The cases the machine was too busy to judge (status "busy")."""
        return [c.case_id for c in self.cases if c.status == "busy"]

    @property
    def none_failed(self) -> bool:
        """Every case ran and passed, or was too busy to judge: none failed or broke."""
        return bool(self.cases) and all(c.status in ("passed", "busy") for c in self.cases)

    @property
    def rendered_ok(self) -> bool:
        """Every requested file was written."""
        return not self.render_errors and not any(c.render_errors for c in self.cases)

    def __getitem__(self, case_id: str) -> CaseReport:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        raise KeyError(case_id)

    def to_json(self) -> dict[str, Any]:
        """What CI and benchmarks read back (``summary.json``): per case its status, checks
        and execution time, and where the report was made."""
        return {
            "all_passed": self.all_passed, "mode": self.context.mode, "profile": self.context.profile,
            "exercises": self.context.exercises,
            "edition": self.context.edition, "backend": self.context.backend, "kernel": self.context.kernel,
            "language": self.context.messages().language,
            **self.origin,
            "cases": [{"case_id": c.case_id, "title": c.title, "status": c.status,
                       "execution_s": c.execution_s,
                       "checks": [x.to_json() for x in c.checks], "error": c.error,
                       "machine": {"runs": sum(x.runs_read for x in c.scores),
                                   "disturbed": [d for x in c.scores for d in x.disturbed]}}
                      for c in self.cases],
        }

    def summary(self) -> str:
        """A few plain lines for a terminal."""
        t = self.context.messages()
        lines = []
        for c in self.cases:
            checks = f"{sum(x.passed for x in c.checks)}/{len(c.checks)}" if c.checks else "-"
            took = f"{c.execution_s:6.1f} s" if c.execution_s is not None else ""
            line = f"{c.case_id:<28} {t('status.' + c.status):<12} {checks:>7} {took}"
            if c.error:
                line += f"  {c.error}"
            lines.append(line)
        lines.extend(self.render_errors)
        for c in self.cases:
            lines.extend(f"{c.case_id}: {e}" for e in c.render_errors)
        return "\n".join(lines)


def _as_cases(cases: Iterable[str | Path | Case]) -> list[Case]:
    result = []
    for case in cases:
        if isinstance(case, Case):
            result.append(case)
        elif isinstance(case, Path) or str(case).endswith(".ipynb"):
            result.append(Case(Path(case).stem, notebook=Path(case)))
        else:
            result.append(Case(str(case)))
    ids = [c.case_id for c in result]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"case ids must be unique; repeated: {', '.join(duplicates)}")
    return result


def check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """The output formats asked for, once each, in order; refused unless each is known."""
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ParameterError("--formats", ",".join(formats), f"one or more of {', '.join(FORMATS)}, comma-separated",
                             f"unknown: {', '.join(unknown)}" if unknown else "none given")
    return formats


def _check_formats(formats: Iterable[str], chromium: str | Path | None) -> tuple[str, ...]:
    formats = check_formats(formats)
    if "pdf" in formats:
        # Before hours of measurement, not after them.
        find_chromium(chromium)
    return formats


def _asked_backend(parameters: Mapping[str, Any]) -> str | None:
    """The backend a case was told to use, when that names one (``auto`` names none)."""
    backend = parameters.get("backend")
    return backend if isinstance(backend, str) and backend not in ("", "auto") else None


def _say(progress: bool, message: str) -> None:
    log.info(message)
    if progress:
        print(message, file=sys.stderr, flush=True)


@dataclass
class _Rendering:
    """What every case's rendering shares in one report run."""

    output_dir: Path
    context: ReportContext
    formats: tuple[str, ...]
    course_dir: Path | None
    katex_dir: str | Path | None
    chromium: str | Path | None
    pdf_timeout_s: float
    progress: bool

    def __post_init__(self) -> None:
        # The course's glossary, which every case's page links its terms to (none for cases of
        # another course, a test's, or a course folder without one).
        try:
            self.glossary = read_glossary(self.course_dir)
        except (ParameterError, CourseError):
            self.glossary = None

    def case(self, case: Case, executed: Path, execution: ExecutionResult | None,
             ) -> tuple[CaseReport, CaseSection]:
        """Read one executed notebook and write its page (and PDF); never raises for the case."""
        report, nb = self._read(case, executed, execution)
        if nb is not None:
            nb = self._in_language(case, executed, nb, report)
        section = CaseSection(case_id=case.case_id, title=report.title, status=report.status,
                              scores=report.scores, error=report.error,
                              traceback=report.traceback)
        cells = None
        if nb is not None:
            # Relative image paths in markdown cells mean the source notebook's folder.
            base_dir = self._source(case, executed).parent
            try:
                cells = render_cells(nb, edition=self.context.edition,
                                     id_prefix=section_anchor(case.case_id) + "--",
                                     base_dir=base_dir, language=self.language,
                                     case_id=case.case_id, glossary=self._glossary_of(case))
                section.cells_html, section.cells_css = cells.html, cells.css
            except Exception as exc:  # noqa: BLE001 - keep the case in the handout, say why
                report.render_errors.append(f"cells: {type(exc).__name__}: {exc}")
        if cells is not None or report.error:
            asked = (execution.parameters if execution is not None
                     else nb.metadata.get("papermill", {}).get("parameters", {}) if nb else {})
            backend = (combine_backends(s.backend for s in report.scores)
                       or _asked_backend(asked) or self.context.backend)
            kernel = combine_kernels(s.environment for s in report.scores)
            section.backend, section.kernel = backend, kernel
            self._write(report, cells or RenderedCells("", ""),
                        self.context.with_backend(backend).with_kernel(kernel))
        return report, section

    @property
    def language(self) -> str:
        return self.context.messages().language

    def _glossary_of(self, case: Case):
        """The glossary a case's page links to: the course's, for a case of the course."""
        try:
            room(case.case_id, self.course_dir)
        except ParameterError:
            return None
        return self.glossary

    def _source(self, case: Case, executed: Path) -> Path:
        """The notebook a case was executed from: its room's, or the file it was given as; the
        executed notebook where neither is known (a course folder without the case)."""
        try:
            return case.notebook_path(self.course_dir)
        except ParameterError:
            return executed

    def _in_language(self, case: Case, executed: Path, nb: Any, report: CaseReport) -> Any:
        """The executed notebook as the page's language shows it: Markdown cells translated where
        a fresh translation exists (:mod:`tcplab.i18n`), the title too, and the kernel's
        sentences and scores written again when it ran in another language."""
        language = self.language
        if ran_in(nb) != language:
            nb = relabel_outputs(nb, language)
        if language == FALLBACK_LANGUAGE:
            return nb
        try:
            # Translations live in the room of the notebook the case ran from.
            translation = read_translation(case.case_id, language, folder=self._source(case, executed).parent)
        except (OSError, ValueError) as exc:  # a broken translation file: the page stays English
            report.render_errors.append(f"translation: {exc}")
            return nb
        nb = translate_notebook(nb, language, translation=translation)
        published = next((s.title for s in report.scores if s.title), None)
        report.title = (translated_title(published, translation) if published
                        else notebook_title(nb, case.case_id))
        return nb

    def _read(self, case: Case, executed: Path, execution: ExecutionResult | None,
              ) -> tuple[CaseReport, Any]:
        report = CaseReport(case_id=case.case_id, title=case.case_id, status="error",
                            execution=execution)
        if execution is not None:
            report.error, report.traceback = execution.error, execution.traceback
            report.execution_s = execution.duration_s
        nb = None
        if executed.is_file():
            report.outputs["ipynb"] = executed
            try:
                nb = load_notebook(executed)
            except Exception as exc:  # noqa: BLE001 - a corrupt notebook is this case's problem
                report.error = report.error or f"unreadable notebook {executed}: {exc}"
        elif report.error is None:
            report.error = f"no executed notebook at {executed}"
        if nb is not None:
            report.scores = scores_in(nb)
            published = next((s.title for s in report.scores if s.title), None)
            report.title = published or notebook_title(nb, case.case_id)
            if execution is None:
                report.execution_s = nb.metadata.get("papermill", {}).get("duration")
            if execution is None and report.error is None:
                # Re-rendering: the notebook itself remembers where it stopped.
                found = notebook_error(nb)
                if found:
                    report.error, report.traceback = found
        report.status = case_status(report.error, report.scores)
        return report, nb

    def _write(self, report: CaseReport, cells: RenderedCells, context: ReportContext) -> None:
        html_path = self.output_dir / f"{report.case_id}.html"
        try:
            page = case_page(cells, context=context, case_id=report.case_id,
                             title=report.title, error=report.error,
                             traceback=report.traceback, katex_dir=self.katex_dir)
            write_atomically(html_path, page)
            report.outputs["html"] = html_path
        except Exception as exc:  # noqa: BLE001 - a page that fails is recorded, not fatal
            report.render_errors.append(f"html: {type(exc).__name__}: {exc}")
            return
        self._pdf(html_path, report.outputs, report.render_errors, "pdf: ")

    def handout(self, reports: list[CaseReport], sections: list[CaseSection]) -> ReportResult:
        backend = combine_backends(s.backend for r in reports for s in r.scores)
        kernel = combine_kernels(s.environment for r in reports for s in r.scores)
        context = self.context.with_backend(backend or self.context.backend).with_kernel(kernel)
        result = ReportResult(cases=reports, context=context)
        html_path = self.output_dir / f"{HANDOUT_NAME}.html"
        _say(self.progress, f"handout: {len(sections)} case(s) → {html_path}")
        references = read_references(self.course_dir)
        if not any(cited_by(references, s.case_id) for s in sections):
            references = []  # cases of another course (a test's): no page of ours
        glossary = self.glossary if any(self._glossary_of(Case(s.case_id)) for s in sections) else None
        try:
            write_handout(sections, html_path, context=context, katex_dir=self.katex_dir, references=references,
                          glossary=glossary)
            result.handout["html"] = html_path
        except Exception as exc:  # noqa: BLE001
            result.render_errors.append(f"handout html: {type(exc).__name__}: {exc}")
            return result
        self._pdf(html_path, result.handout, result.render_errors, "handout pdf: ", keep_html=True)
        if "pdf" in result.handout:
            # Two passes: the contents get the page each case began on in the first print.
            # Adding the numbers does not move a page: they sit on the contents' own lines.
            t = context.messages()
            headers = {s.anchor: s.header(t, i) for i, s in enumerate(sections, 1)}
            headers.update(cheatsheet=t("cheatsheet.title"), references=t("references.title"),
                           glossary=t("glossary.title"))
            pages = first_pages(result.handout["pdf"], headers)
            if pages:
                write_handout(sections, html_path, context=context, katex_dir=self.katex_dir, references=references,
                              pages=pages, glossary=glossary)
                self._pdf(html_path, result.handout, result.render_errors, "handout pdf: ", keep_html=True)
        if "html" not in self.formats:
            result.handout.pop("html").unlink(missing_ok=True)
        case_ids = [s.case_id for s in sections]
        if cheatsheet_rows(context.messages(), case_ids):
            try:
                result.cheatsheet["html"] = write_cheatsheet(case_ids, self.output_dir / f"{CHEATSHEET_NAME}.html",
                                                             context=context)
            except Exception as exc:  # noqa: BLE001 - as the handout's: recorded, not fatal
                result.render_errors.append(f"cheat sheet html: {type(exc).__name__}: {exc}")
                return result
            self._pdf(result.cheatsheet["html"], result.cheatsheet, result.render_errors, "cheat sheet pdf: ")
        if glossary is not None:
            try:
                result.glossary["html"] = write_glossary(glossary, self.output_dir / f"{GLOSSARY_NAME}.html",
                                                         context=context)
            except Exception as exc:  # noqa: BLE001 - as the cheat sheet's
                result.render_errors.append(f"glossary html: {type(exc).__name__}: {exc}")
                return result
            self._pdf(result.glossary["html"], result.glossary, result.render_errors, "glossary pdf: ")
        return result

    def _pdf(self, html_path: Path, outputs: dict[str, Path], errors: list[str], error_prefix: str, *,
             keep_html: bool = False) -> None:
        """``html_path``'s PDF beside it, where PDF was asked for (a failure goes to ``errors``);
        the HTML stays only where HTML was asked for too (or ``keep_html``: it is printed again),
        else it was only the PDF's source."""
        if "pdf" in self.formats:
            try:
                outputs["pdf"] = html_to_pdf(html_path, html_path.with_suffix(".pdf"),
                                             chromium=self.chromium, timeout_s=self.pdf_timeout_s)
            except (PdfError, OSError) as exc:
                errors.append(f"{error_prefix}{exc}")
        if "html" not in self.formats and not keep_html:
            outputs.pop("html").unlink(missing_ok=True)


def build_report(
    cases: Iterable[str | Path | Case],
    *,
    course_dir: str | Path | None = None,
    reports_dir: str | Path,
    parameters: Mapping[str, Any] | None = None,
    profile: str | None = None,
    edition: str = "instructor",
    mode: str = "live",
    formats: Iterable[str] = FORMATS,
    progress: bool = True,
    kernel_name: str = "python3",
    cell_timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S,
    backend: str | None = None,
    title: str | None = None,
    language: str | None = None,
    katex_dir: str | Path | None = None,
    chromium: str | Path | None = None,
    pdf_timeout_s: float = 120,
    exercises: str = "run",
) -> ReportResult:
    """Execute each case's notebook, then render its pages and the handout.

    Each notebook runs with its folder (its room in ``course_dir``) as working directory and gets
    ``parameters``, then the case's own parameters, then ``case_id``, ``mode`` and, when
    given, ``profile``. ``backend`` only labels the report when no case published one.
    ``language`` (default: ``TCPLAB_LANG``, else English) is the pages' and the kernels'.
    ``formats`` picks the files besides the executed notebooks: "html", "pdf" (a PDF is
    printed from the HTML page, which is removed afterwards if "html" was not asked for).
    ``exercises``: "skip" runs each case without its exercises and their answers (:mod:`.exercises`).
    """
    course_dir, reports_dir = (Path(course_dir) if course_dir else None), Path(reports_dir)
    formats = _check_formats(formats, chromium)
    language = check_language(language or default_language())
    context = ReportContext(edition=check_edition(edition), mode=mode, backend=backend,
                            profile=profile, title=title, language=language, exercises=check_exercises(exercises))
    case_list = _as_cases(cases)
    rendering = _Rendering(reports_dir, context, formats, course_dir, katex_dir, chromium,
                           pdf_timeout_s, progress)
    reports, sections = [], []
    for index, case in enumerate(case_list, 1):
        notebook = case.notebook_path(course_dir)
        executed = reports_dir / f"{case.case_id}.ipynb"
        injected = {**(parameters or {}), **case.parameters, "case_id": case.case_id,
                    "mode": mode}
        if profile is not None:
            injected["profile"] = profile
        _say(progress, f"[{index}/{len(case_list)}] {case.case_id}: executing {notebook}")
        execution = execute_notebook(notebook, executed, parameters=injected,
                                     case_id=case.case_id, kernel_name=kernel_name,
                                     cwd=notebook.parent, cell_timeout_s=cell_timeout_s,
                                     progress=progress, language=language, exercises=exercises)
        if not execution.ok:
            _say(progress, f"[{index}/{len(case_list)}] {case.case_id}: failed: {execution.error}")
        _say(progress, f"[{index}/{len(case_list)}] {case.case_id}: rendering")
        report, section = rendering.case(case, executed, execution)
        reports.append(report)
        sections.append(section)
    return rendering.handout(reports, sections)


def _recorded_run(reports_dir: Path) -> dict:
    """What the run that executed a reports folder's notebooks said about itself (mode,
    profile, exercises), from its ``summary.json``; empty when there is none or it cannot be read."""
    try:
        summary = json.loads((reports_dir / SUMMARY).read_text())
    except (OSError, ValueError):
        return {}
    accepted = {"mode": MODES, "profile": PROFILES, "exercises": EXERCISES}
    return {k: summary[k] for k, values in accepted.items() if isinstance(summary, dict) and summary.get(k) in values}


def render_only(
    cases: Iterable[str | Path | Case],
    *,
    reports_dir: str | Path,
    output_dir: str | Path | None = None,
    course_dir: str | Path | None = None,
    profile: str | None = None,
    edition: str = "instructor",
    mode: str | None = None,
    formats: Iterable[str] = FORMATS,
    progress: bool = True,
    backend: str | None = None,
    title: str | None = None,
    language: str | None = None,
    katex_dir: str | Path | None = None,
    chromium: str | Path | None = None,
    pdf_timeout_s: float = 120,
    exercises: str | None = None,
) -> ReportResult:
    """Render again from ``<reports_dir>/<case>.ipynb`` without executing anything.

    Pages go to ``output_dir`` (default: ``reports_dir``), e.g. to keep a student
    edition beside the instructor one. A notebook that stopped at an error is shown
    as failed with that error; a missing one as a case that did not run. ``mode``,
    ``profile`` and ``exercises`` default to what the run that executed the notebooks recorded
    (``summary.json``): the pages say how their numbers were made, not how they are rendered.
    """
    reports_dir = Path(reports_dir)
    recorded = _recorded_run(reports_dir)
    mode = mode or recorded.get("mode") or "live"
    profile = profile or recorded.get("profile")
    exercises = exercises or recorded.get("exercises") or "run"
    output_dir = Path(output_dir) if output_dir is not None else reports_dir
    formats = _check_formats(formats, chromium)
    language = check_language(language or default_language())
    context = ReportContext(edition=check_edition(edition), mode=mode, backend=backend,
                            profile=profile, title=title, language=language, exercises=check_exercises(exercises))
    rendering = _Rendering(output_dir, context, formats,
                           Path(course_dir) if course_dir else None, katex_dir,
                           chromium, pdf_timeout_s, progress)
    reports, sections = [], []
    case_list = _as_cases(cases)
    for index, case in enumerate(case_list, 1):
        _say(progress, f"[{index}/{len(case_list)}] {case.case_id}: rendering")
        report, section = rendering.case(case, reports_dir / f"{case.case_id}.ipynb", None)
        reports.append(report)
        sections.append(section)
    return rendering.handout(reports, sections)
