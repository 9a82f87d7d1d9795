"""tcplab release: the case notebooks students run. No worked answers, no instructor's notes and
no outputs in any of them; the worksheet kept; and each still runs, from its own folder, in
replay, with every check passing (a released notebook lost code cells, so this is the proof that
none it needs went with them)."""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest

from tcplab.course import available_cases
from tcplab.report.execute import execute_notebook
from tcplab.report.release import RELEASE_REMOVED, release
from tcplab.report.scores import read_scores
from tcplab.report.worksheet import worksheet_rows

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    return out, release(available_cases(), out)


def _tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def test_a_released_notebook_holds_no_answer_and_no_output_and_keeps_its_worksheet(released):
    out, paths = released
    assert [p.stem for p in paths] == available_cases()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        assert not any(_tags(c) & RELEASE_REMOVED for c in nb.cells), path.name
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), path.name
        assert sum("parameters" in _tags(c) for c in nb.cells) == 1, path.name
        (sheet,) = [c for c in nb.cells if "worksheet" in _tags(c)]
        rows = worksheet_rows(sheet.source)
        assert rows and all(value is None for _, value, _ in rows), path.name
        assert nb.metadata["tcplab"]["edition"] == "student"
        # Theory values the worksheet asks for, marked instructor-only inside their sentence.
        assert not any("tcplab-instructor" in c.source for c in nb.cells if c.cell_type == "markdown"), path.name
    nine = nbformat.read(out / "09-tcp-mem.ipynb", as_version=4)
    assert any("4 × 1448 bytes" in c.source for c in nine.cells) and not any("5792" in c.source for c in nine.cells)


@pytest.mark.parametrize("case", available_cases())
def test_every_released_notebook_runs_in_replay_from_its_own_folder(released, case, tmp_path):
    out, _ = released
    executed = tmp_path / f"{case}.ipynb"
    result = execute_notebook(out / f"{case}.ipynb", executed, parameters={"mode": "replay"}, cwd=out,
                              progress=False)
    assert result.ok, result.error
    (scores,) = read_scores(executed)
    assert scores.case_id == case and scores.passed, [c.name for c in scores.checks if not c.passed]


def test_a_translated_release_reads_and_writes_in_its_language(tmp_path):
    (path,) = release(["04-nagle-delayed-ack"], tmp_path, "zh")
    nb = nbformat.read(path, as_version=4)
    assert CJK.search(nb.cells[1].source)  # the title, under the cell that sets the language
    executed = tmp_path / "run.ipynb"
    assert execute_notebook(path, executed, parameters={"mode": "replay"}, cwd=tmp_path, progress=False).ok
    sentences = [o.get("data", {}).get("text/markdown", "") for c in nbformat.read(executed, as_version=4).cells
                 if c.cell_type == "code" for o in c.outputs]
    assert any(CJK.search(s) for s in sentences)  # the bound sentences its code writes


def _release(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tcplab.commands", "release", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_bad_input_is_refused_by_name_and_writes_nothing(tmp_path):
    unknown = _release("99", "-o", tmp_path / "out", cwd=tmp_path)
    assert unknown.returncode == 2 and "CASES" in unknown.stderr and "'99'" in unknown.stderr
    language = _release("01", "--language", "xx", "-o", tmp_path / "out", cwd=tmp_path)
    assert language.returncode == 2 and "--language" in language.stderr
    (tmp_path / "afile").write_text("")
    a_file = _release("01", "-o", tmp_path / "afile", cwd=tmp_path)
    assert a_file.returncode == 2 and "--output" in a_file.stderr
    assert not (tmp_path / "out").exists() and (tmp_path / "afile").read_text() == ""
    written = _release("01,04", "-o", tmp_path / "out", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["01-send-buffer.ipynb", "04-nagle-delayed-ack.ipynb"]
