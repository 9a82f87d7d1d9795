"""Student and instructor editions from one notebook, by cell tags."""

from __future__ import annotations

import nbformat
import pytest

from tcplab.report.editions import apply_edition


def _notebook():
    v = nbformat.v4
    predicted = v.new_code_cell("print(40)", metadata={"tags": ["prediction"]})
    predicted.outputs = [v.new_output("stream", name="stdout", text="40\n")]
    noisy = v.new_code_cell("setup()", metadata={"tags": ["remove-output"]})
    noisy.outputs = [v.new_output("stream", name="stdout", text="noise\n")]
    return v.new_notebook(cells=[
        v.new_markdown_cell("# Question"),
        v.new_markdown_cell("The answer", metadata={"tags": ["answer"]}),
        predicted, noisy,
        v.new_markdown_cell("internal", metadata={"tags": ["remove-cell"]}),
    ])


def test_student_edition_drops_answers_and_prediction_outputs():
    nb = _notebook()
    student = apply_edition(nb, "student")
    sources = [c.source for c in student.cells]
    assert "The answer" not in sources and "internal" not in sources
    assert [c.outputs for c in student.cells if c.cell_type == "code"] == [[], []]
    assert len(nb.cells) == 5, "the source notebook must stay untouched"


def test_instructor_edition_keeps_answers_and_predictions():
    instructor = apply_edition(_notebook(), "instructor")
    sources = [c.source for c in instructor.cells]
    assert "The answer" in sources and "internal" not in sources
    code = [c for c in instructor.cells if c.cell_type == "code"]
    assert code[0].outputs and not code[1].outputs


def test_unknown_edition_is_refused():
    with pytest.raises(ValueError, match="edition"):
        apply_edition(_notebook(), "teacher")
