"""tcplab inside nbgrader: the hidden tests that score a worksheet, and the per-item gradebook.

:func:`tcplab.report.release.release_course` ends each notebook with these cells
(:func:`scoring_cells`): a 0-point test that reviews the worksheet as a whole (:func:`review`:
the release it came from, keys that are no item, when it was written), then one autograder test
per item, its points nbgrader's. Each test's hidden part (stripped from what students get, put
back by ``nbgrader autograde``) holds everything it needs: the item, the class's reference
measurement, the words of its feedback in the notebook's language. At autograde
(``NBGRADER_EXECUTION=autograde``) it runs in the submission's folder, reads the submitted
notebook's worksheet cell from disk with :mod:`.answers` (nothing the student wrote is run),
shows the item's feedback (HTML, and its verdict as data, :data:`MIME_TYPE`) and returns the
points it earns, which nbgrader reads as the cell's partial credit.

Each item is scored as the worksheet stood when the first run started (:mod:`.stamps`): the
prediction written before the run. An item edited since is reported with both values.

What the tests show is left in each autograded notebook as data (:data:`MIME_TYPE`), which the
per-item gradebook (:mod:`.gradebook`) reads back.
"""

from __future__ import annotations

import html
import json
import pprint
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..words import Messages
from .answers import Written, read_value, written_answers
from .grading import Judged, Reference, judge, margin_words
from .stamps import first_stamp
from .templating import format_value, render
from .worksheet import WORKSHEET_TAG, Item, Worksheet

__all__ = ["SCHEMA", "MIME_TYPE", "scoring_cells", "score", "review"]

SCHEMA = "tcplab.autograde/1"
MIME_TYPE = "application/vnd.tcplab.grade+json"


# -- the cells a release ends with ----------------------------------------------------------------

def _test_cell(visible: str, call: str, spec: Mapping[str, Any], grade_id: str, points: float) -> Any:
    import nbformat

    source = (f"# {visible}\n### BEGIN HIDDEN TESTS\nfrom tcplab.report.autograde import {call}\n"
              f"{call}({pprint.pformat(dict(spec), width=110, sort_dicts=False)})\n### END HIDDEN TESTS")
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": points,
                                 "grade_id": grade_id, "schema_version": 3}
    cell.metadata["jupyter"] = {"source_hidden": True}
    return cell


def scoring_cells(worksheet: Worksheet, references: Mapping[str, Reference], language: str, notebook: str,
                  sources: str = "") -> list[Any]:
    """The heading, the review and one test per item that a release appends to a notebook. An item
    the reference did not measure is refused here, before anything is handed out."""
    import nbformat

    from ..units import ParameterError

    t = Messages(language)
    missing = [i.check for i in worksheet.items if references.get(i.check) is None
               or references[i.check].measured is None]
    if missing:
        raise ParameterError("--reference", sources, f"a measurement of every worksheet item of {worksheet.case_id}",
                             "it measured nothing for " + ", ".join(missing))
    base = {"schema": SCHEMA, "notebook": notebook, "case": worksheet.case_id, "language": language,
            "release": worksheet.stamp}
    cells = [nbformat.v4.new_markdown_cell(t("autograde.heading")),
             _test_cell(t("autograde.review_visible"), "review",
                        {**base, "items": [i.check for i in worksheet.items]}, "review", 0.0)]
    for number, item in enumerate(worksheet.items, 1):
        words = f"worksheet.{worksheet.case_id}.{item.words}"
        spec = {**base, "item": {"check": item.check, "points": item.points, "kind": item.kind, "unit": item.unit,
                                 "choices": list(item.options()),
                                 "formula": t(f"{words}.formula") if item.words else "",
                                 "why": t(f"{words}.why") if item.words else ""},
                "reference": references[item.check].to_json()}
        visible = t("autograde.item_visible", check=t.check_name(item.check),
                    points=t("worksheet.points", points=format_value(item.points)))
        cells.append(_test_cell(visible, "score", spec, f"item{number}", item.points))
    return cells


# -- at autograde: the submission as it was handed in ---------------------------------------------

def _submission(spec: Mapping[str, Any], folder: Path) -> tuple[dict[str, Written], dict[str, Any], list[str]]:
    """The submitted worksheet's answers (as the first run found them, where a stamp says), the
    stamp facts, and what is wrong with the submission as a whole (another case or release)."""
    # Read as JSON, not with nbformat: its schema validation would take a second per test cell.
    nb = json.loads((folder / spec["notebook"]).read_text(encoding="utf-8"))
    meta = ((nb.get("metadata") or {}).get("tcplab") or {}).get("release") or {}
    problems = []
    if meta.get("case", spec["case"]) != spec["case"]:
        problems.append("other_case")
    elif meta and any(meta.get(k) != spec["release"][k] for k in ("worksheet", "items")):
        problems.append("other_release")
    sheets = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"
              and WORKSHEET_TAG in (c.get("metadata") or {}).get("tags", [])]
    source = sheets[0].get("source", "") if sheets else ""
    answers = written_answers("".join(source) if isinstance(source, list) else source)
    stamp = first_stamp(folder, spec["case"])
    facts = {"release": meta, "stamp": stamp, "handed_in": {k: w.text for k, w in answers.items()}}
    if stamp is not None:
        # The prediction that counts is the one written before the run: none, where the first run
        # came before the worksheet cell had ever run.
        answers = {k: Written(text, read_value(text)) for k, text in (stamp.get("answers") or {}).items()}
    return answers, facts, problems


