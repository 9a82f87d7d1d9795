"""``tcplab grade``: students' worksheet predictions against what a case measured, without a kernel.

The notebooks are built here with nbformat, their scores output with the real
``scores_output(Scores(...))`` of checks made by ``within``, ``equals`` and ``at_most``, as a
case's last cell leaves it.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tcplab.report import CaseReport, ReportResult
from tcplab.report.context import ReportContext
from tcplab.report.grading import (DEFAULT_TOLERANCE, SCHEMA, VERDICTS, case_id_of, grade, grade_notebooks,
                                   read_predictions, student_of)
from tcplab.report.worksheet import worksheet_box, worksheet_rows
from tcplab.report.scores import Check, Scores, at_most, check, equals, scores_output, within
from tcplab.units import ParameterError
from tcplab.words import Messages, all_words

CASE = "01-send-buffer"


def _scores(case_id: str = CASE, *, disturbed: tuple[str, ...] = ()) -> Scores:
    """What the case measured; the predictions in the checks are the notebook's, not a student's."""
    return Scores(case_id, "Case 01: the send buffer", "netem", "replay", (
        equals("getsockopt after SO_SNDBUF 16KB", 32768, 32768, unit="B"),
        within("goodput vs in flight / RTT", 2.0, 1.9, 0.25, unit="MB/s"),
        within("burst spacing", 30.0, 40.0, 10.0, relative=False, unit="ms"),
        at_most("transfer time vs line rate", 4.0, 5.0, unit="s"),
        equals("bottleneck", "receiver window", "receiver window"),
        check("window scaling on", True, measured=True),
        within("rtt after loss", 20.0, float("nan"), 0.1, unit="ms"),
    ), runs_read=3 if disturbed else 0, disturbed=disturbed)


WORKSHEET = '''# Your predictions, before you run the case: a number in the unit shown, or None.
predictions = {
    "getsockopt after SO_SNDBUF 16KB": 32768,    # B
    "goodput vs in flight / RTT": 2.5,           # MB/s
    "burst spacing": 30,     # ms
    "transfer time vs line rate": None,          # s
    "bottleneck": "  Receiver WINDOW ",
    "getsockopt after SO_SNDBUF 16 KB": 32768,   # a typo: no such check
}
'''


def _notebook(path: Path, worksheet: str | None = WORKSHEET, *, scores: Scores | None = None,
              case_id: str | None = CASE, student: str | None = None) -> Path:
    """A case notebook as a student hands it in: parameters, worksheet, and (when it was
    executed) the publish cell's scores output."""
    nb = nbformat.v4.new_notebook()
    params = 'rtt = "20ms"\nmode = "auto"\n' + (f'case_id = "{case_id}"\n' if case_id else "")
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · The send buffer"),
                nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]})]
    if worksheet is not None:
        nb.cells.append(nbformat.v4.new_code_cell(worksheet, metadata={"tags": ["worksheet"]}))
    publish = nbformat.v4.new_code_cell("publish(...)")
    if scores is not None:
        publish.outputs = [nbformat.v4.new_output("display_data", data=scores_output(scores))]
    nb.cells.append(publish)
    if student:
        nb.metadata["tcplab"] = {"student": student}
    nbformat.write(nb, str(path))
    return path


def _verdicts(g) -> dict[str, str]:
    return {item.check: item.verdict for item in g.items}


# -- the rule ---------------------------------------------------------------------------------

def test_right_wrong_missing_and_unknown():
    predictions = read_predictions(nbformat.reads(_nb(WORKSHEET), as_version=4))
    g = grade(predictions, _scores(), notebook="alice.ipynb")
    assert _verdicts(g) == {
        "getsockopt after SO_SNDBUF 16KB": "right",
        "goodput vs in flight / RTT": "wrong",          # 2.5 against 1.9: 0.6 off, 25 % of 1.9 is 0.475
        "burst spacing": "right",   # 30 against 40 within ±10 ms
        "transfer time vs line rate": "missing",
        "bottleneck": "right",
        "getsockopt after SO_SNDBUF 16 KB": "unknown",
    }
    # right / (right + wrong + missing); the unknown check is listed, not scored.
    assert (g.n_right, g.n_scored, g.score) == (3, 5, 0.6)
    unknown = g.items[-1]
    assert "7 checks" in unknown.note and "getsockopt after SO_SNDBUF 16KB" in unknown.note
    assert g.student == "alice" and g.case_id == CASE and g.title.startswith("Case 01")


