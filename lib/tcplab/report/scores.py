"""How a case notebook publishes its scored predictions, and how the pipeline reads them back.

A case's last cell calls :func:`publish` with a list of :class:`Check` objects, usually
made with :func:`within`, :func:`at_least`, :func:`at_most`, :func:`between`, :func:`equals` or
:func:`below_line` (the line-ceiling rule every measured rate obeys). That
displays one output with three representations:

* ``text/html`` and ``text/plain`` — the table a reader sees in JupyterLab and in the
  report;
* ``application/vnd.tcplab.scores+json`` (:data:`MIME_TYPE`) — the same scores as data.
  Renderers that do not know this type (JupyterLab, nbconvert) skip it, and
  :func:`read_scores` finds it in the executed notebook without re-running anything.

The JSON payload (``schema`` = :data:`SCHEMA`)::

    {"schema": "tcplab.scores/1", "case_id": str, "title": str,
     "backend": str, "mode": str, "environment": {str: str},
     "passed": bool, "n_checks": int, "n_passed": int,
     "checks": [{"name": str, "predicted": number|str|bool|null,
                 "measured": number|str|bool|null, "unit": str,
                 "rule": str, "passed": bool,
                 "tolerance": number|null, "relative": bool}, ...],
     "machine": {"runs": int, "disturbed": [str, ...]}}

``machine`` (optional): of the live runs behind the checks, how many carried a health reading
and why any of them counts as disturbed by the machine (``observe.health``).

A check's ``tolerance`` and ``relative`` are optional (same schema; payloads without them
read as ``null`` and ``true``): the margin its rule allows, so that grading a student's
prediction (:mod:`.grading`) uses the case's own margin. :func:`within` sets it (a fraction
when ``relative``, else in the check's unit), :func:`equals` sets 0 (exact); :func:`at_least`,
:func:`at_most`, :func:`between` and :func:`check` have none. It never changes a check's verdict.

Non-finite numbers are stored as ``null`` (JSON has no NaN) and such a check fails.
"""

from __future__ import annotations

import json
import math
import numbers
import platform
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from .templating import format_value, render
from ..words import FALLBACK_LANGUAGE, Messages

__all__ = [
    "MIME_TYPE", "SCHEMA", "Check", "Scores", "within", "at_least", "at_most", "below_line", "between", "equals",
    "check", "or_explained", "measurement", "publish", "scores_output", "read_scores", "scores_in", "default_environment",
]

MIME_TYPE = "application/vnd.tcplab.scores+json"
SCHEMA = "tcplab.scores/1"

Value = float | int | str | bool | None


def _plain(value: Any) -> Value:
    """A JSON-safe scalar: numpy numbers become Python ones, NaN and ±inf become None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    # numpy.bool_ is neither bool nor Integral.
    if type(value).__name__ == "bool_":
        return bool(value)
    return str(value)


def _number(value: Any) -> float | None:
    plain = _plain(value)
    if isinstance(plain, bool) or not isinstance(plain, (int, float)):
        return None
    return float(plain)


@dataclass(frozen=True)
class Check:
    """One scored assertion: what the student predicted, what the kernel did, and the verdict."""

    name: str
    predicted: Value
    measured: Value
    unit: str = ""
    rule: str = ""
    passed: bool = False
    #: The margin the rule allows (a fraction when ``relative``, else in ``unit``); None for a
    #: bound or a verdict of the notebook's own. Grading uses it; the verdict above does not.
    tolerance: float | None = None
    relative: bool = True
    #: False for a measurement shown without a rule (:func:`measurement`: a released notebook's).
    scored: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "predicted", _plain(self.predicted))
        object.__setattr__(self, "measured", _plain(self.measured))
        object.__setattr__(self, "passed", bool(self.passed))
        object.__setattr__(self, "tolerance", _number(self.tolerance))
        object.__setattr__(self, "relative", bool(self.relative))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Check":
        return cls(
            name=str(data["name"]), predicted=data.get("predicted"),
            measured=data.get("measured"), unit=str(data.get("unit", "")),
            rule=str(data.get("rule", "")), passed=bool(data.get("passed", False)),
            # Absent in payloads written before grading existed: no margin, as for a bound.
            tolerance=data.get("tolerance"), relative=bool(data.get("relative", True)),
            scored=bool(data.get("scored", True)),
        )


def within(name: str, predicted: Any, measured: Any, tolerance: float, *, unit: str = "",
           relative: bool = True, language: str | None = None) -> Check:
    """Passes when ``measured`` is within ``tolerance`` of ``predicted``.

    With ``relative`` (the default) ``tolerance`` is a fraction of the prediction
    (0.1 = ±10 %); otherwise it is in the same unit as the values.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must not be negative, got {tolerance!r}")
    t = Messages(language)
    p, m = _number(predicted), _number(measured)
    if relative:
        allowed = None if p is None else tolerance * abs(p)
        rule = t("rule.within_relative", percent=format_value(tolerance * 100.0))
    else:
        allowed = tolerance
        rule = t("rule.within_absolute", tolerance=format_value(float(tolerance), unit, t))
    passed = p is not None and m is not None and allowed is not None and abs(m - p) <= allowed
    return Check(name, predicted, measured, unit, rule, passed, tolerance=tolerance, relative=relative)


