"""Where a check's prediction comes from: a static reading of a case notebook's code.

A page predicts from parameters, kernel facts and theory, never from a measurement (the course's
rule; docs/contributing.md). This module reads a notebook's code cells in order, without running them,
and follows what a trial taints: the result of a run (``lab.run``, ``lab.repeat``, ``sweep.run``,
…) and every name assigned from an expression that reads a tainted name. A check whose
*prediction* (``within``'s and ``equals``' second argument, ``below_line``'s ceiling, any
``predicted=``) reads a tainted name is predicted from a measurement: :func:`measured_predictions`
lists them. The rule and bounds of a check may compare two measurements (a ratio's range); only
the "Predicted" column must come from before the run.

The reading is deliberately conservative: a name once tainted stays tainted, a function whose body
reads a trial taints its calls, a loop taints its target when it iterates over a trial. It can
report a prediction that is in fact clean; it does not miss one read from a name a run produced.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import nbformat

from ..analysis import theory
from .release import CHECK_BUILDERS

__all__ = ["MeasuredPrediction", "measured_predictions", "explain", "TRIAL_SOURCES", "TRIAL_ATTRIBUTES",
           "PREDICTION_PARAMETERS", "FILLING_METHODS", "PARAMETER_KEYS",
           "RESOLUTION_ARGUMENTS"]

#: Calls whose result is (or holds) what a run measured: ``<object>.<method>`` by the object's
#: name as the course's notebooks write it. A kernel fact read from the machine (``BufferLimits``,
#: ``lab.pick``) is not a trial. ``lab.keep`` only stores what its function computes for replay:
#: a value it keeps is a trial where that function reads one (a path, a run), a kernel fact where
#: it reads the machine before the runs (``tcp_mem.read_tcp_mem``).
TRIAL_SOURCES: dict[str, frozenset[str]] = {
    "lab": frozenset({"run", "repeat", "measure", "live", "path", "holding", "in_lab", "table", "health"}),
    "sweep": frozenset({"run", "measure"}),
}

#: Fields of a record or table that hold what was known before its run: the parameters it ran
#: with, and what theory computed from them (``lab.fidelity.path_check``'s "configured",
#: ``rooms.windows``' "predicted window B"). Reading one is reading a parameter, not the run.
PARAMETER_KEYS = frozenset({"configured"})
PARAMETER_PREFIXES = ("predicted ", "client predicted ", "server predicted ")

#: Arguments that give a measurement's resolution, not its expected value: the span a rate was
#: counted over, whose one segment more or less is the rule's tolerance, and how late the delay
#: line released a packet, which shortens that span (:func:`tcplab.analysis.theory.line_ceiling`).
#: The ceiling itself comes from the parameters.
RESOLUTION_ARGUMENTS: dict[tuple[str, str], tuple[Callable[..., Any], tuple[str, ...]]] = {
    ("theory", "line_ceiling"): (theory.line_ceiling, ("span_s", "late_s"))}

#: Attributes holding what runs measured (``lab.trials``: every trial by label).
TRIAL_ATTRIBUTES: dict[str, frozenset[str]] = {"lab": frozenset({"trials"})}

#: The parameter a check builder (:data:`.release.CHECK_BUILDERS`) takes its prediction in, where
#: it is not ``predicted``: ``below_line``'s ceiling is its prediction. ``or_explained`` has none
#: of its own (its base check, a call inside it, has).
PREDICTION_PARAMETERS: dict[str, str] = {"below_line": "ceiling"}


#: Methods that put their argument into the object they are called on (a module's function that
#: reads a trial, ``theory.bdp(...)``, does not make the module a trial).
FILLING_METHODS = frozenset({"append", "extend", "update", "insert", "add", "setdefault"})


@dataclass(frozen=True)
class MeasuredPrediction:
    """A check whose prediction reads a measurement: the cell, the check's name as written, and
    the tainted names its prediction reads."""
    cell_id: str
    check: str
    reads: tuple[str, ...]


def _code(source: str) -> str:
    # IPython's magics and shell escapes are not Python; the lines after a cell magic are.
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _argument(call: ast.Call, function: Callable[..., Any], parameter: str) -> ast.AST | None:
    """The expression ``call`` passes for ``function``'s ``parameter``, bound to its signature
    as Python binds it (by position or keyword); None where it passes none."""
    try:
        bound = inspect.signature(function).bind_partial(
            *call.args, **{k.arg: k.value for k in call.keywords if k.arg is not None})
    except TypeError:
        return None
    return bound.arguments.get(parameter)


def _resolution_arguments(call: ast.Call) -> list[ast.AST]:
    """The arguments of a ceiling's call that give the measurement's resolution (its span, its
    lateness), if any."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return []
    where = RESOLUTION_ARGUMENTS.get((func.value.id, func.attr))
    if where is None:
        return []
    function, parameters = where
    return [a for a in (_argument(call, function, p) for p in parameters) if a is not None]


