"""The course pipeline end to end: `tcplab report` runs a case live and renders it."""

import subprocess
import sys

import pytest

from tcplab import course
from tcplab.lab.link import netem_available
from tcplab.units import ParameterError


def test_cases_are_found_in_course_order():
    cases = course.available_cases()
    assert cases[0] == "00-path-check"
    assert cases == sorted(cases)


def test_case_selection_by_number_or_name_and_bad_selection():
    assert course.select_cases("00") == ["00-path-check"]
    assert course.select_cases("00-path-check,0") == ["00-path-check"]
    with pytest.raises(ParameterError) as info:
        course.select_cases("99")
    assert info.value.name == "CASES" and "00-path-check" in info.value.accepted


def test_mode_choice(monkeypatch):
    monkeypatch.setattr(course, "live_possible", lambda: (False, "not root"))
    assert course.choose_mode("auto")[0] == "replay"
    with pytest.raises(ParameterError, match="live mode impossible"):
        course.choose_mode("live")
    monkeypatch.setattr(course, "live_possible", lambda: (True, ""))
    assert course.choose_mode("auto")[0] == "live"


@pytest.mark.kernel
@pytest.mark.slow
def test_report_runs_the_path_check_live_and_renders_html_and_pdf(root, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tcplab.cli", "report", "--cases", "00", "--mode", "live",
         "--reports-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (tmp_path / "00-path-check.html").read_text()
    backend = "netem" if netem_available() else "delay line"
    assert backend in html
    assert "Path check" in html and "kernel min_rtt" in html
    assert "http://" not in html.split("<body", 1)[1].split("</body>")[0].replace("http://www.w3.org", "")
    pages = subprocess.run(["pdfinfo", str(tmp_path / "handout.pdf")], capture_output=True, text=True).stdout
    assert int(next(line.split()[-1] for line in pages.splitlines() if line.startswith("Pages:"))) >= 2
    text = subprocess.run(["pdftotext", str(tmp_path / "handout.pdf"), "-"], capture_output=True, text=True).stdout
    assert "Path check" in text
