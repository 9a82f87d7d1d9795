"""Students' predictions graded against what a case measured (``tcplab grade``).

A case notebook holds one code cell tagged :data:`WORKSHEET_TAG` in which the student writes,
before running the case, what they expect each of its scored checks to measure::

    predictions = {
        "getsockopt after SO_SNDBUF 16KB": 32768,       # B
        "16KB bbr: burst spacing": 30,  # ms
        "bottleneck": "receiver window",
        "unset: transfer time vs line rate + slow start": None,  # not answered
    }

The cell is read with :mod:`ast` and never run: a value that is not a literal (a call, a name,
arithmetic) is refused, so a worksheet cannot execute anything on the grader's machine. Keys are
names of checks the case publishes (:mod:`.scores`); values are numbers, strings or booleans,
or None for "not answered".

The measured values come from the scores the case published: in the student's notebook itself
when it was executed (live or in replay), else from another executed notebook of the case or
from a ``summary.json`` of ``tcplab report``, matched by ``case_id``.

The grading rule, for each key of ``predictions``:

* not the name of a check the case published: ``unknown`` (listed, not scored);
* the check measured nothing (null): ``not_measured`` (not scored), whatever was predicted;
* None, or a blank string: ``missing``, scored 0;
* a number against a measured number: ``right`` when ``|predicted - measured|`` is at most the
  check's own tolerance (:func:`.scores.within`'s: a fraction of the *measured* value when
  relative, else in the check's unit; :func:`.scores.equals`: exact), or
  :data:`DEFAULT_TOLERANCE` of the measured value for a check without one (a bound:
  :func:`.scores.at_least`, :func:`.scores.at_most`, :func:`.scores.check`); else ``wrong``;
* a string against a measured string: ``right`` when equal ignoring case and surrounding
  spaces; a boolean against a measured boolean: ``right`` when equal; any other pairing (a word
  for a number) is ``wrong``.

Score = right / scored, where scored = right + wrong + missing (None when nothing is scored).

A grade as JSON (``schema`` = :data:`SCHEMA`)::

    {"schema": "tcplab.grade/1", "notebook": str, "case_id": str, "student": str,
     "title": str, "measured_from": str, "disturbed": [str, ...],
     "score": number|null, "n_right": int, "n_scored": int,
     "items": [{"check": str, "unit": str, "predicted": number|str|bool|null,
                "measured": number|str|bool|null, "tolerance": str,
                "verdict": "right"|"wrong"|"missing"|"unknown"|"not_measured",
                "note": str}, ...]}

``measured_from``: the file the measured values came from (``notebook`` itself when it was
executed); ``disturbed``: why the machine disturbed runs behind them (then they may be its
load's, not the path's); ``tolerance``: the margin used, in words.
"""

from __future__ import annotations

import ast
import csv
import difflib
import io
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import nbformat

from ..files import write_atomically
from ..units import ParameterError
from ..words import Messages
from .scores import SCHEMA as SCORES_SCHEMA, Check, Scores, Value, scores_in
from .templating import format_value, render
from .worksheet import WORKSHEET_TAG, Refused, parse_worksheet

__all__ = [
    "WORKSHEET_TAG", "SCHEMA", "DEFAULT_TOLERANCE", "VERDICTS", "SCORED", "Item", "Grade",
    "read_predictions", "case_id_of", "student_of", "read_notebook", "read_measurements",
    "grade", "grade_notebooks", "grade_page", "summary_line", "write_grade", "write_table", "TABLE_NAME",
]

SCHEMA = "tcplab.grade/1"
#: The margin for a check that has none of its own (a bound such as "at most 1.3 × line time"):
#: a prediction from theory within a quarter of what the kernel did has the right order of
#: magnitude and the right shape, which is what a bound asks a student to see.
DEFAULT_TOLERANCE = 0.25
VERDICTS = ("right", "wrong", "missing", "unknown", "not_measured")
#: Verdicts that count in the score; the others are listed only.
SCORED = ("right", "wrong", "missing")
#: The table of every notebook graded in one call.
TABLE_NAME = "grades.csv"
TABLE_COLUMNS = ("student", "notebook", "case_id", "check", "unit", "predicted", "measured",
                 "tolerance", "verdict")

