"""The render layer (step "render" of the journey): a case's scored checks, its pages, the
handout, the notebooks students get, and the grading of their predictions.

Modules, one job each: :mod:`.pipeline` (notebooks → executed → HTML → PDF → handout:
``tcplab report``), :mod:`.scores` (the checks notebooks publish), :mod:`.prose` (sentences a run
fills in), :mod:`.page` (what a case notebook shows of its runs), :mod:`.execute` (papermill), :mod:`.editions` (student/instructor by cell tags),
:mod:`.html` (nbconvert, page), :mod:`.offline` (KaTeX, no network), :mod:`.pdf` (chromium),
:mod:`.handout` (the combined document), :mod:`.shards` (a course split across machines and
merged), :mod:`.release` (the notebooks students run), :mod:`.grading` (students' predictions
against a case's scores, ``tcplab grade``). This face only hands their names on.
"""

from .context import ReportContext
from .editions import EDITIONS
from .execute import ExecutionResult, execute_notebook
from .page import CasePage
from .pdf import ChromiumNotFound, PdfError, html_to_pdf
from .pipeline import FORMATS, Case, CaseReport, ReportResult, build_report, render_only
from .scores import (MIME_TYPE, SCHEMA, Check, Scores, at_least, at_most, below_line, between, check, equals,
                     or_explained, publish, read_scores, within)

__all__ = [
    "build_report", "render_only", "Case", "CaseReport", "ReportResult", "ReportContext", "CasePage",
    "FORMATS", "EDITIONS",
    "publish", "read_scores", "Check", "Scores", "within", "at_least", "at_most", "below_line", "between",
    "equals", "check", "or_explained", "MIME_TYPE", "SCHEMA",
    "execute_notebook", "ExecutionResult", "html_to_pdf", "ChromiumNotFound", "PdfError",
]
