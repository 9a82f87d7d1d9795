"""A learner without root, in JupyterLab, in a real browser: opens the released case 00, writes
the worksheet, runs all cells live (the lab in a user namespace of their own, kernel=auto), sees
the plots and the scored table, and the saved notebook is graded. Nothing of theirs is left
running afterwards."""

from __future__ import annotations

import json
import subprocess

import pytest

from learners import LEARNERS, account as account_of, wait_gone

from .conftest import ROOT, VENV_BIN, as_learner, free_port, learner_home, token, wait_http
from .jupyter import errors, open_notebook, run_all, save, shown, write_cell, write_lab_settings

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

CASE = "00-path-check"
#: The learner's worksheet: what they predict for each of case 00's checks (a 20 ms, 100 Mbit/s line).
WORKSHEET = """predictions = {
    'TCP round trip (median, less loopback)': 20,  # ms
    'goodput': 95,  # Mbit/s
}"""


@pytest.fixture
def jupyterlab(shared_tmp):
    """JupyterLab run by a learner in a home of their own, on the released case notebooks."""
    account = account_of(LEARNERS[0])
    home = learner_home(shared_tmp, account)
    course = home / "tcplab"
    released = subprocess.run(as_learner(account, [str(VENV_BIN / "tcplab"), "release", CASE[:2], "-o", str(course)],
                                         home=home), cwd=ROOT, capture_output=True, text=True)
    assert released.returncode == 0, released.stderr
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
        yield {"url": f"http://127.0.0.1:{port}", "token": secret, "account": account, "home": home, "course": course}
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
    seen = shown(page)
    assert seen["plots"] >= 2, seen  # configured against measured, and the ping-pong's round trips
    assert seen["scores_tables"] == 1 and seen["rows"], seen
    # Every check held, or the machine was too busy to trust them: never a wrong one.
    assert set(seen["rows"]) <= {"pass", "untrusted"}, seen
    # The page ran live on the host's kernel in the learner's user namespace, and says so.
    scores = next(o["data"]["application/vnd.tcplab.scores+json"] for c in notebook["cells"]
                  for o in c.get("outputs", []) if "application/vnd.tcplab.scores+json" in o.get("data", {}))
    assert scores["mode"] == "live" and scores["environment"]["lab kernel"].startswith("userns ("), scores["environment"]
    graded_dir = lab["home"] / "grades"
    graded = subprocess.run(as_learner(account, [str(VENV_BIN / "tcplab"), "grade", str(lab["course"] / f"{CASE}.ipynb"),
                                                 "-o", str(graded_dir)], home=lab["home"]),
                            cwd=ROOT, capture_output=True, text=True)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    grade = json.loads(next(graded_dir.glob("*.grade.json")).read_text())
    items = {item["check"]: item for item in grade["items"]}
    assert set(items) == {"TCP round trip (median, less loopback)", "goodput"}, grade
    assert {item["predicted"] for item in items.values()} == {20, 95}