_NOTEBOOK = "NOTEBOOK"
_WORKSHEET = ('one code cell tagged "worksheet" holding only predictions = {"check name": '
              'number, string or None, ...}')
_SOURCE = "an executed case notebook (.ipynb) or the summary.json that tcplab report writes"


@dataclass(frozen=True)
class Item:
    """One prediction and its verdict."""

    check: str
    unit: str
    predicted: Value
    measured: Value
    #: The margin used, in words (empty for an unknown check).
    tolerance: str
    verdict: str
    #: Why an unknown check is unknown (and the nearest name), else empty.
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Grade:
    """One student's worksheet graded against one case's measurement."""

    notebook: str
    case_id: str
    student: str
    items: tuple[Item, ...]
    title: str = ""
    #: The file the measured values came from: ``notebook`` itself, or the --scores file.
    measured_from: str = ""
    disturbed: tuple[str, ...] = ()

    def count(self, verdict: str) -> int:
        return sum(1 for item in self.items if item.verdict == verdict)

    @property
    def n_right(self) -> int:
        return self.count("right")

    @property
    def n_scored(self) -> int:
        return sum(self.count(v) for v in SCORED)

    @property
    def score(self) -> float | None:
        """right / scored; None when nothing was scored (no fraction to give)."""
        return self.n_right / self.n_scored if self.n_scored else None

    @property
    def stem(self) -> str:
        """The name its files take: the notebook's file name without ``.ipynb``."""
        return Path(self.notebook).stem

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "notebook": self.notebook, "case_id": self.case_id,
                "student": self.student, "title": self.title,
                "measured_from": self.measured_from, "disturbed": list(self.disturbed),
                "score": self.score, "n_right": self.n_right, "n_scored": self.n_scored,
                "items": [item.to_json() for item in self.items]}


# -- reading a notebook, never running it ------------------------------------------------------

def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path``; anything that is not one is bad input naming it."""
    path = Path(path)
    accepted = "a case notebook (.ipynb) with a worksheet cell"
    if not path.is_file():
        raise ParameterError(_NOTEBOOK, str(path), accepted, "no such file")
    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - JSON, schema or encoding: all "not a notebook"
        raise ParameterError(_NOTEBOOK, str(path), accepted,
                             f"not a notebook: {type(exc).__name__}: {exc}"[:300]) from None


def read_predictions(nb: nbformat.NotebookNode, *, path: str = "notebook") -> dict[str, Value]:
    """The student's predictions: the dict the one cell tagged ``worksheet`` assigns.

    Nothing in the notebook is executed. A notebook without exactly one worksheet cell, or one
    whose cell is anything but ``predictions = {literal: literal, ...}``, is a
    :class:`ParameterError` naming ``path`` and the cell (counted from 1, as the notebook shows
    them top to bottom).
    """
    cells = [(number, cell) for number, cell in enumerate(nb.cells, 1)
             if WORKSHEET_TAG in (cell.get("metadata", {}).get("tags") or [])]
    if len(cells) != 1:
        why = ("no cell is tagged worksheet" if not cells else
               f"{len(cells)} cells are tagged worksheet: " + ", ".join(f"cell {n}" for n, _ in cells))
        raise ParameterError(_NOTEBOOK, path, _WORKSHEET, why)
    number, cell = cells[0]
    if cell.get("cell_type") != "code":
        raise ParameterError(_NOTEBOOK, path, _WORKSHEET,
                             f"its worksheet cell (cell {number}) is a {cell.get('cell_type')} cell")
    try:
        return parse_worksheet(cell.get("source", ""))
    except Refused as exc:
        raise ParameterError(_NOTEBOOK, path, _WORKSHEET, f"its worksheet cell (cell {number}): {exc}") from None


def case_id_of(nb: nbformat.NotebookNode) -> str | None:
    """The ``case_id = "..."`` of the notebook's parameters cell (papermill's injected one
    wins), read with :mod:`ast`; None when no such cell sets one."""
    found = None
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags") or []
        if cell.get("cell_type") != "code" or not {"parameters", "injected-parameters"} & set(tags):
            continue
        try:
            tree = ast.parse(cell.get("source", ""))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a broken parameters cell names no case; the caller says so when it needs one
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "case_id"
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                    and node.value.value.strip()):
                found = node.value.value.strip()
    return found


def student_of(nb: nbformat.NotebookNode, path: str | Path) -> str:
    """Who the worksheet is by: notebook metadata ``tcplab.student`` when set (a course
    platform can stamp it), else the notebook's file name."""
    meta = nb.get("metadata", {}).get("tcplab") or {}
    name = meta.get("student") if isinstance(meta, Mapping) else None
    return name.strip() if isinstance(name, str) and name.strip() else Path(path).stem


