"""The render layer (step "render" of the journey): a case's scored checks, its pages, the
handout, the notebooks students get, and the grading of their predictions.

Modules, one job each: :mod:`.pipeline` (notebooks → executed → HTML → PDF → handout:
``tcplab report``), :mod:`.scores` (the checks notebooks publish), :mod:`.prose` (sentences a run
fills in), :mod:`.page` (what a case notebook shows of its runs), :mod:`.execute` (papermill), :mod:`.editions` (student/instructor by cell tags),
:mod:`.html` (nbconvert, page), :mod:`.offline` (KaTeX, no network), :mod:`.pdf` (chromium),
:mod:`.handout` (the combined document), :mod:`.shards` (a course split across machines and
merged), :mod:`.release` (the notebooks students run, plain or as an nbgrader assignment),
:mod:`.worksheet` (what a case's worksheet asks), :mod:`.answers` (answers read as students write
them), :mod:`.grading` (an item scored against the class's measurement), :mod:`.autograde` (the
hidden tests nbgrader runs, the per-item gradebook), :mod:`.stamps` (when predictions were
written). This face only hands their names on.
"""

from importlib import import_module
from typing import Any

#: Each name this face hands on, and the module that owns it. Looked up when first asked for
#: (PEP 562), so that a module of the package (the autograder's tests import one per cell) does not
#: load the whole render pipeline (nbconvert, chromium's driver) with it.
_OWNERS = {
    "ReportContext": "context", "EDITIONS": "editions", "ExecutionResult": "execute", "execute_notebook": "execute",
    "CasePage": "page", "ChromiumNotFound": "pdf", "PdfError": "pdf", "html_to_pdf": "pdf",
    **dict.fromkeys(("FORMATS", "Case", "CaseReport", "ReportResult", "build_report", "render_only"), "pipeline"),
    **dict.fromkeys(("MIME_TYPE", "SCHEMA", "Check", "Scores", "at_least", "at_most", "between", "check", "equals",
                     "below_line", "measurement", "or_explained", "publish", "read_scores", "within"), "scores"),
}


def __getattr__(name: str) -> Any:
    if name not in _OWNERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_OWNERS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "build_report", "render_only", "Case", "CaseReport", "ReportResult", "ReportContext", "CasePage",
    "FORMATS", "EDITIONS",
    "publish", "read_scores", "Check", "Scores", "within", "at_least", "at_most", "below_line", "between",
    "equals", "check", "or_explained", "measurement", "MIME_TYPE", "SCHEMA",
    "execute_notebook", "ExecutionResult", "html_to_pdf", "ChromiumNotFound", "PdfError",
]