def at_least(name: str, measured: Any, minimum: Any, *, unit: str = "",
             predicted: Any = None, language: str | None = None) -> Check:
    """Passes when ``measured >= minimum``. "Predicted" shows ``predicted``, what theory expects,
    where the notebook gives it, else nothing: the bound is the rule's, not a prediction."""
    m, low = _number(measured), _number(minimum)
    if low is None:
        raise ValueError(f"minimum must be a finite number, got {minimum!r}")
    t = Messages(language)
    rule = t("rule.at_least", bound=format_value(low, unit, t))
    return Check(name, predicted, measured, unit, rule, m is not None and m >= low)


def at_most(name: str, measured: Any, maximum: Any, *, unit: str = "",
            predicted: Any = None, language: str | None = None) -> Check:
    """Passes when ``measured <= maximum``. "Predicted" shows ``predicted`` where the notebook
    gives it, else nothing (see :func:`at_least`)."""
    m, high = _number(measured), _number(maximum)
    if high is None:
        raise ValueError(f"maximum must be a finite number, got {maximum!r}")
    t = Messages(language)
    rule = t("rule.at_most", bound=format_value(high, unit, t))
    return Check(name, predicted, measured, unit, rule, m is not None and m <= high)


def below_line(name: str, measured: Any, ceiling: Any, *, unit: str = "", language: str | None = None) -> Check:
    """The line-ceiling rule: no rate a page measures exceeds its line's payload ceiling, the line
    rate × MSS / bytes on the wire per packet, from the path's parameters, with the measurement's
    own resolution (:func:`tcplab.analysis.theory.line_ceiling`), in the check's ``unit``. It is
    the check's prediction; a rate above it is not a fast path but a measurement that counts its
    time or its bytes wrongly, and the check fails saying so (``rule.line_ceiling_broken``)."""
    m, high = _number(measured), _number(ceiling)
    if high is None or high <= 0:
        raise ValueError(f"a line's payload ceiling is a rate above 0, got {ceiling!r}")
    t = Messages(language)
    passed = m is not None and m <= high
    rule = t("rule.line_ceiling" if passed or m is None else "rule.line_ceiling_broken", bound=format_value(high, unit, t))
    return Check(name, high, measured, unit, rule, passed)


def between(name: str, measured: Any, low: Any, high: Any, *, unit: str = "",
            predicted: Any = None, language: str | None = None) -> Check:
    """Passes when ``low <= measured <= high``; the range is the rule's ("between 0.6 and 0.8"),
    "Predicted" shows ``predicted`` where theory gives one (cubic's 0.7), else nothing."""
    m, lo, hi = _number(measured), _number(low), _number(high)
    if lo is None or hi is None:
        raise ValueError(f"a range needs two finite numbers, got {low!r} and {high!r}")
    t = Messages(language)
    rule = t("rule.between", low=format_value(lo, unit, t), high=format_value(hi, unit, t))
    return Check(name, predicted, measured, unit, rule, m is not None and lo <= m <= hi)


