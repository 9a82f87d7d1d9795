"""A worksheet item scored against the class's measurement: the one part of grading that is physics.

nbgrader keeps the course's books (release, collect, autograde, feedback, gradebook); the hidden
tests a release writes (:mod:`.autograde`) call :func:`judge` for each item of the case's
worksheet (:mod:`.worksheet`), with the answer as the student wrote it (:mod:`.answers`) and what
the class's reference run measured (:func:`read_references`: the ``summary.json`` of ``tcplab
report``, or an executed case notebook, recorded once by the instructor; several make a spread).

The rule, per item, every item of the release whether or not the student wrote it:

* blank (None, or the line deleted): ``missing``, 0 points;
* a number against the measured number: ``right`` when ``|answer - measured|`` is at most the
  check's own tolerance (:func:`.scores.within`'s: a fraction of the *measured* value when
  relative, else in the check's unit; :func:`.scores.equals`: exact), or
  :data:`DEFAULT_TOLERANCE` of the measured value for a check without one (a bound:
  :func:`.scores.at_least`, :func:`.scores.at_most`, :func:`.scores.check`); else ``wrong``;
* a word (an item with choices): ``right`` when it is the measured one of the choices;
* an answer in a unit of another kind (``wrong_unit``), one that reads as no number
  (``unreadable``) or a word not among the choices (``not_a_choice``): 0 points, with a note that
  says how to write it.

Right scores the item's points; every other verdict 0. Keys that are not items score nothing
(:mod:`.autograde` lists them).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..units import ParameterError
from ..words import Messages
from .answers import BLANK, NOT_A_CHOICE, NUMBER, UNREADABLE, WORD, WRONG_UNIT, Written, read_answer
from .scores import SCHEMA as SCORES_SCHEMA, Check, Scores, Value, scores_in
from .templating import format_value
from .worksheet import Item

__all__ = ["DEFAULT_TOLERANCE", "VERDICTS", "Reference", "Judged", "read_measurements", "read_references",
           "judge", "margin_words"]

#: The margin for a check that has none of its own (a bound such as "at most 1.3 × line time"):
#: a prediction from theory within a quarter of what the kernel did has the right order of
#: magnitude and the right shape, which is what a bound asks a student to see.
DEFAULT_TOLERANCE = 0.25
VERDICTS = ("right", "wrong", "missing", "unreadable", "wrong_unit", "not_a_choice", "other_release", "other_case")
#: Unit slips a note points out (the answer this many times the measurement, or a fraction of it).
SLIPS = (1000.0, 1024.0, 8.0)

_SOURCE = "an executed case notebook (.ipynb) or the summary.json that tcplab report writes"


# -- the class's measurement ------------------------------------------------------------------------

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
            environment={"kernel": str(data.get("kernel") or "")},
            runs_read=int(machine.get("runs", 0)),
            disturbed=tuple(str(d) for d in machine.get("disturbed", ()))))
    return out


def read_measurements(source: str | Path) -> dict[str, list[Scores]]:
    """What a reference file holds, by case id: an executed notebook's published scores, a
    ``summary.json`` of ``tcplab report`` (every case's checks), or one scores payload."""
    path = Path(source)
    if not path.is_file():
        raise ParameterError("--reference", str(path), _SOURCE, "no such file")
    try:
        if path.suffix.lower() == ".ipynb":
            import nbformat  # only for a notebook: its schema's validation costs a second

            found = scores_in(nbformat.read(str(path), as_version=4))
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("schema") == SCORES_SCHEMA:
                found = [Scores.from_json(data)]
            elif isinstance(data, dict) and isinstance(data.get("cases"), list):
                found = _scores_of_summary(data)
            else:
                raise ParameterError("--reference", str(path), _SOURCE, "JSON, but neither a summary nor scores")
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - unreadable or damaged: bad input, named
        raise ParameterError("--reference", str(path), _SOURCE,
                             f"unreadable: {type(exc).__name__}: {exc}"[:300]) from None
    found = [s for s in found if s.scored]  # a released notebook's measurements carry no rules
    if not found:
        raise ParameterError("--reference", str(path), _SOURCE, "it holds no measured checks")
    by_case: dict[str, list[Scores]] = {}
    for scores in found:
        by_case.setdefault(scores.case_id, []).append(scores)
    return by_case


@dataclass(frozen=True)
class Reference:
    """What the class's reference run(s) measured for one check, and the check's rule."""

    measured: Value
    #: Each reference run's value (one per file given), for the spread.
    runs: tuple[Value, ...]
    predicted: Value
    unit: str
    tolerance: float | None
    relative: bool
    #: Where the values come from, in words: the mode and kernel of the reference runs.
    source: str

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "runs": list(self.runs)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Reference":
        return cls(data["measured"], tuple(data["runs"]), data.get("predicted"), str(data.get("unit", "")),
                   data.get("tolerance"), bool(data.get("relative", True)), str(data.get("source", "")))


def _centre(values: Sequence[Value]) -> Value:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers and len(numbers) == len(values):
        return statistics.median(numbers)
    return values[0] if values else None


def read_references(sources: Sequence[str | Path]) -> dict[str, dict[str, Reference]]:
    """Every case's checks in the reference files, by case and check name; a check several files
    measured has the median as its value and each file's as its runs."""
    seen: dict[str, dict[str, list[tuple[Check, Scores]]]] = {}
    for source in sources:
        for case_id, payloads in read_measurements(source).items():
            checks = {c.name: (c, s) for s in payloads for c in s.checks}
            for name, found in checks.items():
                seen.setdefault(case_id, {}).setdefault(name, []).append(found)
    out: dict[str, dict[str, Reference]] = {}
    for case_id, checks in seen.items():
        for name, found in checks.items():
            runs = tuple(c.measured for c, _ in found)
            first, scores = found[0]
            where = ", ".join(dict.fromkeys(f"{s.mode} · {s.environment.get('kernel', '')}".strip(" ·")
                                            for _, s in found))
            out.setdefault(case_id, {})[name] = Reference(
                _centre(runs), runs, first.predicted, first.unit, first.tolerance, first.relative, where)
    return out


# -- the rule ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judged:
    """One item's verdict, with what the feedback shows of it."""

    check: str
    verdict: str
    points: float
    max_points: float
    #: The answer as the student wrote it (its source text; empty where the line is absent).
    written: str = ""
    #: The answer as read: a number in the item's unit, or one of its words.
    read: Value = None
    #: The unit the student wrote, where it mattered.
    read_unit: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes)}


