"""Grading's parts, without nbgrader or a kernel: answers read as students write them, the rule, the
class's reference, the worksheet a room defines, what a hidden test scores and shows, the stamp of
the first run, and a released checks cell. (test_class_grading.py grades a class end to end.)"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from tcplab.course import CourseError, Room, available_cases, room
from tcplab.report import autograde, stamps
from tcplab.report.answers import BLANK, NOT_A_CHOICE, NUMBER, UNREADABLE, WORD, WRONG_UNIT, read_answer, written_answers
from tcplab.report.grading import DEFAULT_TOLERANCE, VERDICTS, Reference, judge, read_measurements, read_references
from tcplab.report.release import measurements_only
from tcplab.report.scores import Scores, at_most, check, equals, measurement, scores_output, within
from tcplab.report.worksheet import Item, read_worksheet, worksheet_box, worksheet_rows, worksheet_source
from tcplab.units import ParameterError
from tcplab.words import Messages, all_words

CASE = "01-send-buffer"
EN = Messages("en")


# -- answers as students write them -----------------------------------------------------------------

@pytest.mark.parametrize("written, kind, unit, status, value", [
    ("16 KB", "size", "B", NUMBER, 16384), ("16kB", "size", "B", NUMBER, 16384), ("16384", "size", "B", NUMBER, 16384),
    (16384, "bytes", "B", NUMBER, 16384), ("2 * 16 * 1024", "bytes", "B", NUMBER, 32768),
    ("262,142", "bytes", "B", NUMBER, 262142), ("262 142", "bytes", "B", NUMBER, 262142),
    ("0.2 s", "duration", "ms", NUMBER, 200), ("200 ms", "duration", "ms", NUMBER, 200),
    ("about 0.2 s", "duration", "s", NUMBER, 0.2), ("~45ms", "duration", "ms", NUMBER, 45),
    ("2,5", "duration", "ms", NUMBER, 2.5), ("４２", "duration", "ms", NUMBER, 42), ("约42毫秒", "duration", "ms", NUMBER, 42),
    ("60 ms左右", "duration", "ms", NUMBER, 60), ("(40 + 20) / 1000 s", "duration", "ms", NUMBER, 60),
    ("5x", "times", "", NUMBER, 5), ("5 times", "times", "", NUMBER, 5), ("约5倍", "times", "", NUMBER, 5),
    ("５.５", "times", "", NUMBER, 5.5), ("4 probes", "count", "", NUMBER, 4), ("2 round trips", "count", "round trips", NUMBER, 2),
    ("12 %", "percent", "%", NUMBER, 12), ("4 KB/s", "byte_rate", "KB/s", NUMBER, 4), ("10 Mbps", "rate", "Mbit/s", NUMBER, 10),
    ("15.4 Mbit/s", "byte_rate", "MB/s", WRONG_UNIT, 15.4), ("30 KB", "duration", "ms", WRONG_UNIT, 30),
    ("32 KB B", "size", "B", UNREADABLE, "32 KB B"), ("lots", "size", "B", UNREADABLE, "lots"),
    (True, "count", "", UNREADABLE, True), (None, "size", "B", BLANK, None), ("  ", "size", "B", BLANK, None),
])
def test_an_answer_reads_as_the_quantity_its_item_asks(written, kind, unit, status, value):
    reading = read_answer(written, kind=kind, unit=unit)
    assert reading.status == status
    assert reading.value == (pytest.approx(value) if status == NUMBER else value)


def test_a_word_answer_is_one_of_the_items_choices():
    choices = ("nagle-delayed-ack", "receiver-window-limited")
    assert read_answer("Nagle + delayed ACK", kind="word", choices=choices) == read_answer("nagle_delayed_ack", kind="word", choices=choices)
    assert read_answer(" NAGLE-DELAYED-ACK ", kind="word", choices=choices).status == WORD
    assert read_answer("the network", kind="word", choices=choices).status == NOT_A_CHOICE
    assert read_answer(42, kind="word", choices=choices).status == NOT_A_CHOICE


def test_the_worksheet_is_read_line_by_line_where_it_is_no_python_and_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = ("predictions = {\n    'a': 16KB,   # B\n    'b': 0,22,\n    \"c\": ４２, # ms\n    'd': None,\n"
              "    'e': \"about 0.2 s\",  # s\n    'f': __import__('os').system('touch ran'),\n}\n")
    found = {k: (w.text, w.value) for k, w in written_answers(source).items()}
    assert found == {"a": ("16KB", "16KB"), "b": ("0,22", "0,22"), "c": ("４２", "４２"), "d": ("None", None),
                     "e": ('"about 0.2 s"', "about 0.2 s"), "f": ("__import__('os').system('touch ran')",
                                                                   "__import__('os').system('touch ran')")}
    python = written_answers("predictions = {'x': 2 * 16 * 1024, 'y': '16 KB', 'z': 2 ** 10 ** 10}\n")
    assert {k: w.value for k, w in python.items()} == {"x": 32768, "y": "16 KB", "z": "2 ** 10 ** 10"}  # no huge power
    assert read_answer(found["f"][1], kind="size", unit="B").status == UNREADABLE and not (tmp_path / "ran").exists()
    assert written_answers("x = 1\n") == {}


# -- the rule ----------------------------------------------------------------------------------------

def _ref(measured, *, tolerance=None, relative=True, unit="", predicted=None, runs=None) -> Reference:
    return Reference(measured, tuple(runs or (measured,)), predicted, unit, tolerance, relative, "replay")


def _judge(answer, ref: Reference, kind="duration", unit="ms", choices=()):
    item = Item("x", 2.0, kind, unit, choices)
    return judge(item, None if answer is ... else _written(answer), ref, EN)


def _written(value):
    text = repr(value)
    return written_answers(f"predictions = {{'x': {text}}}\n")["x"]


def test_a_number_is_right_within_the_checks_own_tolerance_of_the_measured_value():
    relative = _ref(100.0, tolerance=0.1)  # within(…, 0.1): ±10 % of the measured value
    assert [_judge(v, relative).verdict for v in (90, 110, 89.9, 110.1)] == ["right", "right", "wrong", "wrong"]
    absolute = _ref(33.8, tolerance=10.0, relative=False)  # within(…, 10, relative=False): ±10 ms
    assert [_judge(v, absolute).verdict for v in (23.8, 43.8, 23.7)] == ["right", "right", "wrong"]
    exact = _ref(32768, tolerance=0.0, relative=False)  # equals
    assert [_judge(v, exact, "bytes", "B").verdict for v in (32768, 32769, "32 KB")] == ["right", "wrong", "right"]
    bound = _ref(45.92)  # a bound: the default quarter of the measured value
    low, high = 45.92 * (1 - DEFAULT_TOLERANCE), 45.92 * (1 + DEFAULT_TOLERANCE)
    assert [_judge(v, bound).verdict for v in (low, high, low - 0.01, high + 0.01)] == ["right", "right", "wrong", "wrong"]
    assert _judge(98.1, _ref(109.0, tolerance=0.1)).verdict == "right"  # on the edge, in floating point too


def test_points_notes_and_verdicts():
    ref = _ref(45.92)
    right = _judge("0.042 s", ref)
    assert (right.verdict, right.points, right.max_points, right.read, right.read_unit) == ("right", 2.0, 2.0, pytest.approx(42), "s")
    slipped = _judge("42 s", ref)
    assert slipped.verdict == "wrong" and slipped.points == 0 and "1\u202f000 times larger" in slipped.notes[0]
    assert _judge(..., ref).verdict == "missing" and _judge(None, ref).verdict == "missing"
    kind = _judge("15 Mbit/s", ref)
    assert kind.verdict == "wrong_unit" and kind.notes == ("You wrote Mbit/s; the item asks ms: a quantity of another kind, "
                                                           "so it is not converted.",)
    assert _judge("soon", ref).verdict == "unreadable"
    word = _ref("nagle-delayed-ack", tolerance=0.0, relative=False)
    choices = ("nagle-delayed-ack", "zero-window")
    assert [_judge(a, word, "word", "", choices).verdict for a in ("Nagle + delayed ACK", "zero-window", "slow")] == [
        "right", "wrong", "not_a_choice"]
    assert set(VERDICTS) >= {"right", "wrong", "missing", "unreadable", "wrong_unit", "not_a_choice"}


# -- the class's reference -----------------------------------------------------------------------------

def _scores(measured: float = 40.0, case_id: str = CASE) -> Scores:
    return Scores(case_id, "The send buffer", "netem", "replay", (
        equals("getsockopt after SO_SNDBUF 16KB", 32768, 32768, unit="B"),
        within("16KB bbr: burst spacing", 30.0, measured, 10.0, relative=False, unit="ms"),
        at_most("transfer time vs line rate", 4.0, 5.0, unit="s"),
        check("window scaling on", True, measured=True)), environment={"kernel": "6.18 (host)"})


def test_references_from_a_summary_an_executed_notebook_and_a_scores_payload(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"mode": "replay", "kernel": "6.1 (UML)", "cases": [
        {"case_id": CASE, "title": "t", "checks": [c.to_json() for c in _scores(30.0).checks]},
        {"case_id": "02-receive-buffer", "checks": []}]}))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("publish(...)", outputs=[
        nbformat.v4.new_output("display_data", data=scores_output(_scores(40.0)))])]
    nbformat.write(nb, str(tmp_path / "ran.ipynb"))
    (tmp_path / "scores.json").write_text(json.dumps(_scores(50.0).to_json()))
    refs = read_references([summary, tmp_path / "ran.ipynb", tmp_path / "scores.json"])
    spacing = refs[CASE]["16KB bbr: burst spacing"]
    assert (spacing.measured, spacing.runs, spacing.predicted, spacing.tolerance, spacing.relative) == (40.0, (30.0, 40.0, 50.0), 30.0, 10.0, False)
    assert "replay · 6.1 (UML)" in spacing.source and "6.18 (host)" in spacing.source
    assert list(refs) == [CASE]  # a case that did not run measures nothing
    # A released notebook's measurements carry no rules to grade with.
    released = Scores(CASE, "t", "", "replay", (measurement("16KB bbr: burst spacing", 33.0, unit="ms"),))
    (tmp_path / "released.json").write_text(json.dumps(released.to_json()))
    with pytest.raises(ParameterError, match="no measured checks"):
        read_measurements(tmp_path / "released.json")


@pytest.mark.parametrize("content, said", [
    (None, "no such file"), ("{not json", "unreadable"), ('{"a": 1}', "neither a summary nor scores"),
    ('{"cases": []}', "no measured checks")])
def test_a_reference_that_is_none_is_refused_by_name(tmp_path, content, said):
    path = tmp_path / "summary.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ParameterError) as info:
        read_references([path])
    assert info.value.name == "--reference" and said in str(info.value)


def test_checks_carry_their_tolerance_and_whether_they_are_scored_through_json():
    s = Scores(CASE, "t", "", "", (*_scores().checks, measurement("rtt", 20.0, unit="ms")))
    assert Scores.from_json(json.loads(json.dumps(s.to_json()))) == s
    old = s.to_json()
    for c in old["checks"]:
        del c["tolerance"], c["relative"], c["scored"]
    read = Scores.from_json(old)
    assert all(c.tolerance is None and c.relative and c.scored for c in read.checks)
    shown = scores_output(Scores(CASE, "t", "", "replay", (measurement("rtt", 20.0, unit="ms"),)), language="en")
    assert "What this run measured" in shown["text/html"] and "Rule" not in shown["text/html"]
    assert "20 ms" in shown["text/plain"] and "passed" not in shown["text/plain"]


# -- the worksheet a room defines ------------------------------------------------------------------

def _room(tmp_path: Path, toml: str) -> Room:
    folder = tmp_path / CASE
    folder.mkdir(exist_ok=True)
    (folder / "worksheet.toml").write_text(toml)
    return Room(CASE, folder, "x.ipynb")


@pytest.mark.parametrize("toml, said", [
    ("", "version = a whole number"),
    ('version = 1\n[[items]]\ncheck = "a"\npoints = 1\nkind = "speed"\n', "kind 'speed' is not one of"),
    ('version = 1\n[[items]]\ncheck = "a"\npoints = -1\nkind = "count"\n', "points is not a number"),
    ('version = 1\n[[items]]\ncheck = "a"\npoints = 1\nkind = "word"\n', "lists its choices"),
    ('version = 1\n[[items]]\ncheck = "a"\npoints = 1\nkind = "count"\ncolour = 1\n', "unknown keys colour"),
    ('version = 1\n[[items]]\ncheck = "a"\npoints = 1\nkind = "count"\n[[items]]\ncheck = "a"\npoints = 1\nkind = "count"\n',
     "listed twice"),
])
def test_a_malformed_worksheet_says_what_is_wrong(tmp_path, toml, said):
    with pytest.raises(CourseError, match=re.escape(said)):
        read_worksheet(_room(tmp_path, toml))


def test_every_room_has_a_worksheet_whose_items_its_words_explain():
    words = all_words("en")
    for case in available_cases():
        worksheet = read_worksheet(room(case))
        assert worksheet.items and worksheet.points > 0, case
        for item in worksheet.items:
            if item.words:
                assert {f"worksheet.{case}.{item.words}.{k}" for k in ("formula", "why")} <= set(words), item
    for case in ("01-send-buffer", "04-nagle-delayed-ack", "05-zero-window"):  # the cases explain every item
        assert all(i.words for i in read_worksheet(room(case)).items), case


def test_a_renamed_item_is_another_release():
    worksheet = read_worksheet(room("04-nagle-delayed-ack"))
    renamed = type(worksheet)(worksheet.case_id, worksheet.version,
                              (Item("Nagle stall at 2ms", 1, "duration", "ms"), *worksheet.items[1:]))
    assert renamed.stamp["items"] != worksheet.stamp["items"] and renamed.stamp["case"] == worksheet.stamp["case"]
    source = worksheet_source(worksheet, "en")
    assert '"nagle-delayed-ack"' in source and "# ms · 1 point" in source  # its choices and units, listed
    assert "你的预测" in worksheet_source(worksheet, "zh")


# -- what a hidden test scores and shows ---------------------------------------------------------------

def _spec(tmp_path: Path, answers: str, *, release=None, case="04-nagle-delayed-ack", stamp=None, language="en") -> dict:
    worksheet = read_worksheet(room("04-nagle-delayed-ack"))
    source = worksheet_source(worksheet, language)
    for key, value in answers.items():
        source = source.replace(f"{key!r}: None,", f"{key!r}: {value},")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": ["worksheet"]})]
    nb.metadata["tcplab"] = {"release": release or {**worksheet.stamp, "case": case}}
    nbformat.write(nb, str(tmp_path / "04-nagle-delayed-ack.ipynb"))
    if stamp is not None:
        (tmp_path / "04-nagle-delayed-ack.stamps.jsonl").write_text(json.dumps(stamp) + "\n")
    (cell,) = [c for c in autograde.scoring_cells(worksheet, {
        i.check: _ref(v, tolerance=t, relative=False, unit=i.unit, predicted=p) for i, (v, t, p) in zip(
            worksheet.items, [(45.9, None, 42.0), (63.8, None, 60.0), ("nagle-delayed-ack", 0.0, "nagle-delayed-ack")])},
        language, "04-nagle-delayed-ack.ipynb") if (c.metadata.get("nbgrader") or {}).get("grade_id") == "item2"]
    return ast.literal_eval(re.search(r"^score\((.*)\)$", cell.source, re.MULTILINE | re.DOTALL).group(1))


def _shown(monkeypatch) -> list:
    shown = []
    monkeypatch.setattr(autograde, "_show", lambda html, data: shown.append((html, data)))
    return shown


def test_a_hidden_test_scores_its_item_as_written_before_the_run(tmp_path, monkeypatch):
    shown = _shown(monkeypatch)
    spec = _spec(tmp_path, {"Nagle stall at 20ms": "63.8"},
                 stamp={"at": "2026-11-28T09:00:00+00:00", "epoch": 1.0, "answers": {"Nagle stall at 20ms": "40"}})
    assert autograde.score(spec, tmp_path) == 0.0  # 40 before the run, out of 47.85–79.75
    html, data = shown[0]
    assert data["verdict"] == "wrong" and data["edited"] and "it was 40 then and 63.8 when handed in" in html
    assert "60 ms: T + ato" in html and "63.8 ms" in html and "within ±25 %" in html and "does not shrink" in html
    unstamped = tmp_path / "unstamped"
    unstamped.mkdir()
    spec = _spec(unstamped, {"Nagle stall at 20ms": "'60 ms'"})  # no stamp: scored as handed in, and said so
    assert autograde.score(spec, unstamped) == 1.0
    autograde.review({**spec, "items": [spec["item"]["check"], "x"]}, unstamped)
    assert "No record of when these predictions were written" in shown[-1][0] and shown[-1][1]["absent"] == ["x"]


def test_nothing_counts_as_predicted_when_the_first_run_came_before_the_worksheet(tmp_path, monkeypatch):
    shown = _shown(monkeypatch)
    spec = _spec(tmp_path, {"Nagle stall at 20ms": "60"}, stamp={"at": "2026-11-28T09:00:00+00:00", "epoch": 1.0, "answers": None})
    assert autograde.score(spec, tmp_path) == 0.0
    assert shown[0][1]["verdict"] == "missing" and "it was None then and 60 when handed in" in shown[0][0]


def test_a_hidden_test_scores_nothing_of_another_case_or_release(tmp_path, monkeypatch):
    shown = _shown(monkeypatch)
    assert autograde.score(_spec(tmp_path, {"Nagle stall at 20ms": "60"}, case="01-send-buffer"), tmp_path) == 0.0
    assert shown[-1][1]["verdict"] == "other_case"
    old = {"case": "04-nagle-delayed-ack", "worksheet": 0, "items": "000000000000"}
    assert autograde.score(_spec(tmp_path, {"Nagle stall at 20ms": "60"}, release=old), tmp_path) == 0.0
    assert shown[-1][1]["verdict"] == "other_release"


def test_a_hidden_test_speaks_the_notebooks_language(tmp_path, monkeypatch):
    shown = _shown(monkeypatch)
    assert autograde.score(_spec(tmp_path, {"Nagle stall at 20ms": "'６０ ms左右'"}, language="zh"), tmp_path) == 1.0
    assert "你的答案" in shown[0][0] and "正确" in shown[0][0] and "延迟 ACK 定时器" in shown[0][0]


def test_a_reference_that_lacks_an_item_is_refused_before_anything_is_released():
    worksheet = read_worksheet(room("04-nagle-delayed-ack"))
    with pytest.raises(ParameterError, match="measured nothing for diagnosis of split-nagle"):
        autograde.scoring_cells(worksheet, {i.check: _ref(1.0) for i in worksheet.items[:2]}, "en", "x.ipynb")


def test_every_grading_string_exists_in_english_and_chinese():
    lib = Path(__file__).resolve().parents[2] / "lib" / "tcplab" / "report"
    code = "".join((lib / f).read_text() for f in ("grading.py", "autograde.py", "worksheet.py", "page.py", "release.py"))
    code += (lib / "templates" / "grade_item.html.j2").read_text()
    used = set(re.findall(r"""["']((?:grade|autograde|worksheet|stamps|release)\.[\w.]+)["']""", code))
    used |= {f"grade.verdict.{v}" for v in VERDICTS} | {f"worksheet.kind.{k}" for k in ("size", "duration", "label", "word")}
    used = {k for k in used if not k.endswith((".", ".toml"))}
    for language in ("en", "zh"):
        assert used <= set(all_words(language)), (language, sorted(used - set(all_words(language))))


# -- the stamp of the first run -----------------------------------------------------------------------

def test_the_first_stamp_is_the_one_that_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(stamps, "last_worksheet", lambda: {"a": "1"})
    first = stamps.record(CASE, tmp_path)
    monkeypatch.setattr(stamps, "last_worksheet", lambda: {"a": "2"})
    stamps.record(CASE, tmp_path)
    with stamps.stamps_path(tmp_path, CASE).open("a") as f:
        f.write("not json\n")
    assert stamps.first_stamp(tmp_path, CASE)["answers"] == {"a": "1"} == first["answers"]
    assert stamps.first_stamp(tmp_path, "00-path-check") is None


# -- a released checks cell --------------------------------------------------------------------------

def test_a_released_checks_cell_keeps_what_was_measured_and_nothing_of_the_rules():
    source = ("rtt_s = 0.02\nbound = 4 * rtt_s  # the model's ceiling\nspacing = measure()\n"
              "checks = [\n    within('spacing', 1.5 * rtt_s, spacing * 1000, tolerance=0.5, relative=False, unit='ms'),\n"
              "    at_least('slower', slow / base, bound),\n"
              "    or_explained(equals('label', 'nagle-delayed-ack', run.label), run.odd, 'why'),\n"
              "    *([check('traced', a > 2 * b, measured=a)] if traced else []),\n]\npage.publish('T', checks)\n")
    kept = measurements_only(source)
    assert kept.splitlines() == [
        "spacing = measure()", "checks = [", "    measurement('spacing', spacing * 1000, unit='ms'),",
        "    measurement('slower', slow / base),", "    measurement('label', run.label),",
        "    *([measurement('traced', a)] if traced else []),", "]", "page.publish('T', checks)"]


# -- the worksheet on a page ---------------------------------------------------------------------------

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
    assert "nagle-delayed-ack, " in box or "sender-buffer-limited" in box  # the labels to choose from
    assert worksheet_box("x = 1") is None  # not a worksheet: shown as it is


#: What makes a worksheet line tell its answer: a range, a bound or a verdict in the question.
#: A range, a bound, a verdict, or the model it is compared with ("… vs 65535 B / RTT").
_GIVES_AWAY = re.compile(r"\bbetween\b|\d\s*[–-]\s*\d|[≤≥<>]|\bat (?:least|most)\b|\b(?:slows|speeds up)\b|\bvs\b")


def test_no_worksheet_line_states_what_it_asks():
    """A worksheet key is the check's name, which the student reads before the run: it names the
    quantity, and the rule stays in the checks table the page shows after the reveal."""
    for case in available_cases():
        for item in read_worksheet(room(case)).items:
            assert not _GIVES_AWAY.search(item.check), (case, item.check)