def _nb(worksheet: str) -> str:
    """A notebook's text whose one cell is the worksheet ``worksheet``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(worksheet, metadata={"tags": ["worksheet"]})]
    return nbformat.writes(nb)


def _one(prediction, made: Check) -> str:
    scores = Scores(CASE, "t", "netem", "live", (made,))
    (item,) = grade({made.name: prediction}, scores).items
    return item.verdict


def test_relative_tolerance_of_within_applies_to_the_measured_value():
    made = within("goodput", 2.0, 10.0, 0.1, unit="MB/s")  # the case allows 10 %
    assert made.tolerance == 0.1 and made.relative
    assert _one(9.0, made) == "right" and _one(11.0, made) == "right"  # |Δ| = 1.0 = 10 % of 10: inclusive
    assert _one(8.9, made) == "wrong" and _one(11.1, made) == "wrong"
    # Floating point does not move the edge: 109 - 98.1 is a hair above 10.9.
    assert _one(98.1, within("x", 100.0, 109.0, 0.1)) == "right"
    (item,) = grade({"goodput": 9.5}, Scores(CASE, "t", "", "", (made,))).items
    assert item.tolerance == "within ±10 % of the measured value"


def test_absolute_tolerance_of_within_is_in_the_checks_unit():
    made = within("spacing", 30.0, 40.0, 10.0, relative=False, unit="ms")
    assert (made.tolerance, made.relative) == (10.0, False)
    assert _one(30, made) == "right" and _one(50, made) == "right"
    assert _one(29.9, made) == "wrong" and _one(51, made) == "wrong"
    (item,) = grade({"spacing": 35}, Scores(CASE, "t", "", "", (made,))).items
    assert item.tolerance == "within ±10 ms of the measured value"


def test_a_bound_without_tolerance_is_graded_within_the_default_quarter():
    made = at_most("time", 3.0, 4.0, unit="s")  # measured 3 s, at most 4
    assert made.tolerance is None and DEFAULT_TOLERANCE == 0.25
    assert _one(4.0, made) == "wrong"  # the bound itself is 33 % off the measured 3 s
    assert _one(3.75, made) == "right" and _one(2.25, made) == "right"
    assert _one(3.8, made) == "wrong" and _one(2.2, made) == "wrong"
    (item,) = grade({"time": 3.1}, Scores(CASE, "t", "", "", (made,))).items
    assert "25 %" in item.tolerance and "default" in item.tolerance


def test_equals_is_exact_and_words_match_ignoring_case_and_spaces():
    made = equals("sndbuf", 32768, 32768, unit="B")
    assert (made.tolerance, made.relative) == (0.0, False)
    assert _one(32768, made) == "right" and _one(32768.0, made) == "right" and _one(32769, made) == "wrong"
    word = equals("bottleneck", "link", "Receiver window")
    assert _one(" receiver WINDOW", word) == "right"
    assert _one("receiver", word) == "wrong"
    assert _one(3, word) == "wrong"                  # a number for a word
    assert _one("32768", made) == "wrong"            # a word for a number
    flag = check("scaling on", True, measured=True)
    assert _one(True, flag) == "right" and _one(False, flag) == "wrong" and _one(1, flag) == "wrong"


def test_nothing_measured_is_not_scored_and_a_blank_answer_is_missing():
    made = within("rtt", 20.0, float("nan"), 0.1, unit="ms")
    assert made.measured is None
    g = grade({"rtt": 21.0, "sndbuf": "  "}, Scores(CASE, "t", "", "", (made, equals("sndbuf", 1, 1))))
    assert _verdicts(g) == {"rtt": "not_measured", "sndbuf": "missing"}
    assert (g.n_right, g.n_scored, g.score) == (0, 1, 0.0)
    assert grade({"rtt": None}, Scores(CASE, "t", "", "", (made,))).score is None  # nothing to score


def test_checks_carry_their_tolerance_through_json_and_old_payloads_still_read():
    s = _scores()
    assert Scores.from_json(json.loads(json.dumps(s.to_json()))) == s
    old = s.to_json()
    for c in old["checks"]:
        del c["tolerance"], c["relative"]
    read = Scores.from_json(old)
    assert all(c.tolerance is None and c.relative for c in read.checks)
    assert [c.passed for c in read.checks] == [c.passed for c in s.checks]  # verdicts unchanged


# -- reading the worksheet, never running it ---------------------------------------------------

def test_predictions_are_read_from_the_worksheet_cell_with_comments_and_signs():
    nb = nbformat.reads(_nb('"""Predictions."""\npredictions = {"a": -1.5, "b": "link", "c": None, "d": True}\n'
                            "predictions\n"), as_version=4)
    assert read_predictions(nb) == {"a": -1.5, "b": "link", "c": None, "d": True}


@pytest.mark.parametrize("source, why", [
    ('import os\npredictions = {"a": os.system("x")}', "line 1 is code"),
    ('predictions = {"a": os.system("x")}', "is code, not a literal"),
    ('predictions = {"a": 1 +}', "does not parse: line 1"),
    ('predictions = dict(a=1)', "is not a dict literal"),
    ('predictions = {"a": 1, "a": 2}', "predicted twice"),
    ('predictions = {1: 2}', "not a check name"),
    ('predictions = {"a": [1, 2]}', "a list, not a number"),
    ('predictions = {"a": 1e999}', "not a finite number"),
    ('predictions = {**other}', "unpacks another dict"),
    ('x = 1', "line 1 is code other than predictions"),
    ('# nothing yet', "assigns predictions nowhere"),
])
def test_a_worksheet_that_is_not_a_literal_dict_is_refused_naming_notebook_and_cell(source, why):
    nb = nbformat.reads(_nb(source), as_version=4)
    with pytest.raises(ParameterError) as caught:
        read_predictions(nb, path="bob.ipynb")
    said = str(caught.value)
    assert why in said and "bob.ipynb" in said and "cell 1" in said and "NOTEBOOK" in said


def test_worksheet_code_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    nb = nbformat.reads(_nb(f'predictions = {{"a": __import__("pathlib").Path({str(marker)!r}).touch()}}'),
                        as_version=4)
    with pytest.raises(ParameterError, match="is code, not a literal"):
        read_predictions(nb)
    assert not marker.exists()


def test_exactly_one_worksheet_cell():
    nb = nbformat.v4.new_notebook()
    with pytest.raises(ParameterError, match="no cell is tagged worksheet"):
        read_predictions(nb, path="x.ipynb")
    cell = nbformat.v4.new_code_cell("predictions = {}", metadata={"tags": ["worksheet"]})
    nb.cells = [cell, nbformat.v4.new_markdown_cell("# t"), cell]
    with pytest.raises(ParameterError, match="2 cells are tagged worksheet: cell 1, cell 3"):
        read_predictions(nb, path="x.ipynb")


def test_case_id_and_student_come_from_the_notebook(tmp_path):
    path = _notebook(tmp_path / "carol.ipynb", case_id="03-bdp-sweep")
    nb = nbformat.read(str(path), as_version=4)
    assert case_id_of(nb) == "03-bdp-sweep" and student_of(nb, path) == "carol"
    # papermill's injected cell comes after the parameters cell and wins.
    nb.cells.insert(2, nbformat.v4.new_code_cell('case_id = "04-nagle-delayed-ack"',
                                                 metadata={"tags": ["injected-parameters"]}))
    assert case_id_of(nb) == "04-nagle-delayed-ack"
    nb.metadata["tcplab"] = {"student": "Carol Chen"}
    assert student_of(nb, path) == "Carol Chen"


# -- where the measured values come from -------------------------------------------------------

def test_an_executed_notebook_is_graded_against_its_own_scores(tmp_path):
    path = _notebook(tmp_path / "alice.ipynb", scores=_scores())
    (g,) = grade_notebooks([path])
    assert g.measured_from == str(path) and (g.n_right, g.n_scored) == (3, 5)


def test_the_teachers_scores_win_over_the_notebooks_own(tmp_path):
    """A notebook's own scores output is the student's to edit: given --scores, the teacher's
    run is what counts."""
    path = _notebook(tmp_path / "alice.ipynb", scores=_scores())
    other = _notebook(tmp_path / "other.ipynb", worksheet=None, scores=_scores("00-path-check"))
    with pytest.raises(ParameterError, match="00-path-check"):  # alice's case is not in it
        grade_notebooks([path], scores=other)
    teacher = _notebook(tmp_path / "teacher.ipynb", worksheet=None, scores=_scores())
    (g,) = grade_notebooks([path], scores=teacher)
    assert g.measured_from == str(teacher)


def test_graded_against_another_executed_notebook(tmp_path):
    student = _notebook(tmp_path / "dave.ipynb", student="Dave D.")
    executed = _notebook(tmp_path / "executed.ipynb", worksheet=None, scores=_scores())
    (g,) = grade_notebooks([student], scores=executed)
    assert g.measured_from == str(executed) and g.student == "Dave D." and (g.n_right, g.n_scored) == (3, 5)


def _summary(tmp_path: Path, *cases: Scores) -> Path:
    """A summary.json as tcplab report writes it (ReportResult.to_json)."""
    reports = [CaseReport(case_id=s.case_id, title=s.title, status="passed", scores=[s]) for s in cases]
    reports.append(CaseReport(case_id="05-zero-window", title="did not run", status="error", error="boom"))
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(ReportResult(cases=reports, context=ReportContext(mode="replay")).to_json()))
    return path


def test_graded_against_a_summary_json_by_case_id(tmp_path):
    busy = ("cubic#2: delay line queue1: packets released 1.5 ms late",)
    summary = _summary(tmp_path, _scores("00-path-check"), _scores(disturbed=busy))
    (g,) = grade_notebooks([_notebook(tmp_path / "erin.ipynb")], scores=summary)
    assert g.case_id == CASE and (g.n_right, g.n_scored) == (3, 5) and g.disturbed == busy
    with pytest.raises(ParameterError, match=r"--scores.*holds 00-path-check, 01-send-buffer\).*"
                                             r"a measurement of 02-receive-buffer"):
        grade_notebooks([_notebook(tmp_path / "frank.ipynb", case_id="02-receive-buffer")], scores=summary)


def test_no_measurement_is_bad_input_saying_how_to_get_one(tmp_path):
    path = _notebook(tmp_path / "gina.ipynb")
    with pytest.raises(ParameterError, match="no measurement .*--scores") as caught:
        grade_notebooks([path])
    assert "gina.ipynb" in str(caught.value) and "run it" in str(caught.value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a summary"}')
    with pytest.raises(ParameterError, match="--scores.*neither a summary nor scores"):
        grade_notebooks([path], scores=bad)
    with pytest.raises(ParameterError, match="--scores.*no such file"):
        grade_notebooks([path], scores=tmp_path / "nowhere.json")
    with pytest.raises(ParameterError, match="no case_id"):
        grade_notebooks([_notebook(tmp_path / "h.ipynb", case_id=None)], scores=_summary(tmp_path, _scores()))


def test_every_grade_string_exists():
    keys = set(all_words("en"))
    source = (Path(__file__).resolve().parents[2] / "lib/tcplab/report/grading.py").read_text()
    used = set(re.findall(r"""["'](grade\.\w+)["']""", source)) | {f"grade.verdict.{v}" for v in VERDICTS}
    assert used <= keys, sorted(used - keys)
    assert Messages("en")("grade.verdict.not_measured") == "not measured"


# -- the command ------------------------------------------------------------------------------

def _tcplab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcplab.commands", "grade", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_command_writes_json_html_and_csv(tmp_path):
    alice = _notebook(tmp_path / "alice.ipynb", scores=_scores())
    bob = _notebook(tmp_path / "bob.ipynb", worksheet='predictions = {"bottleneck": "link", "rtt after loss": 20}')
    executed = _notebook(tmp_path / "executed.ipynb", worksheet=None, scores=_scores())
    out = _tcplab(alice, bob, "--scores", executed, "-o", tmp_path / "out", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    own = _tcplab(alice, "-o", tmp_path / "own", cwd=tmp_path)  # graded against its own run
    assert own.returncode == 0 and "the notebook itself" in (tmp_path / "own" / "alice.grade.html").read_text()
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"alice ({CASE}): 3 of 5 right (60 %); 1 missing, 1 unknown, 0 not measured")
    assert lines[1].startswith(f"bob ({CASE}): 0 of 1 right (0 %); 0 missing, 0 unknown, 1 not measured")
    data = json.loads((tmp_path / "out" / "alice.grade.json").read_text())
    assert data["schema"] == SCHEMA and data["case_id"] == CASE and data["student"] == "alice"
    assert (data["score"], data["n_right"], data["n_scored"]) == (0.6, 3, 5)
    assert data["items"][0] == {"check": "getsockopt after SO_SNDBUF 16KB", "unit": "B", "predicted": 32768,
                                "measured": 32768, "tolerance": "exactly the measured value", "verdict": "right",
                                "note": ""}
    html = (tmp_path / "out" / "alice.grade.html").read_text()
    assert "3 of 5 right (60 %)" in html and "32\u202f768 B" in html and 'class="verdict-wrong"' in html
    assert "unknown check" in html and str(executed) in html
    assert str(executed) in (tmp_path / "out" / "bob.grade.html").read_text()
    with open(tmp_path / "out" / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["student"], r["verdict"]) for r in rows] == [
        ("alice", "right"), ("alice", "wrong"), ("alice", "right"), ("alice", "missing"), ("alice", "right"),
        ("alice", "unknown"), ("bob", "wrong"), ("bob", "not_measured")]
    assert rows[1]["predicted"] == "2.5" and rows[1]["measured"] == "1.9" and rows[3]["predicted"] == ""


