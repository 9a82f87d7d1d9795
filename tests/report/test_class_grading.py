"""A class graded with nbgrader's own commands and one tcplab step (issue 39).

``tcplab release --assignment`` writes the nbgrader source tree of cases 01, 04 and 05, scored
against the course's replay run (the class's reference, recorded once); ``nbgrader
generate_assignment`` hands it out; ten synthetic students hand in what students do (right, wrong,
blank, gamed by deleting and by adding keys, odd formats, wrong units, a corrupt notebook, one from
an older release, one of another case) into ``submitted/<student>/<assignment>/``, as ``nbgrader
collect`` leaves them; one ``nbgrader autograde`` grades them all, without root's powers and without a lab;
``generate_feedback`` writes their pages (one class in English, one in Chinese) and ``export`` the
gradebook, one row per student, and with tcplab's exporter one per item. Every score is checked
against the rule worked out by hand from the reference run's values (reference_values below).
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tcplab.report.answers import written_answers
from tcplab.report.execute import execute_notebook
from tcplab.report.release import CHECK_BUILDERS, RUN_TAG
from tcplab.report.stamps import STAMPS_SUFFIX

BIN = Path(sys.executable).parent
CASES = ("01-send-buffer", "04-nagle-delayed-ack", "05-zero-window")
S01, S04, S05 = CASES
#: The reference run's values these expectations were worked out from (asserted first, so a
#: change of the shipped replay data says so rather than failing a student's score).
REFERENCE = {
    S01: {"getsockopt after SO_SNDBUF 16KB": 32768, "getsockopt after 256KB, wmem_max 131071": 262142,
          "16KB bbr: burst spacing": (33.823, 10.0, False), "16KB bbr: times slower than unset": (5.037, None, True)},
    S04: {"Nagle stall at 2ms: median split-nagle minus split-nodelay": (45.92, None, True),
          "Nagle stall at 20ms": (63.80, None, True), "diagnosis of split-nagle": "nagle-delayed-ack"},
    S05: {"first probe after the window closed": (0.2499, None, True), "probes while the window is closed": 4,
          "new data after the reader resumed": (20.52, None, True),
          "tiny writes, autotuned: memory per payload byte": (5.512, None, True)},
}
ITEMS = {case: list(items) for case, items in REFERENCE.items()}

#: What each student writes in each notebook's worksheet (Python source of each value; a key
#: missing here stays None, a key not on the worksheet is added), and the verdicts and points the
#: rule gives them, worked out by hand against REFERENCE (a bound's margin is ±25 % of the
#: measured value: 45.92 → 34.44–57.40 ms; a within check's own: burst spacing ±10 ms).
STUDENTS = {
    "ada": {  # right; her 04 is run for real first, then one answer changed after the run
        S01: ({"getsockopt after SO_SNDBUF 16KB": "32768", "getsockopt after 256KB, wmem_max 131071": "262142",
               "16KB bbr: burst spacing": "30", "16KB bbr: times slower than unset": "5.6"},
              ["right"] * 4),
        S04: ({"Nagle stall at 2ms: median split-nagle minus split-nodelay": "42", "Nagle stall at 20ms": "40",
               "diagnosis of split-nagle": "'nagle-delayed-ack'"},
              ["right", "wrong", "right"]),  # 40 before the run (63.8 after it): 40 is scored, out of 47.85–79.75
    },
    "bob": {  # the misconceptions: no doubling, no clamp, one RTT, the 200 ms maximum, another label
        S01: ({"getsockopt after SO_SNDBUF 16KB": "16384", "getsockopt after 256KB, wmem_max 131071": "524288",
               "16KB bbr: burst spacing": "20", "16KB bbr: times slower than unset": "2"}, ["wrong"] * 4),
        S04: ({"Nagle stall at 2ms: median split-nagle minus split-nodelay": "200", "Nagle stall at 20ms": "200",
               "diagnosis of split-nagle": "'receiver-window-limited'"}, ["wrong"] * 3),
    },
    "cy": {S01: ({}, ["missing"] * 4)},  # blank
    "dan": {  # deleted the two lines he was unsure of
        S01: ({"getsockopt after SO_SNDBUF 16KB": "32768", "getsockopt after 256KB, wmem_max 131071": "262142",
               "16KB bbr: burst spacing": None, "16KB bbr: times slower than unset": None},
              ["right", "right", "missing", "missing"]),
    },
    "eve": {  # wrong answers, plus seven checks whose values the old release printed
        S01: ({"getsockopt after SO_SNDBUF 16KB": "16384", "getsockopt after 256KB, wmem_max 131071": "524288",
               "ss tb of the 16KB socket (median)": "32768", "unset: peak bytes in flight ≥ BDP": "True",
               "net.core.wmem_max restored after the runs": "4194304", "16KB bbr: share of the transfer spent in send()": "99",
               "unset: transfer time vs line rate + slow start": "0.4", "16KB bbr: goodput vs in flight / RTT": "1.9",
               "getsockopt after 256KB, wmem_max ≥ 256KB": "524288"},
              ["wrong", "wrong", "missing", "missing"]),
    },
    "fay": {  # odd formats, every one the right quantity
        S01: ({"getsockopt after SO_SNDBUF 16KB": "2 * 16 * 1024", "getsockopt after 256KB, wmem_max 131071": "'262 142'",
               "16KB bbr: burst spacing": "'about 30 ms'", "16KB bbr: times slower than unset": "'5x'"}, ["right"] * 4),
        S05: ({"first probe after the window closed": "'220 ms'", "probes while the window is closed": "'4 probes'",
               "new data after the reader resumed": "２０", "tiny writes, autotuned: memory per payload byte": "'约5.5倍'"},
              ["right"] * 4),
    },
    "gus": {  # units: of the wrong kind, slipped by 1000, and converted
        S04: ({"Nagle stall at 2ms: median split-nagle minus split-nodelay": "'42 s'", "Nagle stall at 20ms": "'15 Mbit/s'",
               "diagnosis of split-nagle": "'Nagle + delayed ACK'"}, ["wrong", "wrong_unit", "right"]),
        S05: ({"first probe after the window closed": "'250 KB'", "probes while the window is closed": "4",
               "new data after the reader resumed": "'0.02 s'", "tiny writes, autotuned: memory per payload byte": "5.5"},
              ["wrong_unit", "right", "right", "right"]),
    },
    "hal": {S01: (None, ["not graded"] * 4)},  # a notebook cut off in the middle
    "ivy": {  # a notebook of an older release, whose burst-spacing item had another name
        S01: ({"getsockopt after SO_SNDBUF 16KB": "32768", "getsockopt after 256KB, wmem_max 131071": "262142",
               "16KB bbr: burst spacing between 1 and 2 RTT": "30", "16KB bbr: times slower than unset": "5.6"},
              ["other_release"] * 4),
    },
    # Case 04's notebook, filled in right, handed in as 01: its three scoring cells are 01's first three
    # (nbgrader puts their source back), 01's fourth is not in it.
    "jon": {S01: ({}, ["other_case"] * 3 + ["not graded"])},
}
ZH_STUDENT = ("lin", {"Nagle stall at 2ms: median split-nagle minus split-nodelay": "'约42毫秒'",
                      "Nagle stall at 20ms": "'６０ ms左右'", "diagnosis of split-nagle": "'nagle-delayed-ack'"},
              ["right"] * 3)
STAMP_AT = "2026-11-28T09:00:00+00:00"


def _points(verdicts: list[str]) -> int:
    return sum(v == "right" for v in verdicts)  # every item of cases 01, 04 and 05 is worth 1 point


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
#: Root's uid without a single capability: it can build no namespace, qdisc or capture either.
NO_CAPABILITIES = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]


def _unprivileged() -> list[str]:
    """The prefix that runs a command without root's powers: as this user when it is not root; as
    root, as nobody, or (where nobody cannot read this checkout, a clone in a private folder) with
    no capability at all."""
    if os.geteuid() != 0:
        return []
    readable = subprocess.run([*NOBODY, sys.executable, "-c", "import tcplab.report.autograde"], capture_output=True)
    return NOBODY if readable.returncode == 0 else NO_CAPABILITIES


def _nbgrader(course: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(course / ".home"), "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
           "JUPYTER_RUNTIME_DIR": str(course / ".home" / "runtime"), "TCPLAB_LANG": "en"}
    return subprocess.run([*prefix, str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=600)


def _fill(source: str, answers: dict[str, str | None]) -> str:
    """A released worksheet cell with ``answers`` written in, as a student edits it: a value on
    its line, a line deleted (None), a line added (a key not on the worksheet)."""
    lines, seen = [], set()
    for line in source.splitlines():
        found = re.match(r"    ('.*?'|\".*?\"): None,", line)
        key = ast.literal_eval(found.group(1)) if found else None
        if key in answers:
            seen.add(key)
            if answers[key] is None:
                continue
            line = line.replace("None,", answers[key] + ",", 1)
        lines.append(line)
    added = [f"    {k!r}: {v}," for k, v in answers.items() if k not in seen and v is not None]
    return "\n".join(lines[:-1] + added + lines[-1:])


def _worksheet(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    (cell,) = [c for c in nb.cells if "worksheet" in c.metadata.get("tags", [])]
    return cell


def _hand_in(course: Path, assignment: str, student: str, case: str, nb: nbformat.NotebookNode | str,
             stamp: dict | None = None) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case}.ipynb"
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, str(path))
    (folder / "timestamp.txt").write_text("2026-11-28 10:00:00.000000 UTC")
    if stamp is not None:
        (folder / f"{case}{STAMPS_SUFFIX}").write_text(json.dumps(stamp) + "\n")
    return path


def _stamp_of(nb: nbformat.NotebookNode) -> dict:
    """The stamp a kernel writes when the first run starts, for a student whose worksheet stood so
    then (ada's real run below shows a kernel writing it)."""
    return {"at": STAMP_AT, "epoch": 1.0, "event": "first run",
            "answers": {k: w.text for k, w in written_answers(_worksheet(nb).source).items()}}


@pytest.fixture(scope="module")
def graded(replay_report, tmp_path_factory):
    out, reports = replay_report
    assert out.returncode == 0, out.stderr[-2000:]
    # A folder of its own under the system's temporary folder: nobody cannot reach into pytest's,
    # which only its user may enter.
    course = Path(tempfile.mkdtemp(prefix="tcplab-class-"))
    (course / ".home").mkdir()
    summary = reports / "summary.json"
    for assignment, cases, language in (("week1", ",".join(CASES), "en"), ("week1zh", S04, "zh")):
        released = subprocess.run([sys.executable, "-m", "tcplab.commands", "release", cases, "--assignment", assignment,
                                   "--reference", str(summary), "--language", language, "-o", str(course)],
                                  capture_output=True, text=True, timeout=300)
        assert released.returncode == 0, released.stderr
    for assignment in ("week1", "week1zh"):
        made = _nbgrader(course, "generate_assignment", assignment)
        assert made.returncode == 0, made.stderr[-3000:]
    release = course / "release" / "week1"
    handed = {}
    for student, notebooks in STUDENTS.items():
        for case, (answers, _) in notebooks.items():
            if answers is None:  # hal: the file cut off in the middle
                handed[student, case] = _hand_in(course, "week1", student, case,
                                                 (release / f"{case}.ipynb").read_text()[:5000])
                continue
            nb = nbformat.read(str(release / f"{(S04 if student == 'jon' else case)}.ipynb"), as_version=4)
            if student == "jon":
                answers = STUDENTS["ada"][S04][0] | {"Nagle stall at 20ms": "60"}
            _worksheet(nb).source = _fill(_worksheet(nb).source, answers)
            if student == "ivy":  # handed out before the item was renamed (worksheet version 0)
                nb.metadata["tcplab"]["release"].update(worksheet=0, items="000000000000")
            stamp = _stamp_of(nb)
            if student == "ada" and case == S04:
                # Ada runs the notebook (Run All, in replay: no lab on a student's laptop), then,
                # the measurement in front of her, changes one answer.
                folder = tmp_path_factory.mktemp("ada")
                nbformat.write(nb, str(folder / f"{case}.ipynb"))
                ran = execute_notebook(folder / f"{case}.ipynb", folder / "ran.ipynb", parameters={"mode": "replay"},
                                       cwd=folder, progress=False)
                assert ran.ok, ran.error
                stamp = json.loads((folder / f"{case}{STAMPS_SUFFIX}").read_text().splitlines()[0])
                nb = nbformat.read(str(folder / "ran.ipynb"), as_version=4)
                _worksheet(nb).source = _worksheet(nb).source.replace("'Nagle stall at 20ms': 40,", "'Nagle stall at 20ms': 63.8,")
            handed[student, case] = _hand_in(course, "week1", student, case, nb, stamp)
    student, answers, _ = ZH_STUDENT
    nb = nbformat.read(str(course / "release" / "week1zh" / f"{S04}.ipynb"), as_version=4)
    _worksheet(nb).source = _fill(_worksheet(nb).source, answers)
    _hand_in(course, "week1zh", student, S04, nb, _stamp_of(nb))
    prefix = tuple(_unprivileged())
    if prefix[:2] == tuple(NOBODY[:2]):  # nbgrader runs as nobody: the course is theirs to write in
        subprocess.run(["chown", "-R", "65534:65534", str(course)], check=True)
    powers = subprocess.run([*prefix, "grep", "^CapEff", "/proc/self/status"], capture_output=True, text=True).stdout
    graded = {a: _nbgrader(course, "autograde", a, prefix=prefix) for a in ("week1", "week1zh")}
    feedback = {a: _nbgrader(course, "generate_feedback", a, prefix=prefix) for a in ("week1", "week1zh")}
    exported = _nbgrader(course, "export", "--to", "grades.csv", prefix=prefix)
    items = _nbgrader(course, "export", "--exporter", "tcplab.report.gradebook.ItemsExport", "--to", "items.csv",
                      prefix=prefix)
    yield course, summary, graded, feedback, exported, items, powers
    shutil.rmtree(course, ignore_errors=True)


def _items(course: Path, assignment: str = "week1") -> dict[tuple[str, str], list[dict]]:
    rows = {}
    with open(course / "items.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["assignment"] == assignment:
                rows.setdefault((row["student_id"], row["notebook"]), []).append(row)
    return rows


def test_the_reference_run_measured_what_the_expectations_assume(graded):
    _, summary, *_ = graded
    checks = {c["case_id"]: {k["name"]: k for k in c["checks"]} for c in json.loads(summary.read_text())["cases"]}
    for case, items in REFERENCE.items():
        for name, expected in items.items():
            check = checks[case][name]
            if isinstance(expected, tuple):
                value, tolerance, relative = expected
                assert check["measured"] == pytest.approx(value, abs=0.01), name
                assert (check["tolerance"], check["relative"]) == (tolerance, relative), name
            else:
                assert check["measured"] == expected, name


def test_one_autograde_grades_the_class_and_says_that_one_notebook_failed(graded):
    course, _, autograded, *_ = graded
    week1 = autograded["week1"]
    assert week1.returncode != 0  # hal's notebook could not be read: nbgrader says so in its exit code
    assert "hal" in week1.stderr and "NotJSONError" in week1.stderr
    assert autograded["week1zh"].returncode == 0, autograded["week1zh"].stderr[-3000:]
    done = sorted(p.parent.parent.name for p in (course / "autograded").glob("*/week1/*.ipynb"))
    assert "hal" not in done and len(done) == 13  # every other notebook was graded


def test_every_item_scores_as_worked_out_by_hand(graded):
    course, *_ = graded
    rows = _items(course)
    for student, notebooks in STUDENTS.items():
        for case, (_, verdicts) in notebooks.items():
            found = [r for r in rows[student, case] if r["item"] != "(worksheet)"]
            assert [r["item"] for r in found] == ITEMS[case], (student, case)
            assert [r["verdict"] for r in found] == verdicts, (student, case, [r["notes"] for r in found])
            scored = [float(r["score"] or 0) for r in found]
            assert scored == [1.0 if v == "right" else 0.0 for v in verdicts], (student, case)
    lin = [r for r in _items(course, "week1zh")["lin", S04] if r["item"] != "(worksheet)"]
    assert [r["verdict"] for r in lin] == ZH_STUDENT[2]


def test_the_gradebook_has_a_row_per_student_with_the_summed_points(graded):
    course, _, _, _, exported, *_ = graded
    assert exported.returncode == 0, exported.stderr[-2000:]
    with open(course / "grades.csv", newline="") as f:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(f)}
    for student, notebooks in STUDENTS.items():
        row = rows["week1", student]
        assert float(row["score"]) == sum(_points(v) for _, v in notebooks.values()), student
        assert float(row["max_score"]) == 11.0  # every item of every notebook, whether handed in or not
    assert float(rows["week1zh", "lin"]["score"]) == 3.0


def test_the_items_gradebook_says_why(graded):
    course, *_, items, _ = graded
    assert items.returncode == 0, items.stderr[-2000:]
    rows = _items(course)
    review = {key: [r for r in found if r["item"] == "(worksheet)"][0]["notes"] for key, found in rows.items()}
    eve = review["eve", S01]
    assert "extra: " in eve and all(k in eve for k in STUDENTS["eve"][S01][0] if k not in ITEMS[S01])
    assert "edited after the run: Nagle stall at 20ms" in review["ada", S04]
    assert "other_release" in review["ivy", S01] and "other_case" in review["jon", S01]
    assert rows["jon", S01][-1]["notes"] == "its scoring cell was not in the notebook handed in"
    assert all("not a notebook: NotJSONError" in r["notes"] for r in rows["hal", S01])
    gus = {r["item"]: r for r in rows["gus", S04]}
    assert "Mbit/s" in gus["Nagle stall at 20ms"]["notes"] and "1\u202f000 times larger" in gus[ITEMS[S04][0]]["notes"]
    fay = {r["item"]: r for r in rows["fay", S05]}
    assert float(fay["first probe after the window closed"]["read"]) == pytest.approx(0.22)
    assert float(fay["new data after the reader resumed"]["read"]) == 20.0


def test_grading_ran_no_lab_and_not_as_root(graded):
    course, *_, powers = graded
    assert powers.split() == ["CapEff:", "0000000000000000"]  # nbgrader and its kernels held no power of root
    for path in (course / "autograded").glob("*/*/*.ipynb"):
        nb = nbformat.read(str(path), as_version=4)
        ran = [c for c in nb.cells if c.cell_type == "code" and c.get("outputs")]
        # Only the scoring tests ran: every cell of the lab was skipped, outputs cleared by nbgrader.
        assert ran and all(RUN_TAG not in c.metadata.get("tags", []) for c in ran), path
        assert all((c.metadata.get("nbgrader") or {}).get("grade") for c in ran), path


def test_the_release_holds_no_expected_value_or_check_code(graded):
    course, *_ = graded
    for path in (course / "release").glob("*/*.ipynb"):
        nb = nbformat.read(str(path), as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        calls = {n.func.id for c in nb.cells if c.cell_type == "code" for n in ast.walk(ast.parse(c.source))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & set(CHECK_BUILDERS), (path, calls & set(CHECK_BUILDERS))
        assert "HIDDEN TESTS" not in code and "'reference'" not in code and "'tolerance'" not in code, path


def test_feedback_pages_teach_in_the_notebooks_language(graded):
    course, _, _, feedback, *_ = graded
    assert all(f.returncode == 0 for f in feedback.values()), [f.stderr[-2000:] for f in feedback.values()]
    bob = (course / "feedback" / "bob" / "week1" / f"{S01}.html").read_text()
    for shown in ("16384", "32\u202f768 B", "one reference run", "2 × min(request, net.core.wmem_max)",
                  "Linux doubles the request", "exactly the measured value"):
        assert shown in bob, shown
    gus = (course / "feedback" / "gus" / "week1" / f"{S04}.html").read_text()
    assert "You wrote Mbit/s; the item asks ms" in gus and " s s" not in gus and "KB B" not in gus
    lin = (course / "feedback" / "lin" / "week1zh" / f"{S04}.html").read_text()
    assert "你的答案" in lin and "正确" in lin and "延迟 ACK 定时器" in lin
    # The feedback shows what each test found, not the data it scored with (nbgrader_config.py).
    assert not [p for p in (course / "feedback").rglob("*.html") if "BEGIN HIDDEN TESTS" in p.read_text()]
