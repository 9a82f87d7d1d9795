"""tcplab release: the case notebooks students run. No worked answers, no instructor's notes, no
outputs and no check's expected value, bound or tolerance in any of them; the worksheet written from
the case's worksheet.toml; and each still runs, from its own folder, in replay, measuring what the
full notebook measures from the same recorded runs (a released notebook lost code cells and its
checks' rules, so this is the proof that nothing it needs went with them)."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys

import nbformat
import pytest

from tcplab.course import available_cases, room
from tcplab.report.execute import execute_notebook
from tcplab.report.release import CHECK_BUILDERS, RELEASE_REMOVED, release
from tcplab.report.scores import read_scores
from tcplab.report.worksheet import read_worksheet, worksheet_rows

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
        worksheet = read_worksheet(room(path.stem))
        assert [check for check, _, _ in rows] == [i.check for i in worksheet.items], path.name
        assert all(value is None for _, value, _ in rows), path.name
        assert "page.record_predictions()" in nb.cells[nb.cells.index(sheet) + 1].source  # the stamp at the first run
        assert nb.metadata["tcplab"]["edition"] == "student"
        assert nb.metadata["tcplab"]["release"] == worksheet.stamp
        # Theory values the worksheet asks for, marked instructor-only inside their sentence.
        assert not any("tcplab-instructor" in c.source for c in nb.cells if c.cell_type == "markdown"), path.name
    nine = nbformat.read(out / "09-tcp-mem.ipynb", as_version=4)
    assert any("4 × 1448 bytes" in c.source for c in nine.cells) and not any("5792" in c.source for c in nine.cells)


def _rules(source: str) -> list[str]:
    """What a checks cell states besides its measurements: each check's expected value, bound,
    tolerance and own verdict, as code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CHECK_BUILDERS:
            given = inspect.signature(CHECK_BUILDERS[node.func.id]).bind(
                *node.args, **{k.arg: k.value for k in node.keywords}).arguments
            found += [ast.unparse(v) for k, v in given.items() if k not in ("name", "measured", "unit", "base", "why")]
    return found


def _states(code: str, expression: str) -> bool:
    """Whether ``code`` holds ``expression`` as a whole (``50`` is not in ``500 ms``)."""
    return re.search(r"(?<![\w.])" + re.escape(expression) + r"(?![\w.])", code) is not None


def test_a_worksheet_asks_what_its_room_defines_and_the_checks_measure():
    for case in available_cases():
        worksheet = read_worksheet(room(case))
        nb = nbformat.read(room(case).notebook, as_version=4)
        (sheet,) = [c for c in nb.cells if "worksheet" in _tags(c)]
        assert [check for check, _, _ in worksheet_rows(sheet.source)] == [i.check for i in worksheet.items], case


def test_no_expected_value_tolerance_or_rule_survives_in_any_released_case(released):
    out, _ = released
    for case in available_cases():
        source = nbformat.read(room(case).notebook, as_version=4)
        (checks,) = [c.source for c in source.cells if c.cell_type == "code" and "publish(" in c.source]
        nb = nbformat.read(out / f"{case}.ipynb", as_version=4)
        (kept,) = [c.source for c in nb.cells if c.cell_type == "code" and "publish(" in c.source]
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        called = {n.func.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not called & set(CHECK_BUILDERS) and "measurement(" in kept, case
        measured = [ast.unparse(n.args[1]) for n in ast.walk(ast.parse(kept))
                    if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "measurement"]
        # Not the expressions a measurement also uses, nor a one- or two-digit whole number: code
        # indexes with those ([0], iloc[1:]) as often as a rule bounds with them.
        rules = [r for r in _rules(checks) if r not in ("True", "False", "None") and not re.fullmatch(r"\d{1,2}", r)
                 and not any(_states(m, r) for m in measured)]
        assert rules and not [r for r in rules if _states(kept, r)], (case, [r for r in rules if _states(kept, r)])
        assert "#" not in kept, case  # no comment on a rule either


@pytest.mark.parametrize("case", available_cases())
def test_every_released_notebook_runs_in_replay_from_its_own_folder(released, replay_report, case, tmp_path):
    """It runs, and measures what the full notebook measured from the same recorded runs."""
    out, _ = released
    executed = tmp_path / f"{case}.ipynb"
    result = execute_notebook(out / f"{case}.ipynb", executed, parameters={"mode": "replay"}, cwd=out,
                              progress=False)
    assert result.ok, result.error
    (scores,) = read_scores(executed)
    assert scores.case_id == case and not scores.scored and all(c.predicted is None and not c.rule for c in scores.checks)
    full = {c["name"]: c["measured"] for s in json.loads((replay_report[1] / "summary.json").read_text())["cases"]
            if s["case_id"] == case for c in s["checks"]}
    assert {c.name: c.measured for c in scores.checks} == pytest.approx(full), case


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
    again = _release("01,04", "-o", tmp_path / "out", cwd=tmp_path)  # a release nobody touched is released anew
    assert again.returncode == 0, again.stderr
    # A student's filled worksheet is never overwritten: the release refuses, and writes nothing.
    filled = tmp_path / "out" / "04-nagle-delayed-ack.ipynb"
    nb = nbformat.read(filled, as_version=4)
    (sheet,) = [c for c in nb.cells if "worksheet" in _tags(c)]
    sheet.source = sheet.source.replace("'Nagle stall at 20ms': None", "'Nagle stall at 20ms': 60", 1)
    nbformat.write(nb, filled)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    refused = _release("01,04", "-o", tmp_path / "out", cwd=tmp_path)
    assert refused.returncode == 2 and "04-nagle-delayed-ack.ipynb" in refused.stderr, refused.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    no_reference = _release("01", "--assignment", "week1", "-o", tmp_path / "course", cwd=tmp_path)
    assert no_reference.returncode == 2 and "--reference" in no_reference.stderr and not (tmp_path / "course").exists()
