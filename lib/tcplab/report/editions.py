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
"""

from __future__ import annotations

import copy

import nbformat
from nbconvert.preprocessors import TagRemovePreprocessor

from ..units import ParameterError

__all__ = ["EDITIONS", "EDITION_TAGS", "apply_edition", "check_edition"]

EDITIONS = ("student", "instructor")

#: edition -> (cell tags removed whole, cell tags whose outputs are removed)
EDITION_TAGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "student": (frozenset({"answer", "instructor", "remove-cell"}),
                frozenset({"prediction", "exercise", "remove-output"})),
    "instructor": (frozenset({"remove-cell"}), frozenset({"remove-output"})),
}


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
    return filtered
