"""A case's worksheet cell: the student's predictions, read with :mod:`ast` and never run.

One code cell tagged :data:`WORKSHEET_TAG` assigns ``predictions = {"check name": value, ...}``
(a number, a word, or None), each line ending in a comment with the unit. :mod:`.grading`
scores what it holds; :mod:`.html` shows it on a page as a box per prediction.
"""

from __future__ import annotations

import ast
import io
import math
import tokenize
from typing import Any

from ..analysis.diagnose import LABELS
from ..words import Messages
from .scores import Value
from .templating import format_value, render

__all__ = ["WORKSHEET_TAG", "Refused", "parse_worksheet", "worksheet_rows", "worksheet_box"]

WORKSHEET_TAG = "worksheet"


class Refused(ValueError):
    """Why a worksheet's source is not a predictions dict; the caller names notebook and cell.
    Its words are an English phrase that the strings files translate (``error.*``, as a
    ParameterError's are): the code it quotes fills a placeholder, braces and all."""


#: Code a refusal quotes: a value filling its phrase, whose placeholders are {words}.
_ASSIGNMENT = "predictions = {...}"
_DICT = "{...}"


def _literal(node: ast.expr, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Refused(f"{what} (line {node.lineno}) is code, not a literal; "
                       "the worksheet is read, never run") from None


def parse_worksheet(source: str) -> dict[str, Value]:
    """The ``predictions`` dict of a worksheet's source, by :mod:`ast` alone."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise Refused(f"it does not parse: line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte, absurd nesting
        raise Refused(f"it does not parse: {type(exc).__name__}") from None
    found: list[ast.expr] = []
    for node in tree.body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) and node.value is not None
                  else None)
        if isinstance(target, ast.Name) and target.id == "predictions":
            found.append(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.Name)):
            continue  # a docstring, or `predictions` on a line to show it: nothing to run
        else:
            raise Refused(f"line {node.lineno} is code other than {_ASSIGNMENT}; "
                           "the worksheet is read, never run")
    if len(found) != 1:
        raise Refused("it assigns predictions " + ("nowhere" if not found else f"{len(found)} times"))
    table = found[0]
    if not isinstance(table, ast.Dict):
        raise Refused(f"predictions (line {table.lineno}) is not a dict literal {_DICT}")
    predictions: dict[str, Value] = {}
    for key_node, value_node in zip(table.keys, table.values):
        if key_node is None:
            raise Refused(f"line {value_node.lineno} unpacks another dict (**); write each check out")
        key = _literal(key_node, "a key")
        if not isinstance(key, str):
            raise Refused(f"the key {key!r} (line {key_node.lineno}) is not a check name in quotes")
        if key in predictions:
            raise Refused(f"the check {key!r} is predicted twice (the second on line {key_node.lineno})")
        value = _literal(value_node, f"the value of {key!r}")
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise Refused(f"the value of {key!r} (line {value_node.lineno}) is a "
                           f"{type(value).__name__}, not a number, a string or None")
        if isinstance(value, float) and not math.isfinite(value):
            raise Refused(f"the value of {key!r} (line {value_node.lineno}) is not a finite number")
        predictions[key] = value
    return predictions


def worksheet_rows(source: str) -> list[tuple[str, Value, str]]:
    """(check, the student's value, unit) per line of a worksheet cell, the unit taken from
    the comment at the end of the check's line (``None,  # B``); empty for a cell that is
    not a readable worksheet, which the page then shows as it is."""
    try:
        predictions = parse_worksheet(source)
    except Refused:
        return []
    units: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                units[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    lines = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    lines[key.value] = key.lineno
    return [(check, value, units.get(lines.get(check, 0), "")) for check, value in predictions.items()]


#: The unit of a worksheet line whose answer is one of the diagnosis's labels (``# a diagnosis label``).
LABEL_UNIT = "a diagnosis label"


def worksheet_box(source: str, *, language: str | None = None, stop: bool = False) -> str | None:
    """The worksheet as a page shows it: one row per prediction, the student's value or an
    empty box to write in (room on paper for the number and a line of why); None for a cell that
    is not a readable worksheet. ``stop``: the sheet ends with "stop here" (the student edition,
    whose print turns the page there)."""
    rows = worksheet_rows(source)
    if not rows:
        return None
    # A prediction that is a diagnosis label needs the labels to choose from: the diagnosis's own.
    labels = LABELS if any(unit == LABEL_UNIT for _, _, unit in rows) else ()
    return render("worksheet_box.html.j2", messages=Messages(language), labels=labels, stop=stop,
                  rows=[(check, None if value is None else format_value(value), unit) for check, value, unit in rows])
