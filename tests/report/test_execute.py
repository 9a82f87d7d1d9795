"""papermill runs: parameters injected, failures reported rather than raised."""

from __future__ import annotations

import nbformat

from tcplab.report.execute import execute_notebook
from tcplab.report.scores import read_scores


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream")


def test_parameters_are_injected_and_scores_read_back(built):
    result, reports = built
    beta = result["beta"]
    assert beta.execution.ok and beta.execution.parameters["rtt_ms"] == 80.0
    nb = nbformat.read(reports / "beta.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    for name in ("rtt_ms = 80.0", "rate_mbit = 3.0", 'case_id = "beta"', 'profile = "quick"'):
        assert name in injected[0].source
    assert "PARAM rtt_ms = 80.0" in _stdout(nb)
    (scores,) = read_scores(reports / "beta.ipynb")
    assert scores.case_id == "beta" and scores.backend == "delayline" and scores.passed
    assert scores.checks[0].predicted == 80.0


def test_a_raising_notebook_is_a_result_and_keeps_its_partial_output(built):
    result, reports = built
    ex = result["broken"].execution
    assert not ex.ok
    assert ex.error == "RuntimeError: fixture failure on purpose"
    assert "RuntimeError" in ex.traceback and "\x1b[" not in ex.traceback
    assert ex.failed_cell is not None
    assert "before the failure" in _stdout(nbformat.read(reports / "broken.ipynb", as_version=4))
    assert read_scores(reports / "broken.ipynb") == []


def test_a_missing_notebook_is_a_failed_result(tmp_path):
    ex = execute_notebook(tmp_path / "nope.ipynb", tmp_path / "out.ipynb", progress=False)
    assert not ex.ok and "FileNotFoundError" in ex.error and not ex.has_output