def _number(value: Value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):  # a theory value a notebook wrote as text ("0.22")
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _margin(ref: Reference) -> tuple[float, bool]:
    """(tolerance, relative) for a number: the check's own, else :data:`DEFAULT_TOLERANCE`."""
    return (DEFAULT_TOLERANCE, True) if ref.tolerance is None else (float(ref.tolerance), ref.relative)


def margin_words(item: Item, ref: Reference, t: Messages) -> str:
    """The margin the rule allows around the measured value, in words."""
    if item.options():
        return t("grade.tolerance_word")
    tolerance, relative = _margin(ref)
    if ref.tolerance is None:
        return t("grade.tolerance_default", percent=format_value(tolerance * 100))
    if relative:
        return t("grade.tolerance_relative", percent=format_value(tolerance * 100))
    if tolerance == 0:
        return t("grade.tolerance_exact")
    return t("grade.tolerance_absolute", tolerance=format_value(tolerance, ref.unit, t))


def _within(answer: float, ref: Reference) -> bool:
    measured = _number(ref.measured)
    if measured is None:
        return False
    tolerance, relative = _margin(ref)
    allowed = tolerance * abs(measured) if relative else tolerance
    gap = abs(answer - measured)
    # isclose: 98.1 against 109 within 10 % is right although 109 - 98.1 > 10.9 in floating point.
    return gap <= allowed or math.isclose(gap, allowed, rel_tol=1e-9)


def _slip(answer: float, ref: Reference) -> float | None:
    """The factor by which a wrong answer is off the measurement, where that is a unit slip."""
    measured = _number(ref.measured)
    if not measured or not answer:
        return None
    for factor in SLIPS:
        for ratio in (factor, 1 / factor):
            if abs(answer / measured / ratio - 1) <= DEFAULT_TOLERANCE:
                return ratio
    return None


def judge(item: Item, written: Written | None, ref: Reference, t: Messages) -> Judged:
    """``item`` scored by the module's rule: ``written`` is the student's answer (None where the
    worksheet has no line for it), ``ref`` what the class's reference measured."""
    text = written.text if written is not None else ""
    reading = read_answer(None if written is None else written.value, kind=item.kind, unit=item.unit,
                          choices=item.options())
    base = dict(check=item.check, max_points=item.points, written=text, read=reading.value, read_unit=reading.unit)
    unit = t.unit(item.unit) if item.unit else t(f"worksheet.kind.{item.kind}")
    if reading.status == BLANK:
        return Judged(verdict="missing", points=0.0, **base)
    if reading.status == WRONG_UNIT:
        return Judged(verdict="wrong_unit", points=0.0, notes=(t("grade.note.wrong_unit", written=reading.unit, unit=unit),),
                      **base)
    if reading.status == UNREADABLE:
        return Judged(verdict="unreadable", points=0.0, notes=(t("grade.note.unreadable", unit=unit),), **base)
    if reading.status == NOT_A_CHOICE:
        return Judged(verdict="not_a_choice", points=0.0,
                      notes=(t("grade.note.not_a_choice", choices=", ".join(item.options())),), **base)
    if reading.status == WORD:
        right = isinstance(ref.measured, str) and reading.value.casefold() == ref.measured.strip().casefold()
        return Judged(verdict="right" if right else "wrong", points=item.points if right else 0.0, **base)
    assert reading.status == NUMBER
    if _within(reading.value, ref):
        return Judged(verdict="right", points=item.points, **base)
    slip = _slip(reading.value, ref)
    notes = (t("grade.note.slip", factor=format_value(slip if slip >= 1 else 1 / slip),
               direction=t("grade.note.slip_more" if slip >= 1 else "grade.note.slip_less")),) if slip else ()
    return Judged(verdict="wrong", points=0.0, notes=notes, **base)
