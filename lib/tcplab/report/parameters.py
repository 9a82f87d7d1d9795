"""A case's parameters where its Markdown states them, written from the run.

Static prose that names a parameter's value ("the client pauses for 5 s") marks the value as
the parameter's::

    the client pauses for <span data-param="pause_for:duration">5 s</span>

JupyterLab shows the span's text, the default's words; a rendered page shows the value the run
had (:func:`fill_notebook`), so changing ``pause_for`` changes the sentence too. The kind after
the colon says how the value is written: one formatter per kind, the house units of
:mod:`tcplab.units`. A value the prose derives from parameters (a BDP, twice the RTT) is theory,
not a parameter, and stays outside spans.
"""

from __future__ import annotations

import ast
import copy
import re
from typing import Any, Callable

from ..units import format_duration, format_rate, format_size, parse_duration, parse_rate, parse_size

__all__ = ["SPAN", "KINDS", "notebook_parameters", "written", "spans", "fill", "fill_notebook", "without_spans"]

#: One marked value: the parameter's name, its kind, and the words JupyterLab shows.
SPAN = re.compile(r'<span data-param="(?P<name>\w+):(?P<kind>\w+)">(?P<text>[^<]*)</span>')

#: How each kind of value is written: parsed as the case's parameters are, written in the
#: house units.
KINDS: dict[str, Callable[[str, Any], str]] = {
    "duration": lambda name, v: format_duration(parse_duration(name, v)),
    "size": lambda name, v: format_size(parse_size(name, v)),
    "rate": lambda name, v: format_rate(parse_rate(name, v)),
    "word": lambda name, v: str(v),
}


def notebook_parameters(nb: Any) -> dict[str, Any]:
    """The parameters a notebook ran with: its ``parameters`` cell's values, then the ones
    papermill injected (``metadata.papermill.parameters``)."""
    values: dict[str, Any] = {}
    for cell in nb.cells:
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        values[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:  # not a literal: no value a sentence could state
                        pass
    values.update((nb.metadata.get("papermill") or {}).get("parameters") or {})
    return values


def written(name: str, kind: str, value: Any) -> str:
    """``value`` of parameter ``name`` as prose writes it."""
    if kind not in KINDS:
        raise ValueError(f"{name}: the kind of a parameter in prose is one of {', '.join(KINDS)}, got {kind!r}")
    if value is None:
        raise ValueError(f"{name}: a parameter that prose states needs a value, got None")
    return KINDS[kind](name, value)


def spans(source: str) -> list[tuple[str, str, str]]:
    """Every marked value of ``source``: (name, kind, the words it shows)."""
    return [(m["name"], m["kind"], m["text"]) for m in SPAN.finditer(source)]


def fill(source: str, parameters: dict[str, Any]) -> str:
    """``source`` with each marked value written from ``parameters``, as plain text (a page
    needs no mark: nbconvert's Markdown would leave the span empty and the words beside it)."""

    def one(m: re.Match[str]) -> str:
        if m["name"] not in parameters:
            raise KeyError(f"prose states parameter {m['name']!r}, which this notebook does not have")
        return written(m["name"], m["kind"], parameters[m["name"]])

    return SPAN.sub(one, source)


def fill_notebook(nb: Any) -> Any:
    """A copy of ``nb`` whose Markdown states the parameters it ran with."""
    parameters = notebook_parameters(nb)
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown" and "data-param" in cell.source:
            cell.source = fill(cell.source, parameters)
    return nb


def without_spans(source: str) -> str:
    """``source`` without its marked values: what is left is the prose's own numbers."""
    return SPAN.sub("", source)
