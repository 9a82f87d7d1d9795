"""The gradebook per worksheet item: ``nbgrader export --exporter tcplab.report.gradebook.ItemsExport``.

nbgrader's own ``nbgrader export`` writes one row per student and assignment (score, max score,
late penalty). This exporter writes one row per student, notebook and worksheet item (``--to``,
default ``grades-items.csv``): nbgrader's score (a TA's manual override included) beside what the
hidden test found (:mod:`.autograde`): the verdict, the answer as written and as read, the class's
measured value and the notes; a "(worksheet)" row per notebook with the release, the keys that are
no item and the items edited after the run. A submission autograde could not read is listed
with the reason, every item "not graded".
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.plugins import ExportPlugin

from .autograde import MIME_TYPE

__all__ = ["ItemsExport", "ITEMS_COLUMNS"]

ITEMS_COLUMNS = ("student_id", "assignment", "notebook", "item", "score", "max_score", "verdict", "written", "read",
                 "measured", "notes")


def _outputs(nb: Any) -> dict[str, dict[str, Any]]:
    found = {}
    for cell in nb.cells:
        grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = (output.get("data") or {}).get(MIME_TYPE)
            if grade_id and data is not None:
                found[grade_id] = data if isinstance(data, dict) else json.loads(data)
    return found


def _items_of(source: Path) -> dict[str, str]:
    """Each test cell's item, by grade id, as the source notebook's hidden test names it."""
    found = {}
    try:
        nb = nbformat.read(str(source), as_version=4)
    except Exception:  # noqa: BLE001 - no source: the grade ids are all there is
        return found
    for cell in nb.cells:
        grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
        match = re.search(r"^score\((.*)\)$", cell.source, re.MULTILINE | re.DOTALL)
        if grade_id and match:
            try:
                found[grade_id] = ast.literal_eval(match.group(1))["item"]["check"]
            except (ValueError, SyntaxError, KeyError, TypeError):
                continue
    return found


def _unreadable(path: Path) -> str:
    if not path.is_file():
        return "not handed in"
    try:
        nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - what nbgrader met too, said in one line
        return f"not a notebook: {type(exc).__name__}: {exc}"[:300]
    return "autograde did not finish it (see its log)"


class ItemsExport(ExportPlugin):
    """``nbgrader export --exporter tcplab.report.autograde.ItemsExport [--to FILE]``: one row
    per student, notebook and worksheet item (nbgrader's own ``export`` gives one per student)."""

    def export(self, gradebook: Any) -> None:
        coursedir = self.parent.coursedir
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(ITEMS_COLUMNS)
        for assignment in gradebook.assignments:
            if self.assignment and assignment.name not in self.assignment:
                continue
            for student in gradebook.students:
                if self.student and student.id not in self.student:
                    continue
                for notebook in assignment.notebooks:
                    writer.writerows(self._rows(gradebook, coursedir, assignment.name, student.id, notebook))
        Path(self.to or "grades-items.csv").write_text(buffer.getvalue(), encoding="utf-8")

    @staticmethod
    def _rows(gradebook: Any, coursedir: Any, assignment: str, student: str, notebook: Any) -> list[list[Any]]:
        autograded = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / f"{notebook.name}.ipynb"
        try:
            submission = gradebook.find_submission_notebook(notebook.name, assignment, student)
            grades = {g.name: g for g in submission.grades}
        except Exception:  # noqa: BLE001 - nbgrader's MissingEntry: never collected
            grades = {}
        details = _outputs(nbformat.read(str(autograded), as_version=4)) if autograded.is_file() else {}
        why = "" if details else _unreadable(
            Path(coursedir.format_path(coursedir.submitted_directory, student, assignment)) / f"{notebook.name}.ipynb")
        names = _items_of(Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook.name}.ipynb")
        rows = []
        for cell in sorted(notebook.grade_cells, key=lambda c: (c.name != "review", len(c.name), c.name)):
            grade, data = grades.get(cell.name), details.get(cell.name, {})
            if cell.name == "review":
                notes = "; ".join(filter(None, [", ".join(data.get("problems", [])),
                                                "extra: " + ", ".join(data["extra"]) if data.get("extra") else "",
                                                "edited after the run: " + ", ".join(data["edited"]) if data.get("edited") else "",
                                                "" if not data or data.get("stamp") else "no record of when it was written"]))
                rows.append([student, assignment, notebook.name, "(worksheet)", "", "", "" if data else "not graded",
                             "", "", "", notes or why])
                continue
            verdict = data.get("verdict", "not graded")
            lost = "its scoring cell was not in the notebook handed in" if details and not data else ""
            rows.append([student, assignment, notebook.name, data.get("check", names.get(cell.name, cell.name)),
                         "" if grade is None or grade.score is None else grade.score, cell.max_score, verdict,
                         data.get("written", ""), "" if data.get("read") is None else data["read"],
                         "" if data.get("measured") is None else data["measured"],
                         "; ".join(data.get("notes", [])) or lost or why])
        return rows
