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


def test_the_student_edition_drops_what_only_the_instructor_may_see_inside_a_cell():
    import pandas as pd

    from tcplab.report import scores
    from tcplab.report.tables import frame_html

    v = nbformat.v4
    theory = v.new_markdown_cell('The cap is 4 × 1448<span class="tcplab-instructor"> = 5792</span> bytes.')
    table = v.new_code_cell("table")
    frame = pd.DataFrame({"variant": ["a"], "measured ms": [45.9], "predicted ms": [44.0]}).set_index("variant")
    table.outputs = [v.new_output("display_data", data={"text/html": frame_html(frame), "text/plain": "t"})]
    checks = v.new_code_cell("publish")
    result = scores.within("stall", 44.0, 45.9, tolerance=0.5, unit="ms")
    card = scores.Scores(case_id="04-x", title="x", backend="netem", mode="live", checks=(result,))
    checks.outputs = [v.new_output("display_data", data=scores.scores_output(card, language="en"))]
    said = v.new_code_cell('page.say("rounds", ...)')  # a sentence of the run, its theory marked
    said.outputs = [v.new_output("display_data", data={
        "text/markdown": 'It took 4 round trips<span class="tcplab-instructor"> (theory predicts 4)</span>.',
        "text/plain": "<Markdown>"})]
    nb = v.new_notebook(cells=[theory, table, checks, said])

    student = apply_edition(nb, "student")
    assert student.cells[0].source == "The cap is 4 × 1448 bytes."
    shown = student.cells[1].outputs[0]["data"]["text/html"]
    assert "measured ms" in shown and "45.9" in shown and "predicted" not in shown and "44" not in shown
    card_html = student.cells[2].outputs[0]["data"]["text/html"]
    assert "Measured" in card_html and "Predicted" not in card_html and "Rule" not in card_html
    assert student.cells[3].outputs[0]["data"]["text/markdown"] == "It took 4 round trips."
    # The instructor's page keeps all of it, and the notebook itself is left as it was.
    instructor = apply_edition(nb, "instructor")
    assert "theory predicts 4" in instructor.cells[3].outputs[0]["data"]["text/markdown"]
    assert "= 5792" in instructor.cells[0].source and "predicted ms" in instructor.cells[1].outputs[0]["data"]["text/html"]
    assert "Predicted" in instructor.cells[2].outputs[0]["data"]["text/html"]
    assert "= 5792" in nb.cells[0].source