# -- where the measured values come from ------------------------------------------------------

def _scores_of_notebook(nb: nbformat.NotebookNode, name: str, path: str, accepted: str) -> list[Scores]:
    try:
        return scores_in(nb)
    except (ValueError, KeyError, TypeError) as exc:
        raise ParameterError(name, path, accepted,
                             f"its scores output is damaged: {type(exc).__name__}: {exc}"[:300]) from None


def _scores_of_summary(data: Mapping[str, Any]) -> list[Scores]:
    """A ``summary.json``'s cases as scores (those that measured something)."""
    out = []
    for case in data["cases"]:
        if not case.get("checks"):
            continue  # a case that did not run has nothing to grade against
        machine = case.get("machine") or {}
        out.append(Scores(
            case_id=str(case["case_id"]), title=str(case.get("title") or case["case_id"]),
            backend=str(data.get("backend") or ""), mode=str(data.get("mode") or ""),
            checks=tuple(Check.from_json(c) for c in case["checks"]),
            runs_read=int(machine.get("runs", 0)),
            disturbed=tuple(str(d) for d in machine.get("disturbed", ()))))
    return out


def read_measurements(source: str | Path) -> dict[str, list[Scores]]:
    """What ``--scores`` holds, by case id: an executed notebook's published scores, a
    ``summary.json`` of ``tcplab report`` (every case's checks), or one scores payload."""
    path = Path(source)
    if not path.is_file():
        raise ParameterError("--scores", str(path), _SOURCE, "no such file")
    try:
        if path.suffix.lower() == ".ipynb":
            found = _scores_of_notebook(nbformat.read(str(path), as_version=4), "--scores", str(path), _SOURCE)
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("schema") == SCORES_SCHEMA:
                found = [Scores.from_json(data)]
            elif isinstance(data, dict) and isinstance(data.get("cases"), list):
                found = _scores_of_summary(data)
            else:
                raise ParameterError("--scores", str(path), _SOURCE, "JSON, but neither a summary nor scores")
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - unreadable or damaged: bad input, named
        raise ParameterError("--scores", str(path), _SOURCE,
                             f"unreadable: {type(exc).__name__}: {exc}"[:300]) from None
    if not found:
        raise ParameterError("--scores", str(path), _SOURCE, "it holds no measured checks")
    by_case: dict[str, list[Scores]] = {}
    for scores in found:
        by_case.setdefault(scores.case_id, []).append(scores)
    return by_case


# -- the rule ---------------------------------------------------------------------------------

