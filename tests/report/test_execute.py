"""papermill runs: parameters injected, failures reported rather than raised."""

from __future__ import annotations

from pathlib import Path

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


def test_the_kernel_talks_over_unix_sockets_that_are_gone_afterwards(tmp_path, capfd):
    """A case's kernel is reached over Unix sockets in a private folder, never a TCP port, and
    the folder goes with the kernel; ipykernel's warning about unencrypted TCP never prints."""
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(
            "import json, ipykernel\n"
            "info = json.load(open(ipykernel.get_connection_file()))\n"
            "print(info['transport'], info['ip'])")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, tmp_path / "where.ipynb")
    ex = execute_notebook(tmp_path / "where.ipynb", tmp_path / "out.ipynb", progress=False)
    assert ex.ok, ex.error
    transport, socket_prefix = _stdout(nbformat.read(tmp_path / "out.ipynb", as_version=4)).split()
    assert transport == "ipc"
    assert len(socket_prefix) < 100
    assert not Path(socket_prefix).parent.exists()
    assert "without encryption" not in capfd.readouterr().err