def test_command_default_folder_is_grades(tmp_path):
    _notebook(tmp_path / "alice.ipynb", scores=_scores())
    out = _tcplab("alice.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "grades").iterdir()) == ["alice.grade.html", "alice.grade.json",
                                                                       "grades.csv"]


@pytest.mark.parametrize("make, name, said", [
    (lambda d: _notebook(d / "nows.ipynb", worksheet=None, scores=_scores()), "NOTEBOOK",
     "no cell is tagged worksheet"),
    (lambda d: _notebook(d / "code.ipynb", worksheet='predictions = {"a": os.system("touch ran")}',
                         scores=_scores()), "NOTEBOOK", "is code, not a literal"),
    (lambda d: _notebook(d / "unrun.ipynb"), "NOTEBOOK", "no measurement"),
    (lambda d: (d / "notes.ipynb").write_text("not a notebook") and d / "notes.ipynb", "NOTEBOOK", "not a notebook"),
])
def test_command_refuses_bad_input_with_exit_2_and_writes_nothing(tmp_path, make, name, said):
    path = make(tmp_path)
    good = _notebook(tmp_path / "good.ipynb", scores=_scores())
    out = _tcplab(good, path, cwd=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert name in out.stderr and said in out.stderr and str(path) in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "grades").exists() and not (tmp_path / "ran").exists()