def _parameter_key(key: ast.AST) -> bool:
    keys = key.elts if isinstance(key, ast.Tuple) else [key]
    return any(isinstance(k, ast.Constant) and isinstance(k.value, str)
               and (k.value in PARAMETER_KEYS or k.value.startswith(PARAMETER_PREFIXES)) for k in keys)


def _is_trial_call(node: ast.AST) -> bool:
    """A call of a trial source, or a read of the attribute holding a lab's trials."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr in TRIAL_ATTRIBUTES.get(node.value.id, frozenset())
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.attr in TRIAL_SOURCES.get(node.func.value.id, frozenset()))


def _reads(node: ast.AST | None) -> tuple[set[str], bool]:
    """The names ``node`` reads and whether it reads a trial directly (``lab.run(…)``,
    ``lab.trials``), less what it reads only for a field a record carries from before its run
    (``row["configured"]``) or for a measurement's resolution (a ceiling's span)."""
    names: set[str] = set()
    direct = False
    if node is None:
        return names, direct

    def visit(n: ast.AST) -> None:
        nonlocal direct
        if isinstance(n, ast.Subscript) and _parameter_key(n.slice):
            return  # the record's field (its row chosen by a label) holds a parameter
        if isinstance(n, ast.Call):
            resolution = _resolution_arguments(n)
            if resolution:
                for child in ast.iter_child_nodes(n):
                    if not any(child is r or (isinstance(child, ast.keyword) and child.value is r)
                               for r in resolution):
                        visit(child)
                return
        if _is_trial_call(n):
            direct = True
        if isinstance(n, ast.Name):
            names.add(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return names, direct


def _names(node: ast.AST | None) -> set[str]:
    return _reads(node)[0]


def _reads_trial(node: ast.AST | None, tainted: set[str]) -> bool:
    names, direct = _reads(node)
    return direct or bool(names & tainted)


def _targets(node: ast.AST) -> set[str]:
    """The names a statement binds or changes: assignment targets (the base name of a subscript
    or attribute), loop and ``with`` targets, a function's name."""
    found: set[str] = set()

    def base(target: ast.AST) -> None:
        while isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name):
            found.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                base(element)

    if isinstance(node, ast.Assign):
        for target in node.targets:
            base(target)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        base(node.target)
    elif isinstance(node, ast.NamedExpr):
        base(node.target)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                base(item.optional_vars)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        found.add(node.name)
    return found


def _source_of(node: ast.AST) -> ast.AST | None:
    """The expression a binding statement takes its value from."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return node.value
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return ast.Tuple(elts=[item.context_expr for item in node.items], ctx=ast.Load())
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return ast.Module(body=node.body, type_ignores=[])
    return None


def _taint(tree: ast.Module, tainted: set[str]) -> None:
    """Add to ``tainted`` what ``tree`` binds from a trial, until nothing more changes (a loop body
    may taint a name an earlier statement of the body reads)."""
    while True:
        before = len(tainted)
        for node in ast.walk(tree):
            value = _source_of(node)
            if value is not None and _reads_trial(value, tainted):
                tainted |= _targets(node)
            # A container filled with a trial (rows.append(trial), table.update(...)) holds it.
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.attr in FILLING_METHODS
                    and any(_reads_trial(arg, tainted) for arg in [*node.args, *(k.value for k in node.keywords)])):
                tainted.add(node.func.value.id)
            # A comprehension's variable over a trial, read by its element expression.
            if isinstance(node, ast.comprehension) and _reads_trial(node.iter, tainted):
                tainted |= _names(node.target)
        if len(tainted) == before:
            return


def _prediction(call: ast.Call) -> ast.AST | None:
    name = call.func.id  # type: ignore[union-attr]
    return _argument(call, CHECK_BUILDERS[name], PREDICTION_PARAMETERS.get(name, "predicted"))


def _check_name(call: ast.Call) -> str:
    return ast.unparse(call.args[0]) if call.args else "?"


def measured_predictions(notebook: nbformat.NotebookNode) -> list[MeasuredPrediction]:
    """Every check in ``notebook`` whose prediction reads what a run measured, in cell order."""
    tainted: set[str] = set()
    found: list[MeasuredPrediction] = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(_code(cell.source))
        except SyntaxError as error:
            raise ValueError(f"cell {cell.get('id')}: not Python ({error.msg}, line {error.lineno})") from error
        _taint(tree, tainted)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in CHECK_BUILDERS):
                names, direct = _reads(_prediction(node))
                if direct or names & tainted:
                    reads = sorted(names & tainted) or ["a run's result"]
                    found.append(MeasuredPrediction(cell.get("id", "?"), _check_name(node), tuple(reads)))
    return found


def explain(found: Iterable[MeasuredPrediction]) -> str:
    """One line per check, for a test's or a contributor's message."""
    return "\n".join(f"cell {f.cell_id}: {f.check} predicted from {', '.join(f.reads)}" for f in found)
