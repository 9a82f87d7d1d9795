"""A class in a real browser: Debian's chromium driven by Playwright (its Python package from
PyPI; no browser is downloaded: ``executable_path=/usr/bin/chromium``), JupyterLab and
JupyterHub run as unprivileged learners (system users made by ``make test-users``).

A failing test leaves a screenshot of every page it had open in ``reports/browser-failures/``.
"""

from __future__ import annotations

import os
import pwd
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
VENV_BIN = PYTHON.parent
CHROMIUM = Path("/usr/bin/chromium")
#: What Debian's chromium needs to run headless as root in a test, and no more: nothing of it
#: reaches the network, updates itself or syncs.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SCREENSHOTS = ROOT / "reports" / "browser-failures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, seconds: float = 90, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args[:6]} exited {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {seconds:.0f} s")


@pytest.fixture
def shared_tmp():
    """A folder learners can enter (pytest's own are root's alone), removed after the test."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tcplab-class-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def learner_home(folder: Path, account: pwd.struct_passwd) -> Path:
    """A fresh home for the learner in ``folder`` (their Jupyter settings, runs and caches
    land there and go with it)."""
    home = folder / account.pw_name
    home.mkdir()
    os.chown(home, account.pw_uid, account.pw_gid)
    return home


def as_learner(account: pwd.struct_passwd, argv: list[str], *, home: Path, env: dict | None = None,
               **kwargs) -> list[str]:
    """The argv that runs ``argv`` as the learner, with ``home`` as their home."""
    settings = {"HOME": str(home), "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                "LANG": "C.UTF-8", **(env or {})}
    return ["runuser", "-u", account.pw_name, "--", "env", "-i", *(f"{k}={v}" for k, v in settings.items()), *argv]


@pytest.fixture
def chromium():
    """A headless Debian chromium through Playwright (its driver and the browser are this
    test's children, ended with it: the suite checks that no test leaves a process)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: `make setup` installs Debian's chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def pages(chromium, request):
    """Open pages by name (``pages.open("learner1")``); each is screenshot if the test fails."""

    class Pages(dict):
        def open(self, name: str):
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            page.set_default_timeout(60_000)
            self[name] = page
            return page

    opened = Pages()
    yield opened
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for name, page in opened.items():
        if failed:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / f"{request.node.name}-{name}.png"
            try:
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot of {name}'s page: {shot}")
            except Exception as exc:  # the page may be gone with the failure
                print(f"no screenshot of {name}'s page: {exc}")
        page.context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def token() -> str:
    return secrets.token_hex(16)
