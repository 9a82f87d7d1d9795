"""Driving a case notebook in JupyterLab as a learner does: open it, write the worksheet, Run
All, and read what the page shows (Playwright's sync API on Debian's chromium)."""

from __future__ import annotations

import json
import time
from pathlib import Path

#: JupyterLab settings a learner's fresh home gets: every cell rendered (JupyterLab 4 renders
#: only the cells in view by default, and the test reads them all), no news from the network.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}


def write_lab_settings(settings_dir: Path) -> None:
    for name, values in LAB_SETTINGS.items():
        file = settings_dir / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))


#: Run All went through: a cell ran (its prompt holds a number) and none is running or queued
#: ("[*]", which Run All puts on every cell at once). Not "every prompt holds a number": the
#: cells whose source is hidden (nbgrader's scoring cells in a released assignment) never showed
#: one here; :func:`ran_every_cell` checks the saved notebook instead.
ALL_RAN = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map(e => e.textContent.trim());
  return prompts.some(t => /^\\[\\d+\\]:$/.test(t)) && !prompts.includes('[*]:');
}"""


def open_notebook(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=120_000)
    # The notebook's kernel (the checkout's .venv) has started when the toolbar says idle, and the
    # page is connected to it when the status bar says so ("Python 3 (ipykernel) | Idle"): the
    # toolbar's indicator can read idle before, and Run All then leaves every cell unrun.
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    page.wait_for_function("() => (document.querySelector('#jp-main-statusbar')?.textContent || '').includes('| Idle')",
                           timeout=120_000, polling=500)


def write_cell(page, containing: str, text: str) -> None:
    """Replace the source of the code cell that shows ``containing`` with ``text``, by typing."""
    editor = page.locator(".jp-Notebook .jp-CodeCell").filter(has_text=containing).first.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)


def run_all(page, timeout_s: float) -> float:
    """Run → Run All Cells, then wait until every cell ran; the seconds it took."""
    started = time.monotonic()
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    page.wait_for_function(ALL_RAN, timeout=timeout_s * 1000, polling=1000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    return time.monotonic() - started


def save(page, file: Path, timeout_s: float = 30) -> dict:
    """Ctrl+S, then the notebook as the server wrote it."""
    before = file.stat().st_mtime_ns
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + timeout_s
    while file.stat().st_mtime_ns == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert file.stat().st_mtime_ns != before, f"{file} was not saved"
    return json.loads(file.read_text())


def shown(page) -> dict:
    """What the page shows: plots, the scores table's rows by result class, error outputs."""
    rows = page.locator("table.tcplab-scores tbody tr")
    return {
        "plots": page.locator(".jp-OutputArea-output img").count(),
        "scores_tables": page.locator("table.tcplab-scores").count(),
        "rows": [rows.nth(i).get_attribute("class") for i in range(rows.count())],
    }


def ran_every_cell(notebook: dict) -> bool:
    """Every code cell of a saved notebook has run (has an execution count)."""
    return all(cell.get("execution_count") for cell in notebook["cells"] if cell["cell_type"] == "code")


def errors(notebook: dict) -> list[str]:
    """The error outputs of a saved notebook (name: value), none when it ran through."""
    return [f"{o.get('ename')}: {o.get('evalue')}" for cell in notebook["cells"] if cell["cell_type"] == "code"
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]