def _number(value: Value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _margin(check: Check) -> tuple[float, bool]:
    """(tolerance, relative) for a number: the check's own, else :data:`DEFAULT_TOLERANCE`."""
    return (DEFAULT_TOLERANCE, True) if check.tolerance is None else (check.tolerance, check.relative)


def _margin_words(check: Check, t: Messages) -> str:
    tolerance, relative = _margin(check)
    if check.tolerance is None:
        return t("grade.tolerance_default", percent=format_value(tolerance * 100))
    if relative:
        return t("grade.tolerance_relative", percent=format_value(tolerance * 100))
    if tolerance == 0:
        return t("grade.tolerance_exact")
    return t("grade.tolerance_absolute", tolerance=format_value(tolerance, check.unit))


def _judge(name: str, predicted: Value, check: Check | None, checks: Mapping[str, Check],
           case_id: str, t: Messages) -> Item:
    """One prediction's verdict. "Not measured" comes before "missing": a check that measured
    nothing is no fault of the student's, so it is never scored."""
    if check is None:
        closest = difflib.get_close_matches(name, list(checks), n=1, cutoff=0.6)
        note = t("grade.unknown_note", case_id=case_id, count=len(checks))
        if closest:
            note += " " + t("grade.unknown_closest", closest=closest[0])
        return Item(name, "", predicted, None, "", "unknown", note)
    measured = check.measured
    # The margin in words follows what is compared: the measured value, or the prediction
    # where nothing was measured.
    shown = predicted if measured is None else measured
    if isinstance(shown, str):
        margin = t("grade.tolerance_word")
    elif isinstance(shown, bool):
        margin = t("grade.tolerance_exact")
    else:
        margin = _margin_words(check, t)
    item = dict(check=name, unit=check.unit, predicted=predicted, measured=measured, tolerance=margin)
    if measured is None:
        return Item(**item, verdict="not_measured")
    if predicted is None or isinstance(predicted, str) and not predicted.strip():
        return Item(**item, verdict="missing")
    return Item(**item, verdict="right" if _matches(predicted, check) else "wrong")


def _matches(predicted: Value, check: Check) -> bool:
    """Whether a given prediction is right by the rule (the check measured something)."""
    measured = check.measured
    if isinstance(measured, str):
        return isinstance(predicted, str) and predicted.strip().casefold() == measured.strip().casefold()
    if isinstance(measured, bool):
        return isinstance(predicted, bool) and predicted == measured
    p, m = _number(predicted), _number(measured)
    if p is None or m is None:
        return False
    tolerance, relative = _margin(check)
    allowed = tolerance * abs(m) if relative else tolerance
    gap = abs(p - m)
    # isclose: 98.1 against 109 within 10 % is right although 109 - 98.1 > 10.9 in floating point.
    return gap <= allowed or math.isclose(gap, allowed, rel_tol=1e-9)


def grade(predictions: Mapping[str, Value], scores: Scores | Iterable[Scores], *, notebook: str = "",
          student: str = "", measured_from: str = "", language: str | None = None) -> Grade:
    """Each prediction judged by the module's rule against the checks in ``scores`` (several
    payloads of one case are one set of checks; a later check of the same name wins)."""
    t = Messages(language)
    payloads = [scores] if isinstance(scores, Scores) else list(scores)
    checks: dict[str, Check] = {}
    for payload in payloads:
        checks.update((c.name, c) for c in payload.checks)
    case_id = payloads[0].case_id if payloads else ""
    title = next((p.title for p in payloads if p.title), case_id)
    items = tuple(_judge(name, value, checks.get(name), checks, case_id, t) for name, value in predictions.items())
    return Grade(notebook=notebook, case_id=case_id, student=student or Path(notebook).stem, items=items,
                 title=title, measured_from=measured_from,
                 disturbed=tuple(d for p in payloads for d in p.disturbed))


def grade_notebooks(paths: Sequence[str | Path], *, scores: str | Path | None = None,
                    language: str | None = None) -> list[Grade]:
    """Every notebook's worksheet graded, or a :class:`ParameterError` before anything is
    written: a notebook that is not one, has no readable worksheet, or no measurement. The
    measurement is the case of ``scores`` with the notebook's case id when ``scores`` is given
    (the teacher's run), else the notebook's own scores output (the student's run)."""
    measurements = read_measurements(scores) if scores is not None else None
    grades, stems = [], {}
    for path in map(str, paths):
        nb = read_notebook(path)
        predictions = read_predictions(nb, path=path)
        # The teacher's --scores wins: a notebook's own scores output is the student's to edit.
        own = _scores_of_notebook(nb, _NOTEBOOK, path, "a notebook whose scores output tcplab wrote")
        if measurements is not None or not own:
            found, origin = _measured_elsewhere(nb, path, measurements, scores), str(scores)
        else:
            found, origin = own, path
        result = grade(predictions, found, notebook=path, student=student_of(nb, path),
                       measured_from=origin, language=language)
        if result.stem in stems:
            raise ParameterError(_NOTEBOOK, path, "notebooks with distinct file names (each grade is named after its notebook)",
                                 f"{stems[result.stem]} has the same name")
        stems[result.stem] = path
        grades.append(result)
    return grades


def _measured_elsewhere(nb: nbformat.NotebookNode, path: str, measurements: dict[str, list[Scores]] | None,
                        source: str | Path | None) -> list[Scores]:
    """The ``--scores`` measurement of the notebook's case; says how to get one when missing."""
    how = ("an executed notebook (run it, live or in replay: Run All in JupyterLab, or tcplab report), "
           "or --scores with an executed notebook or summary.json of its case")
    if measurements is None:
        raise ParameterError(_NOTEBOOK, path, how, "it holds no measurement (no scores output) and no --scores was given")
    case_id = case_id_of(nb)
    if case_id is None:
        raise ParameterError(_NOTEBOOK, path, 'a case notebook whose parameters cell sets case_id = "..."',
                             "no case_id to find in --scores")
    if case_id not in measurements:
        raise ParameterError("--scores", str(source), f"a measurement of {case_id} (for {path})",
                             "it holds " + ", ".join(sorted(measurements)))
    return measurements[case_id]


# -- what a grade is written as ---------------------------------------------------------------

def _score_text(g: Grade, t: Messages) -> str:
    if g.score is None:
        return t("grade.score_none")
    return t("grade.score", right=g.n_right, scored=g.n_scored, percent=format_value(round(100 * g.score)))


def summary_line(g: Grade, language: str | None = None) -> str:
    """One line for the terminal."""
    t = Messages(language)
    return t("grade.line", student=g.student, case_id=g.case_id, score=_score_text(g, t),
             missing=g.count("missing"), unknown=g.count("unknown"), not_measured=g.count("not_measured"))


def grade_page(g: Grade, *, language: str | None = None) -> str:
    """A self-contained HTML page: the facts, the score, and a table of verdicts."""
    from .html import page_assets  # nbconvert's exporter comes with it: only when a page is made

    t = Messages(language)
    return render("grade.html.j2", messages=t, grade=g, score=_score_text(g, t),
                  assets=page_assets([]), language=t.language)


def write_grade(g: Grade, out_dir: str | Path, *, language: str | None = None) -> dict[str, Path]:
    """``<stem>.grade.json`` and ``<stem>.grade.html`` in ``out_dir``, each whole or not at all."""
    out_dir = Path(out_dir)
    return {
        "json": write_atomically(out_dir / f"{g.stem}.grade.json",
                                 json.dumps(g.to_json(), indent=2, ensure_ascii=False)),
        "html": write_atomically(out_dir / f"{g.stem}.grade.html", grade_page(g, language=language)),
    }


def _cell(value: Value) -> Value:
    return "" if value is None else value


def write_table(grades: Iterable[Grade], path: str | Path) -> Path:
    """One row per notebook and prediction, values as graded (not formatted), for a gradebook."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    for g in grades:
        for item in g.items:
            writer.writerow([g.student, g.notebook, g.case_id, item.check, item.unit, _cell(item.predicted),
                             _cell(item.measured), item.tolerance, item.verdict])
    return write_atomically(path, buffer.getvalue())
