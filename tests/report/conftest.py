"""Shared, expensive fixtures: one real report build (papermill + nbconvert + chromium)
whose outputs most tests inspect, so the suite pays for each kernel and print once."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tcplab.report import Case, build_report

FIXTURES = Path(__file__).parent / "fixtures"
OK_NOTEBOOK = FIXTURES / "case_ok.ipynb"
ERROR_NOTEBOOK = FIXTURES / "case_error.ipynb"


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


def pdf_info(path: Path) -> dict[str, str]:
    out = subprocess.run(["pdfinfo", str(path)], check=True, capture_output=True,
                         text=True).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}


@pytest.fixture(scope="session")
def pdf_tools() -> None:
    for tool in ("pdftotext", "pdfinfo"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install poppler-utils")


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Three cases, the middle one raising: alpha (defaults), broken, beta (own rtt_ms).

    broken is told its backend, as the lab would: it never publishes one, and its pages
    must still say which backend it was meant to run on.
    """
    reports = tmp_path_factory.mktemp("reports")
    result = build_report(
        [Case("alpha", notebook=OK_NOTEBOOK),
         Case("broken", notebook=ERROR_NOTEBOOK, parameters={"backend": "delayline"}),
         Case("beta", notebook=OK_NOTEBOOK, parameters={"rtt_ms": 80.0})],
        reports_dir=reports,
        parameters={"rate_mbit": 3.0}, profile="quick", edition="instructor", mode="live",
        progress=False,
    )
    return result, reports
