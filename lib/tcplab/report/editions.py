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
table. The student edition drops each such element and keeps the rest of its cell.
"""

from __future__ import annotations

import copy
import re

import nbformat
from nbconvert.preprocessors import TagRemovePreprocessor

from ..units import ParameterError

__all__ = ["EDITIONS", "EDITION_TAGS", "INSTRUCTOR_CLASS", "apply_edition", "check_edition", "without_instructor_parts"]

EDITIONS = ("student", "instructor")

#: edition -> (cell tags removed whole, cell tags whose outputs are removed)
EDITION_TAGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "student": (frozenset({"answer", "instructor", "remove-cell"}),
                frozenset({"prediction", "exercise", "remove-output"})),
    "instructor": (frozenset({"remove-cell"}), frozenset({"remove-output"})),
}


#: The class of an element inside a cell that only the instructor edition shows.
INSTRUCTOR_CLASS = "tcplab-instructor"

#: A span, and the space before it where one follows it too: "a <span>b</span> c" leaves "a c".
_INSTRUCTOR_SPAN = re.compile(r'(?: (?=<span class="%s">.*?</span> ))?<span class="%s">.*?</span>'
                              % (INSTRUCTOR_CLASS, INSTRUCTOR_CLASS), re.DOTALL)


def without_instructor_parts(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` (changed in place) without the elements of class :data:`INSTRUCTOR_CLASS`: spans in
    Markdown (cells, and sentences its code cells said), and cells and columns of the HTML
    tables its code cells showed."""
    from bs4 import BeautifulSoup

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _INSTRUCTOR_SPAN.sub("", cell.source)
            continue
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            markdown = (output.get("data") or {}).get("text/markdown")  # a sentence the run said
            if markdown is not None:
                markdown = markdown if isinstance(markdown, str) else "".join(markdown)
                output["data"]["text/markdown"] = _INSTRUCTOR_SPAN.sub("", markdown)
            html = (output.get("data") or {}).get("text/html")
            if html is None or INSTRUCTOR_CLASS not in html:
                continue
            soup = BeautifulSoup(html if isinstance(html, str) else "".join(html), "html.parser")
            for element in soup.select("." + INSTRUCTOR_CLASS):
                element.decompose()
            output["data"]["text/html"] = str(soup)
    return nb


def check_edition(edition: str) -> str:
    if edition not in EDITION_TAGS:
        raise ParameterError("edition", edition, "one of " + ", ".join(EDITIONS))
    return edition


def apply_edition(nb: nbformat.NotebookNode, edition: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` as the given edition shows it; ``nb`` itself is left unchanged."""
    cells, outputs = EDITION_TAGS[check_edition(edition)]
    remover = TagRemovePreprocessor(
        enabled=True, remove_cell_tags=set(cells), remove_all_outputs_tags=set(outputs),
    )
    filtered, _ = remover.preprocess(copy.deepcopy(nb), {})
    return without_instructor_parts(filtered) if edition == "student" else filtered
