"""A class on one server: a real JupyterHub (deploy/jupyterhub/jupyterhub_config.py, as a
teacher runs it, with a test password instead of PAM) and two learners, system users, each in
their own browser, running case 00 live at the same moment. Their measurements take turns in
the machine-wide queue (one is told its place meanwhile); every check holds or the run says
the machine was too busy; then one learner's server is culled in the middle of a run and
nothing of theirs is left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tcplab.lab import state

from learners import LEARNERS, account, processes, wait_gone

from .conftest import ROOT, VENV_BIN, free_port, token, wait_http
from .jupyter import ALL_RAN, errors, open_notebook, ran_every_cell, save, shown, write_lab_settings

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

CASE = "00-path-check"
CHP = VENV_BIN.parent / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
#: What each learner's server leaves in their home, removed before and after the test.
LEFT_IN_HOME = ("tcplab", ".jupyter", ".local/share/jupyter", ".local/share/tcplab", ".cache/tcplab", ".ipython")

TEST_CONFIG = """
# The teacher's example, with what a test changes: a shared test password instead of PAM,
# ports of its own, its state in the test's folder, and a service token to cull a server.
load_subconfig({example!r})
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {learners!r}
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.Spawner.environment["JUPYTERLAB_SETTINGS_DIR"] = {settings!r}
c.JupyterHub.services = [{{"name": "test-culler", "api_token": {service_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "test-culler", "services": ["test-culler"],
                             "scopes": ["list:users", "read:users", "read:servers", "delete:servers"]}}]
"""


def _clean_homes(accounts) -> None:
    for learner in accounts:
        for name in LEFT_IN_HOME:
            shutil.rmtree(Path(learner.pw_dir) / name, ignore_errors=True)


@pytest.fixture
def hub(tmp_path, shared_tmp):
    if not CHP.exists():
        pytest.fail(f"no configurable-http-proxy at {CHP}: `make setup` installs it from npm")
    accounts = [account(name) for name in LEARNERS]
    _clean_homes(accounts)
    released = tmp_path / "release"
    done = subprocess.run([str(VENV_BIN / "tcplab"), "release", CASE[:2], "-o", str(released)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    settings = shared_tmp / "lab-settings"  # every learner's JupyterLab reads it
    write_lab_settings(settings)
    port, password, service_token = free_port(), token(), token()
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(TEST_CONFIG.format(example=str(ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py"),
                                         password=password, learners=set(LEARNERS), port=port, hub_port=free_port(),
                                         proxy_port=free_port(), settings=str(settings), service_token=service_token))
    hub_state = tmp_path / "hub"
    hub_state.mkdir()
    env = {**os.environ, "TCPLAB_CHECKOUT": str(ROOT), "TCPLAB_HUB_STATE": str(hub_state),
           "TCPLAB_RELEASED": str(released), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    log = (tmp_path / "hub.log").open("w")
    process = subprocess.Popen([str(VENV_BIN / "jupyterhub"), "-f", str(config)], cwd=hub_state, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/hub/api/", process=process)
        yield {"url": url, "password": password, "token": service_token, "accounts": accounts, "log": tmp_path / "hub.log"}
    finally:
        process.terminate()  # the hub stops the learners' servers it spawned, then its proxy
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
        log.close()
    left = {a.pw_name: wait_gone(a.pw_uid) for a in accounts}
    _clean_homes(accounts)
    assert not any(left.values()), f"learners' processes outlived the hub: {left}"


def _log_in(page, hub, name: str) -> None:
    page.goto(f"{hub['url']}/hub/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", hub["password"])
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"**/user/{name}/lab**", timeout=120_000)


def _api(hub, method: str, path: str) -> dict | None:
    request = urllib.request.Request(f"{hub['url']}/hub/api{path}", method=method,
                                     headers={"Authorization": f"token {hub['token']}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def test_two_learners_on_one_hub_run_a_case_at_once_and_a_culled_server_leaves_nothing(hub, pages):
    names = list(LEARNERS)
    opened = {}
    for name in names:
        page = pages.open(name)
        _log_in(page, hub, name)
        open_notebook(page, f"{hub['url']}/user/{name}/lab/tree/{CASE}.ipynb")
        opened[name] = page
    # Both click Run All, as a class does when the teacher says "go".
    for page in opened.values():
        _run_all(page)
    # While one measures, the other is shown its place in the machine's queue.
    told, deadline = None, time.monotonic() + 120
    while told is None and time.monotonic() < deadline:
        for name, page in opened.items():
            if page.get_by_text("waiting for the machine:").count():
                told = name
        time.sleep(0.5)
    assert told is not None, "neither learner was shown their place in the measurement queue"
    for name, page in opened.items():
        page.wait_for_function(ALL_RAN, timeout=600_000, polling=1000)
        owner = next(a for a in hub["accounts"] if a.pw_name == name)
        notebook = save(page, Path(owner.pw_dir) / "tcplab" / f"{CASE}.ipynb")
        assert errors(notebook) == [] and ran_every_cell(notebook), name
        seen = shown(page)
        assert seen["scores_tables"] == 1 and set(seen["rows"]) == {"measured"}, (name, seen)  # released: measurements
        assert page.get_by_text("waiting for the machine:").count() == 0  # the note went when the turn came
    # The second learner runs the case again, and the teacher's culler stops their server mid-run.
    culled = hub["accounts"][1]
    _run_all(opened[culled.pw_name])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("tcplab.lab.agent" in _cmdline(p)
                                                  for p in processes(culled.pw_uid)):
        time.sleep(0.3)
    assert any("tcplab.lab.agent" in _cmdline(p) for p in processes(culled.pw_uid)), \
        "the culled learner's lab never started"
    _api(hub, "DELETE", f"/users/{culled.pw_name}/server")
    assert wait_gone(culled.pw_uid, 60) == [], "the culled learner's server, kernel or lab outlived it"
    assert not [t for t in state.queue() if t.uid == culled.pw_uid], "a culled learner's queue ticket stayed"
    # The other learner's server is untouched.
    assert processes(hub["accounts"][0].pw_uid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