def test_command_refuses_unreadable_scores(tmp_path):
    (tmp_path / "summary.json").write_text("{not json")
    out = _tcplab(_notebook(tmp_path / "ivan.ipynb"), "--scores", tmp_path / "summary.json", cwd=tmp_path)
    assert out.returncode == 2 and "--scores" in out.stderr and "unreadable" in out.stderr, out.stderr
    assert not (tmp_path / "grades").exists()


def test_a_worksheet_is_shown_as_boxes_to_write_in():
    source = ("# predictions before the run\n"
              "predictions = {\n"
              "    'getsockopt after SO_SNDBUF 16KB': None,  # B\n"
              "    'diagnosis of split-nagle': 'nagle-delayed-ack',  # a diagnosis label\n"
              "    'goodput': 94.5,\n"
              "}\n")
    assert worksheet_rows(source) == [("getsockopt after SO_SNDBUF 16KB", None, "B"),
                                      ("diagnosis of split-nagle", "nagle-delayed-ack", "a diagnosis label"),
                                      ("goodput", 94.5, "")]
    box = worksheet_box(source)
    assert box.count("<tr>") == 4 and '<td class="tcplab-answer"></td>' in box  # header + 3 rows, one blank
    assert '<td class="tcplab-answer">94.5</td>' in box and "Your prediction" in box
    assert worksheet_box("predictions = {'a': os.system('x')}") is None  # not a worksheet: shown as it is


#: What makes a worksheet line tell its answer: a range, a bound or a verdict in the question.
#: A range, a bound, a verdict, or the model it is compared with ("… vs 65535 B / RTT").
_GIVES_AWAY = re.compile(r"\bbetween\b|\d\s*[–-]\s*\d|[≤≥<>]|\bat (?:least|most)\b|\b(?:slows|speeds up)\b|\bvs\b")


def test_no_worksheet_line_states_what_it_asks():
    """A worksheet key is the check's name, which the student reads before the run: it names the
    quantity, and the rule stays in the checks table the page shows after the reveal."""
    from tcplab.course import available_cases, room
    for case in available_cases():
        notebook = nbformat.read(room(case).notebook, as_version=4)
        sheets = [c for c in notebook.cells if "worksheet" in c.metadata.get("tags", [])]
        assert len(sheets) == 1, case
        for check_name, _, _ in worksheet_rows(sheets[0].source):
            assert not _GIVES_AWAY.search(check_name), (case, check_name)
