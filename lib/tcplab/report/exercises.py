"""A report without its exercises: which cells it leaves unrun, and what they show instead.

``tcplab report --exercises skip`` runs each case's own runs, checks and answers, and not its
exercises: a quicker way to see whether a kernel (say, User-mode Linux's) reproduces the
course, where the exercises' runs would take a third of the time and score nothing. The
exercise cells (tagged :data:`EXERCISE_TAG`) are left unrun, and so is every later code cell
that reads a name one of them bound (the worked answer to that exercise), found from the cells'
code rather than from a list to keep up to date. Each unrun cell keeps its code and shows a
note in place of its output, so no page passes an exercise off as answered.
"""

from __future__ import annotations

import ast
import copy

import nbformat

from ..units import ParameterError

__all__ = ["EXERCISES", "EXERCISE_TAG", "NOT_RUN_TAG", "check_exercises", "cells_not_run", "without_exercises",
           "note_not_run"]

#: What a report does with the exercises: run them (the default), or skip them.
EXERCISES = ("run", "skip")
#: The tag of a cell that runs an exercise.
EXERCISE_TAG = "exercise"
#: The tag of a cell a report left unrun (papermill's client skips cells with it).
NOT_RUN_TAG = "tcplab-not-run"


def check_exercises(exercises: str) -> str:
    if exercises not in EXERCISES:
        raise ParameterError("exercises", exercises, "one of " + ", ".join(EXERCISES))
    return exercises


def _bound_and_read(source: str) -> tuple[set[str], set[str]]:
    """The names a cell's code binds, and those it reads without binding them itself."""
    tree = ast.parse(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return bound, read - bound


def cells_not_run(nb: nbformat.NotebookNode) -> list[int]:
    """Indexes of the code cells a report without exercises leaves unrun: each exercise cell,
    and each later cell that reads a name an unrun cell bound and no run cell bound again since."""
    unrun, from_unrun = [], set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        bound, read = _bound_and_read(cell.source)
        if EXERCISE_TAG in cell.metadata.get("tags", []) or read & from_unrun:
            unrun.append(index)
            from_unrun |= bound
        else:
            from_unrun -= bound
    return unrun


def without_exercises(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose cells :func:`cells_not_run` names carry :data:`NOT_RUN_TAG`."""
    nb = copy.deepcopy(nb)
    for index in cells_not_run(nb):
        tags = nb.cells[index].metadata.setdefault("tags", [])
        if NOT_RUN_TAG not in tags:
            tags.append(NOT_RUN_TAG)
    return nb


def note_not_run(nb: nbformat.NotebookNode, note: str) -> nbformat.NotebookNode:
    """``nb`` (changed in place) with ``note`` as the only output of each cell tagged
    :data:`NOT_RUN_TAG`."""
    for cell in nb.cells:
        if cell.cell_type == "code" and NOT_RUN_TAG in cell.metadata.get("tags", []):
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": note})]
    return nb