def equals(name: str, predicted: Any, measured: Any, *, unit: str = "",
           language: str | None = None) -> Check:
    """Passes when the two values are equal, e.g. a predicted bottleneck name."""
    rule = Messages(language)("rule.equals")
    p, m = _plain(predicted), _plain(measured)
    return Check(name, predicted, measured, unit, rule, p is not None and p == m,
                 tolerance=0.0, relative=False)


def check(name: str, passed: bool, *, predicted: Any = None, measured: Any = None,
          unit: str = "", rule: str = "") -> Check:
    """A check whose verdict the notebook computed itself; ``rule`` says how, for the reader."""
    return Check(name, predicted, measured, unit, rule, bool(passed))


def or_explained(base: Check, explained: bool, why: str, *, language: str | None = None) -> Check:
    """``base``, passing also where ``explained``: a second outcome that the page explains
    (``why``, in the page's words). The rule names both, so a reader sees which one held."""
    t = Messages(language)
    return replace(base, passed=base.passed or bool(explained), rule=t("rule.or", rule=base.rule, other=why))


def measurement(name: str, measured: Any, *, unit: str = "") -> Check:
    """What a run measured for the check ``name``, without what theory expects or a rule: the
    released notebook's checks (:mod:`.release` writes every check as one), scored only when the
    student hands the notebook in."""
    return Check(name, None, measured, unit, "", True, scored=False)


def default_environment() -> dict[str, str]:
    """What a reader needs to judge the numbers: the kernel that produced them."""
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class Scores:
    """Everything one :func:`publish` call said about a case."""

    case_id: str
    title: str
    backend: str
    mode: str
    checks: tuple[Check, ...]
    environment: dict[str, str] = field(default_factory=dict)
    #: Runs behind these checks that carried a health reading, and one line per disturbed one.
    runs_read: int = 0
    disturbed: tuple[str, ...] = ()

    @property
    def n_checks(self) -> int:
        return len(self.checks)

    @property
    def n_passed(self) -> int:
        return sum(1 for c in self.checks if c.passed)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def scored(self) -> bool:
        """Whether its checks carry rules: a released notebook's carry measurements only."""
        return not self.checks or any(c.scored for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "case_id": self.case_id, "title": self.title,
            "backend": self.backend, "mode": self.mode,
            "environment": dict(self.environment), "passed": self.passed,
            "n_checks": self.n_checks, "n_passed": self.n_passed,
            "checks": [c.to_json() for c in self.checks],
            "machine": {"runs": self.runs_read, "disturbed": list(self.disturbed)},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Scores":
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"unknown scores schema {schema!r}; this tcplab reads {SCHEMA!r}")
        return cls(
            case_id=str(data["case_id"]), title=str(data.get("title", data["case_id"])),
            backend=str(data.get("backend", "")), mode=str(data.get("mode", "")),
            checks=tuple(Check.from_json(c) for c in data.get("checks", [])),
            environment={str(k): str(v) for k, v in (data.get("environment") or {}).items()},
            runs_read=int((data.get("machine") or {}).get("runs", 0)),
            disturbed=tuple(str(d) for d in (data.get("machine") or {}).get("disturbed", ())),
        )


def _plain_table(scores: Scores, t: Messages) -> str:
    if not scores.scored:  # measurements only (a released notebook's): no rule, no verdict
        header = [t("scores.check"), t("scores.measured")]
        rows = [header] + [[t.check_name(c.name), format_value(c.measured, c.unit, t)] for c in scores.checks]
        summary = t("scores.measured_only", total=scores.n_checks)
    else:
        header = [t("scores.check"), t("scores.predicted"), t("scores.measured"), t("scores.rule"), t("scores.result")]
        rows = [header] + [
            [t.check_name(c.name), format_value(c.predicted, c.unit, t), format_value(c.measured, c.unit, t), c.rule,
             t("status.untrusted") if scores.disturbed else t("status.pass") if c.passed else t("status.fail")]
            for c in scores.checks
        ]
        summary = (t("scores.not_scored", total=scores.n_checks) if scores.disturbed
                   else t("scores.summary", passed=scores.n_passed, total=scores.n_checks))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join([scores.title, *lines, summary, *moved_lines(scores, t), *machine_lines(scores, t)])


