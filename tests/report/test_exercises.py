"""A report without its exercises: the exercise cells and the answers that read them stay unrun
and say so; everything else runs."""

from __future__ import annotations


import nbformat
import pytest

from tcplab.course import available_cases, room
from tcplab.report.exercises import EXERCISE_TAG, NOT_RUN_TAG, cells_not_run, check_exercises, without_exercises
from tcplab.report.execute import execute_notebook
from tcplab.units import ParameterError
from tcplab.words import Messages

KERNELSPEC = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def _notebook(*cells: tuple[str, list[str]]) -> nbformat.NotebookNode:
    code = []
    for source, tags in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = tags
        code.append(cell)
    return nbformat.v4.new_notebook(cells=code, metadata=KERNELSPEC)


def test_an_exercise_and_what_reads_it_stay_unrun_what_the_case_binds_again_runs():
    nb = _notebook(
        ("run = 1\nlimit = 2", []),                                    # 0 the case's own
        ("ex1 = [run * k for k in range(3)]\nlimit = 5", [EXERCISE_TAG]),  # 1 an exercise
        ("best = max(ex1)", ["answer"]),                               # 2 reads ex1
        ("print(best)", ["answer"]),                                   # 3 reads what 2 bound
        ("k = 0\nprint(k, run)", []),                                  # 4 binds k itself: runs
        ("limit = 3", []),                                             # 5 binds limit again
        ("print(limit)", []),                                          # 6 reads the case's limit
        ("def f(x):\n    return x\nf(run)", []),                       # 7 binds and reads its own
    )
    assert cells_not_run(nb) == [1, 2, 3]
    tagged = without_exercises(nb)
    assert [NOT_RUN_TAG in c.metadata["tags"] for c in tagged.cells] == [False, True, True, True] + [False] * 4
    assert not any(NOT_RUN_TAG in c.metadata["tags"] for c in nb.cells), "the notebook given stays as it was"


def test_a_case_cell_that_reads_an_exercise_is_left_unrun_too():
    nb = _notebook(("x = 1", []), ("x = 2", [EXERCISE_TAG]), ("print(x)", []))
    assert cells_not_run(nb) == [1, 2]


@pytest.mark.parametrize("notebook", [room(c).notebook for c in available_cases()], ids=lambda p: p.stem[:2])
def test_in_the_course_only_exercises_and_their_answers_are_left_unrun(notebook):
    """No case's own cell (its runs, checks, plots) reads what an exercise made, so a report
    without exercises still runs and scores every case in full."""
    nb = nbformat.read(notebook, as_version=4)
    unrun = cells_not_run(nb)
    tags = [set(nb.cells[i].metadata.get("tags", [])) for i in unrun]
    assert unrun and all(t & {EXERCISE_TAG, "answer"} for t in tags), [
        (nb.cells[i].id, sorted(t)) for i, t in zip(unrun, tags)]
    assert {i for i, c in enumerate(nb.cells) if EXERCISE_TAG in c.metadata.get("tags", [])} <= set(unrun)


def test_executed_without_exercises_the_unrun_cells_say_why(tmp_path):
    nbformat.write(_notebook(("print('case ran')", []), ("ex1 = 1 / 0", [EXERCISE_TAG]),
                             ("print(ex1)", ["answer"]), ("print('after')", [])), tmp_path / "nb.ipynb")
    result = execute_notebook(tmp_path / "nb.ipynb", tmp_path / "out.ipynb", progress=False, exercises="skip",
                              language="zh")
    assert result.ok, result.error
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    streams = ["".join(o.get("text", "") for o in c.outputs) for c in out.cells]
    assert streams[0] == "case ran\n" and streams[3] == "after\n"
    note = Messages("zh")("env.cell_not_run")
    for cell in out.cells[1:3]:
        assert cell.execution_count is None
        assert [o.data["text/markdown"] for o in cell.outputs] == [note]


def test_exercises_other_than_run_or_skip_are_refused():
    assert check_exercises("skip") == "skip"
    with pytest.raises(ParameterError) as err:
        check_exercises("some")
    assert "exercises" in str(err.value) and "run, skip" in str(err.value)