def _edited(check: str, facts: Mapping[str, Any]) -> tuple[str, str] | None:
    """(at the first run, handed in) where an item was edited after the run."""
    stamp = facts["stamp"]
    if stamp is None:
        return None
    before, after = (stamp.get("answers") or {}).get(check, ""), facts["handed_in"].get(check, "")
    return None if before.strip() == after.strip() else (before, after)


def _item(spec: Mapping[str, Any]) -> Item:
    i = spec["item"]  # the choices as released: a later tcplab's labels do not change them
    return Item(i["check"], float(i["points"]), "word" if i["choices"] else i["kind"], i["unit"], tuple(i["choices"]))


def _show(html_text: str, data: Mapping[str, Any]) -> None:
    from IPython.display import display

    display({"text/html": html_text, "text/plain": json.dumps(data, ensure_ascii=False), MIME_TYPE: dict(data)},
            raw=True)


def _judged(spec: Mapping[str, Any], folder: Path) -> tuple[Judged, dict[str, Any]]:
    t = Messages(spec["language"])
    item, ref = _item(spec), Reference.from_json(spec["reference"])
    answers, facts, problems = _submission(spec, folder)
    if problems:
        judged = Judged(item.check, problems[0], 0.0, item.points, notes=(t(f"autograde.{problems[0]}"),))
    else:
        judged = judge(item, answers.get(item.check), ref, t)
    return judged, facts


def score(spec: Mapping[str, Any], folder: str | Path | None = None) -> float:
    """One item's points, its feedback shown: what a hidden test cell calls."""
    folder = Path(folder or Path.cwd())
    t = Messages(spec["language"])
    with warnings.catch_warnings():  # anything on stderr would be read by nbgrader as a failed test
        warnings.simplefilter("ignore")
        judged, facts = _judged(spec, folder)
    item, ref = spec["item"], Reference.from_json(spec["reference"])
    edited = _edited(item["check"], facts)
    notes = list(judged.notes)
    if edited:
        notes.append(t("autograde.edited", before=edited[0] or "None", after=edited[1] or "None"))
    unit = item["unit"]
    measured = format_value(ref.measured, unit, t)
    numbers = [r for r in ref.runs if isinstance(r, (int, float)) and not isinstance(r, bool)]
    spread = (t("autograde.spread", low=format_value(min(numbers), unit, t), high=format_value(max(numbers), unit, t),
                runs=len(numbers)) if len(numbers) > 1 else t("autograde.one_run"))
    read = ("" if judged.read is None or judged.verdict in ("missing", "unreadable", "wrong_unit", "other_case", "other_release")
            else format_value(judged.read, unit, t))
    _show(render("grade_item.html.j2", messages=t, check=t.check_name(item["check"]), judged=judged, read=read,
                 measured=measured, spread=spread, source=ref.source, notes=notes,
                 theory=format_value(ref.predicted, unit, t) if ref.predicted not in (None, "") else "",
                 formula=item["formula"], why=item["why"], tolerance=margin_words(_item(spec), ref, t),
                 points=format_value(judged.points), max_points=format_value(judged.max_points)),
          {**judged.to_json(), "measured": ref.measured, "notes": notes, "edited": bool(edited)})
    return judged.points


def review(spec: Mapping[str, Any], folder: str | Path | None = None) -> None:
    """The worksheet as a whole: which release it came from, keys that are no item (scored
    nothing), items it lacks (scored 0), and when its predictions were written."""
    folder = Path(folder or Path.cwd())
    t = Messages(spec["language"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers, facts, problems = _submission(spec, folder)
    handed = facts["handed_in"]
    items = list(spec["items"])
    extra = [k for k in handed if k not in items]
    absent = [k for k in items if k not in handed]
    stamp = facts["stamp"]
    edited = [k for k in items if _edited(k, facts)]
    when = (t("autograde.stamp.none") if stamp is None else
            t("autograde.stamp.no_worksheet", at=stamp["at"]) if stamp.get("answers") is None else
            t("autograde.stamp.edited", at=stamp["at"], count=len(edited)) if edited else
            t("autograde.stamp.before", at=stamp["at"]))
    lines = [t(f"autograde.{p}") for p in problems]
    release = facts["release"]
    if not release:
        lines.append(t("autograde.no_stamp"))
    lines.append(when)
    if extra:
        lines.append(t("autograde.extra", keys=", ".join(f"“{k}”" for k in extra)))
    if absent:
        lines.append(t("autograde.absent", keys=", ".join(f"“{t.check_name(k)}”" for k in absent)))
    data = {"problems": problems, "extra": extra, "absent": absent, "edited": edited,
            "stamp": None if stamp is None else stamp["at"], "release": release}
    body = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    _show(f'<div class="tcplab-review"><b>{html.escape(t("autograde.review_title"))}</b><ul>{body}</ul></div>', data)
