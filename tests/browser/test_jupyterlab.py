"""A learner without root, in JupyterLab, in a real browser: opens case 00 as the teacher handed it
out (an nbgrader assignment, ``tcplab release --assignment``), writes the worksheet, runs all cells
live (the lab in a user namespace of their own, kernel=auto), sees the plots and the scored table;
the teacher collects the saved notebook and ``nbgrader autograde`` scores the learner's predictions
against the class's reference run. Nothing of the learner's is left running afterwards."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess

import pytest

from learners import LEARNERS, account as account_of, wait_gone
from tcplab.report.execute import execute_notebook
from tcplab.report.stamps import STAMPS_SUFFIX

from .conftest import ROOT, VENV_BIN, as_learner, free_port, learner_home, token, wait_http
from .jupyter import errors, open_notebook, ran_every_cell, run_all, save, shown, write_cell, write_lab_settings

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

CASE = "00-path-check"
ASSIGNMENT = "week0"
#: The learner's worksheet: what they predict for each of case 00's checks (a 20 ms, 100 Mbit/s line).
WORKSHEET = """predictions = {
    'TCP round trip (median, less loopback)': 20,  # ms
    'goodput': 95,  # Mbit/s
}"""


def _nbgrader(course, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(course / ".home"), "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
           "JUPYTER_RUNTIME_DIR": str(course / ".home" / "runtime"), "TCPLAB_LANG": "en"}
    return subprocess.run([str(VENV_BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def assignment(tmp_path):
    """The teacher's nbgrader course with case 00 as an assignment, scored against the class's
    reference run (here case 00's recorded runs, executed in replay), and the notebook it hands out."""
    reference = tmp_path / "reference"
    reference.mkdir()
    ran = execute_notebook(ROOT / "course" / CASE / f"{CASE}.ipynb", reference / f"{CASE}.ipynb",
                           parameters={"mode": "replay"}, case_id=CASE, cwd=reference, progress=False)
    assert ran.ok, ran.error
    course = tmp_path / "course"
    (course / ".home").mkdir(parents=True)
    released = subprocess.run([str(VENV_BIN / "tcplab"), "release", CASE[:2], "--assignment", ASSIGNMENT,
                               "--reference", str(reference / f"{CASE}.ipynb"), "-o", str(course)],
                              cwd=ROOT, capture_output=True, text=True)
    assert released.returncode == 0, released.stderr
    made = _nbgrader(course, "generate_assignment", ASSIGNMENT)
    assert made.returncode == 0, made.stderr[-3000:]
    return course, course / "release" / ASSIGNMENT / f"{CASE}.ipynb"


@pytest.fixture
def jupyterlab(shared_tmp, assignment):
    """JupyterLab run by a learner in a home of their own, on the notebook the teacher handed out."""
    account = account_of(LEARNERS[0])
    home = learner_home(shared_tmp, account)
    course = home / "tcplab"
    course.mkdir()
    shutil.copy(assignment[1], course / f"{CASE}.ipynb")  # as ``nbgrader fetch_assignment`` gives it
    settings = home / ".jupyter" / "lab" / "user-settings"
    write_lab_settings(settings)
    subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(home)], check=True)
    port, secret = free_port(), token()
    server = subprocess.Popen(as_learner(account, [str(VENV_BIN / "jupyter"), "lab", "--no-browser",
                                                   "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                                                   f"--IdentityProvider.token={secret}", f"--ServerApp.root_dir={course}",
                                                   "--LabApp.news_url=None"],
                                         home=home, env={"JUPYTERLAB_SETTINGS_DIR": str(settings)}),
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/status?token={secret}", process=server)
        yield {"url": f"http://127.0.0.1:{port}", "token": secret, "account": account, "home": home, "course": course,
               "teacher": assignment[0]}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert wait_gone(account.pw_uid) == [], "the learner's JupyterLab, kernel or lab outlived the test"


def test_a_learner_runs_a_released_case_live_in_the_browser_and_it_is_graded(jupyterlab, pages):
    lab, account = jupyterlab, jupyterlab["account"]
    page = pages.open("learner")
    open_notebook(page, f"{lab['url']}/lab/tree/{CASE}.ipynb?token={lab['token']}")
    write_cell(page, "predictions = {", WORKSHEET)
    took = run_all(page, timeout_s=400)
    notebook = save(page, lab["course"] / f"{CASE}.ipynb")
    assert errors(notebook) == [], f"cells raised after Run All ({took:.0f} s)"
    assert ran_every_cell(notebook), f"Run All left cells unrun ({took:.0f} s)"
    seen = shown(page)
    # The ping-pong's round trips (the bar chart of configured against measured is the instructor's).
    assert seen["plots"] >= 1, seen
    assert seen["scores_tables"] == 1 and seen["rows"], seen
    # A released notebook shows what was measured, never a rule or a verdict (docs/grading.md):
    # every row a measurement.
    assert set(seen["rows"]) == {"measured"}, seen
    # The page ran live on the host's kernel in the learner's user namespace, and says so.
    scores = next(o["data"]["application/vnd.tcplab.scores+json"] for c in notebook["cells"]
                  for o in c.get("outputs", []) if "application/vnd.tcplab.scores+json" in o.get("data", {}))
    assert scores["mode"] == "live" and scores["environment"]["lab kernel"].startswith("userns ("), scores["environment"]
    # The teacher collects it (as ``nbgrader collect`` does: the notebook and the stamp its first
    # run wrote beside it) and grades the class without running the lab again.
    teacher = lab["teacher"]
    handed = teacher / "submitted" / account.pw_name / ASSIGNMENT
    handed.mkdir(parents=True)
    for name in (f"{CASE}.ipynb", f"{CASE}{STAMPS_SUFFIX}"):
        shutil.copy(lab["course"] / name, handed / name)
    (handed / "timestamp.txt").write_text("2026-11-28 10:00:00.000000 UTC")
    graded = _nbgrader(teacher, "autograde", ASSIGNMENT)
    assert graded.returncode == 0, graded.stderr[-3000:]
    exported = _nbgrader(teacher, "export", "--exporter", "tcplab.report.gradebook.ItemsExport", "--to", "items.csv")
    assert exported.returncode == 0, exported.stderr[-3000:]
    with open(teacher / "items.csv", newline="", encoding="utf-8") as f:
        items = {r["item"]: r for r in csv.DictReader(f) if r["student_id"] == account.pw_name}
    assert set(items) - {"(worksheet)"} == {"TCP round trip (median, less loopback)", "goodput"}, items
    # What the learner wrote before the run is what was scored, against the reference's measurement.
    assert {float(items[k]["read"]) for k in ("TCP round trip (median, less loopback)", "goodput")} == {20.0, 95.0}
    assert all(items[k]["verdict"] in {"right", "wrong"} and items[k]["measured"]
               for k in ("TCP round trip (median, less loopback)", "goodput")), items