def moved_lines(scores: Scores, t: Messages) -> list[str]:
    """Why some numbers come from another kernel than the lab's (paths a user namespace could
    not make ran in UML: ``environment["moved"]``, :meth:`CasePage.environment`); none else."""
    moved = scores.environment.get("moved")
    if not moved:
        return []
    # Each reason was written in English where it arose (lab.kernels), one a line; said in the
    # page's language here.
    why = t("scores.moved_separator").join(t.error_phrase(reason) for reason in moved.splitlines())
    return [t("scores.moved", kernels=t.kernels(scores.environment.get("kernel", "")), why=why)]


def machine_lines(scores: Scores, t: Messages) -> list[str]:
    """What the scores say about the machine: nothing without health readings, else whether
    any run was disturbed, and why."""
    if not scores.runs_read:
        return []
    if not scores.disturbed:
        return [t("scores.machine_calm", total=scores.runs_read)]
    return [t("scores.machine_disturbed", count=len(scores.disturbed), total=scores.runs_read), *scores.disturbed]


def _shown_title(scores: Scores, t: Messages) -> str:
    """The case's title in the page's language: its translation's, where it translates this very
    title (:func:`tcplab.i18n.translated_title`); else as published."""
    if t.language == FALLBACK_LANGUAGE:
        return scores.title
    from ..i18n import read_translation, translated_title  # i18n reads the course's folders

    try:
        return translated_title(scores.title, read_translation(scores.case_id, t.language))
    except (ValueError, OSError):
        return scores.title


def scores_output(scores: Scores, *, language: str | None = None, only: Iterable[str] | None = None) -> dict[str, Any]:
    """The MIME bundle :func:`publish` displays: table for people, JSON for the pipeline.
    ``only``: the names of the checks the table lists (the student's edition lists those its
    worksheet asked for, and says how many more the instructor's lists); the JSON keeps them all."""
    from .editions import INSTRUCTOR_CLASS  # nbconvert's, loaded only when a table is shown

    t = Messages(language)
    listed = scores.checks if only is None else tuple(c for c in scores.checks if c.name in set(only))
    shown = replace(scores, checks=listed)
    return {
        "text/html": render("scores_table.html.j2", messages=t, scores=shown, title=_shown_title(scores, t),
                            instructor_class=INSTRUCTOR_CLASS, more=len(scores.checks) - len(listed),
                            moved=moved_lines(scores, t)),
        "text/plain": _plain_table(scores, t),
        MIME_TYPE: scores.to_json(),
    }


def publish(case_id: str, title: str, checks: Iterable[Check], *, backend: str, mode: str,
            environment: Mapping[str, Any] | None = None, runs_read: int = 0,
            disturbed: Iterable[str] = (), language: str | None = None) -> None:
    """Show the case's scores table and leave the scores in the notebook for the report.

    Call it once in the case's last cell. ``environment`` defaults to
    :func:`default_environment`; pass the lab's own description when it has one.
    ``runs_read``/``disturbed``: how many runs behind the checks had a health reading, and
    one line per run the machine disturbed. Returns nothing, so that as a cell's last line it adds no second output.
    """
    checks = tuple(checks)
    for c in checks:
        if not isinstance(c, Check):
            raise TypeError(f"publish() takes Check objects, got {type(c).__name__}: {c!r}")
    env = default_environment() if environment is None else environment
    scores = Scores(case_id=str(case_id), title=str(title), backend=str(backend),
                    mode=str(mode), checks=checks,
                    environment={str(k): str(v) for k, v in env.items()},
                    runs_read=int(runs_read), disturbed=tuple(str(d) for d in disturbed))
    # Imported here so the pipeline can read scores without IPython being importable.
    from IPython.display import display

    display(scores_output(scores, language=language), raw=True)


def scores_in(nb: Any) -> list[Scores]:
    """Every scores payload in an executed notebook's outputs, in cell order."""
    found = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            if MIME_TYPE in data:
                payload = data[MIME_TYPE]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                found.append(Scores.from_json(payload))
    return found


def read_scores(executed_nb_path: str | Path) -> list[Scores]:
    """The scores an executed notebook published (empty when it published none)."""
    import nbformat  # the schema's validation costs a second: only where a notebook is read

    nb = nbformat.read(str(executed_nb_path), as_version=4)
    return scores_in(nb)
