"""Student and instructor editions of one single-source notebook, chosen by cell tags.

A notebook is written once. Cells tagged ``answer`` hold worked answers, a cell tagged
``prediction`` may show what the instructor expects before the measurement, and cells tagged
``instructor`` ("What this kernel does differently") explain what several exercises ask the
student to find out; the student edition drops the first and the last, and the outputs of the
second, and of exercise cells (tagged ``exercise``: they run an exercise, and their
plots answer it), so students still make their own predictions (in the worksheet before the theory:
:mod:`.grading`). The tags ``remove-cell`` and ``remove-output`` (the common
Jupyter Book spelling) apply to both editions, for set-up cells whose output helps no
reader.

Within a cell, what only the instructor may see carries the class ``tcplab-instructor``
(:data:`INSTRUCTOR_CLASS`): a span of Markdown (``<span class="tcplab-instructor">= 5792
bytes</span>``, a theory value the worksheet asks for), a table's prediction columns
(:func:`tcplab.report.tables.frame_html` marks them), the Predicted and Rule columns of a checks
table. The student edition drops each such element and keeps the rest of its cell, and its
scores tables list the checks its worksheet asked the student to predict (:func:`worksheet_checks_only`).
"""

from __future__ import annotations

import copy
import re

import nbformat
from nbconvert.preprocessors import TagRemovePreprocessor

from ..units import ParameterError

__all__ = ["EDITIONS", "EDITION_TAGS", "INSTRUCTOR_CLASS", "apply_edition", "check_edition", "without_instructor_parts",
           "worksheet_checks_only", "without_instructor_html"]

EDITIONS = ("student", "instructor")

#: edition -> (cell tags removed whole, cell tags whose outputs are removed)
EDITION_TAGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "student": (frozenset({"answer", "instructor", "remove-cell"}),
                frozenset({"prediction", "exercise", "remove-output"})),
    "instructor": (frozenset({"remove-cell"}), frozenset({"remove-output"})),
}


#: The class of an element inside a cell that only the instructor edition shows.
INSTRUCTOR_CLASS = "tcplab-instructor"

_INSTRUCTOR_OPEN = '<span class="%s">' % INSTRUCTOR_CLASS
_SPAN_TAG = re.compile(r"<span\b[^>]*>|</span>")


def _without_instructor_spans(text: str) -> str:
    """``text`` (Markdown) without its instructor spans, each to its own closing tag (a span of the
    page's parameters may sit inside one); a span with a space on each side takes the one before
    it along ("a <span>b</span> c" leaves "a c")."""
    out, start = [], 0
    while (opened := text.find(_INSTRUCTOR_OPEN, start)) >= 0:
        depth, end = 0, len(text)
        for tag in _SPAN_TAG.finditer(text, opened):
            depth += -1 if tag.group(0) == "</span>" else 1
            if depth == 0:
                end = tag.end()
                break
        kept = text[start:opened]
        if kept.endswith(" ") and text[end:end + 1] == " ":
            kept = kept[:-1]
        out.append(kept)
        start = end
    return "".join(out) + text[start:]


def without_instructor_parts(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` (changed in place) without the elements of class :data:`INSTRUCTOR_CLASS`: spans in
    Markdown (cells, and sentences its code cells said), and cells and columns of the HTML
    tables its code cells showed."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _without_instructor_spans(cell.source)
            continue
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            markdown = (output.get("data") or {}).get("text/markdown")  # a sentence the run said
            if markdown is not None:
                markdown = markdown if isinstance(markdown, str) else "".join(markdown)
                output["data"]["text/markdown"] = _without_instructor_spans(markdown)
            html = (output.get("data") or {}).get("text/html")
            if html is None or INSTRUCTOR_CLASS not in html:
                continue
            output["data"]["text/html"] = without_instructor_html(html if isinstance(html, str) else "".join(html))
    return nb


def check_edition(edition: str) -> str:
    if edition not in EDITION_TAGS:
        raise ParameterError("edition", edition, "one of " + ", ".join(EDITIONS))
    return edition


def apply_edition(nb: nbformat.NotebookNode, edition: str, *, language: str | None = None) -> nbformat.NotebookNode:
    """A copy of ``nb`` as the given edition shows it; ``nb`` itself is left unchanged. The
    student's scores tables list the checks its worksheet asked for (``language``: the words of
    the tables written again), the instructor's all of them."""
    cells, outputs = EDITION_TAGS[check_edition(edition)]
    remover = TagRemovePreprocessor(
        enabled=True, remove_cell_tags=set(cells), remove_all_outputs_tags=set(outputs),
    )
    filtered, _ = remover.preprocess(copy.deepcopy(nb), {})
    if edition != "student":
        return filtered
    return worksheet_checks_only(without_instructor_parts(filtered), language)


def worksheet_checks_only(nb: nbformat.NotebookNode, language: str | None = None) -> nbformat.NotebookNode:
    """``nb`` (changed in place) with each scores table listing only the checks its worksheet asks
    the student to predict, and how many more the instructor's edition scores: the student's page
    measures the student's predictions, not the case's every check. A notebook without a readable
    worksheet keeps its tables whole."""
    import json

    from . import scores
    from .worksheet import WORKSHEET_TAG, Refused, parse_worksheet

    sheets = [c for c in nb.cells if c.cell_type == "code" and WORKSHEET_TAG in c.get("metadata", {}).get("tags", [])]
    try:
        asked = {name for c in sheets for name in parse_worksheet(c.source)}
    except Refused:
        return nb
    if not asked:
        return nb
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data") or {}
            if scores.MIME_TYPE not in data:
                continue
            payload = data[scores.MIME_TYPE]
            published = scores.Scores.from_json(json.loads(payload) if isinstance(payload, str) else payload)
            shown = scores.scores_output(published, language=language, only=asked)
            data["text/html"], data["text/plain"] = without_instructor_html(shown["text/html"]), shown["text/plain"]
    return nb


def without_instructor_html(html: str) -> str:
    """``html`` without its elements of class :data:`INSTRUCTOR_CLASS`."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for element in soup.select("." + INSTRUCTOR_CLASS):
        element.decompose()
    return str(soup)
