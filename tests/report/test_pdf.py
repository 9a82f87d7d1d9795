"""Printed PDFs: A4 pages, Chinese text, the case title, typeset math."""

from __future__ import annotations

import pytest

from tcplab.report import Case, build_report
from tcplab.report.pdf import ChromiumNotFound, html_to_pdf

from .conftest import OK_NOTEBOOK, pdf_info, pdf_text


def test_case_pdf_has_pages_title_chinese_and_typeset_math(built, pdf_tools):
    pdf = built[0]["alpha"].outputs["pdf"]
    info = pdf_info(pdf)
    assert int(info["Pages"]) >= 1 and "A4" in info["Page size"]
    text = pdf_text(pdf)
    assert "Fixture case: slow start" in text
    assert "中文内容显示正常" in text and "拥塞窗口" in text
    assert "round-trip time" in text and "pass" in text
    # Had KaTeX not run, the TeX source would be printed as is.
    assert "\\frac" not in text and "\\text{" not in text and "$$" not in text


def test_failed_case_still_gets_a_pdf(built, pdf_tools):
    text = pdf_text(built[0]["broken"].outputs["pdf"])
    assert "RuntimeError: fixture failure on purpose" in text


def test_missing_chromium_is_a_clear_error(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<p>x</p>")
    with pytest.raises(ChromiumNotFound, match="chromium"):
        html_to_pdf(page, tmp_path / "p.pdf", chromium=tmp_path / "no-chromium")


def test_missing_chromium_stops_a_build_before_anything_runs(tmp_path):
    with pytest.raises(ChromiumNotFound):
        build_report([Case("alpha", notebook=OK_NOTEBOOK)],
                     reports_dir=tmp_path / "r", chromium=tmp_path / "no-chromium",
                     progress=False)
    assert not (tmp_path / "r").exists()


def test_missing_html_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        html_to_pdf(tmp_path / "none.html", tmp_path / "none.pdf")
