"""The whole pipeline: per-case files, the handout, failures that stay contained, editions."""

from __future__ import annotations

import re

import pytest

from tcplab.report import Case, build_report, render_only

from .conftest import pdf_text

CASES = ("alpha", "broken", "beta")


def test_each_case_has_a_status_and_its_files(built):
    result, reports = built
    assert [c.status for c in result.cases] == ["passed", "error", "passed"]
    assert not result.all_passed and result.rendered_ok
    for case in result.cases:
        assert set(case.outputs) == {"ipynb", "html", "pdf"}, case.case_id
        assert all(path.is_file() for path in case.outputs.values())
    assert result["alpha"].title == "Fixture case: slow start"
    assert result["broken"].title == "Failing fixture 失败的案例"
    assert (reports / "handout.html").is_file() and (reports / "handout.pdf").is_file()
    assert "broken" in result.summary() and "RuntimeError" in result.summary()


def test_handout_has_cover_summary_and_a_section_per_case(built):
    result, _ = built
    html = result.handout["html"].read_text(encoding="utf-8")
    for case_id in CASES:
        assert f'<section class="tcplab-case tcplab-case-' in html
        assert re.search(rf'<section [^>]*id="case-{case_id}"', html), case_id
        assert re.search(rf'<tr class="case-row" data-case="{case_id}"', html), case_id
        assert f'href="#case-{case_id}"' in html
    assert "RuntimeError: fixture failure on purpose" in html
    assert "1 of 3 cases did not pass." in html
    assert "quick" in html and "delay line" in html  # profile and backend on the cover
    # Two copies of one notebook must not share heading ids.
    assert html.count('id="case-alpha--Fixture-case') == 1
    assert html.count('id="case-beta--Fixture-case') == 1


def test_handout_pdf_pages_carry_environment_and_each_case_starts_a_page(built, pdf_tools):
    result, _ = built
    pages = [p for p in pdf_text(result.handout["pdf"]).split("\f") if p.strip()]
    assert len(pages) >= 5
    for number, page in enumerate(pages, 1):
        assert "backend: delay line" in page and "mode: live" in page, number
        assert f"page {number} of {len(pages)}" in page, number
    # pdftotext puts spaces between Latin and CJK runs; compare without any.
    first_lines = [re.sub(r"\s+", "", next(ln for ln in p.splitlines() if ln.strip()))
                   for p in pages]
    for index, title in enumerate(["Fixture case: slow start", "Failing fixture 失败的案例",
                                   "Fixture case: slow start"], 1):
        # The running header of a case section names that case.
        header = re.sub(r"\s+", "", f"Case {index} · {title}")
        assert any(ln.startswith(header) for ln in first_lines), index
    text = "\n".join(pages)
    assert "did not run" in text and "TCP bottlenecks on a real Linux kernel" in text


@pytest.fixture(scope="module")
def student(built, tmp_path_factory):
    _, reports = built
    before = {p.name: p.stat().st_mtime_ns for p in reports.glob("*.ipynb")}
    out = tmp_path_factory.mktemp("student")
    result = render_only(list(CASES), reports_dir=reports, output_dir=out, edition="student",
                         formats=("html",), progress=False)
    after = {p.name: p.stat().st_mtime_ns for p in reports.glob("*.ipynb")}
    assert before == after, "render_only must not execute anything"
    return result, out


def test_render_only_student_edition_drops_answers(student, built):
    result, out = student
    assert [c.status for c in result.cases] == ["passed", "error", "passed"]
    assert result["broken"].error == "RuntimeError: fixture failure on purpose"
    assert not list(out.glob("*.pdf"))
    for page in (out / "alpha.html", out / "handout.html"):
        html = page.read_text(encoding="utf-8")
        assert "ANSWER-MARKER" not in html and "PREDICTION-MARKER" not in html
        assert "student edition" in html and "中文内容显示正常" in html
    instructor = built[0].handout["html"].read_text(encoding="utf-8")
    assert "ANSWER-MARKER" in instructor


def test_render_only_reports_a_case_that_never_ran(built, tmp_path):
    _, reports = built
    result = render_only(["alpha", "ghost"], reports_dir=reports, output_dir=tmp_path,
                         formats=("html",), progress=False)
    ghost = result["ghost"]
    assert ghost.status == "error" and "no executed notebook" in ghost.error
    assert "html" in ghost.outputs and result["alpha"].status == "passed"


def test_pdf_only_keeps_no_html(built, tmp_path, pdf_tools):
    _, reports = built
    result = render_only(["alpha"], reports_dir=reports, output_dir=tmp_path, formats=("pdf",),
                         progress=False)
    assert set(result["alpha"].outputs) == {"ipynb", "pdf"} and set(result.handout) == {"pdf"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alpha.pdf", "handout.pdf"]


def test_bad_arguments_are_refused_early(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        render_only(["a", "a"], reports_dir=tmp_path, formats=("html",), progress=False)
    with pytest.raises(ValueError, match="formats"):
        render_only(["a"], reports_dir=tmp_path, formats=("docx",), progress=False)
    with pytest.raises(ValueError, match="edition"):
        build_report([Case("a")], reports_dir=tmp_path,
                     edition="teacher", formats=("html",), progress=False)


@pytest.mark.parametrize("statuses, none_failed, busy", [
    (["passed", "busy"], True, ["c1"]), (["passed", "passed"], True, []), (["busy", "failed"], False, ["c0"]),
    (["passed", "error"], False, []), ([], False, [])])
def test_a_busy_case_is_not_a_failure_and_is_named(statuses, none_failed, busy):
    from tcplab.report import CaseReport, ReportContext, ReportResult

    result = ReportResult([CaseReport(f"c{i}", "t", s) for i, s in enumerate(statuses)], ReportContext())
    assert result.none_failed is none_failed and result.busy == busy
    assert not result.all_passed or statuses == ["passed", "passed"]


def test_render_only_pages_say_how_their_numbers_were_made(built, tmp_path):
    """Rendered again, the pages keep the mode and profile of the run that executed the
    notebooks (its summary.json), not a default: replayed numbers never read "mode: live"."""
    import json
    import shutil

    _, reports = built
    executed = tmp_path / "executed"
    executed.mkdir()
    shutil.copy(reports / "alpha.ipynb", executed)
    (executed / "summary.json").write_text(json.dumps({"mode": "replay", "profile": "full"}))
    result = render_only(["alpha"], reports_dir=executed, output_dir=tmp_path / "out", formats=("html",), progress=False)
    page = (tmp_path / "out" / "handout.html").read_text(encoding="utf-8")
    assert "replay of recorded runs" in page and "full" in page and "mode: live" not in page
    assert result["alpha"].status == "passed"


def test_handout_contents_give_the_page_each_case_begins_on(built, pdf_tools):
    """The printed contents carry page numbers, and each is the page on which that case's
    running header first appears (two passes: print, read the pages, print again)."""
    result, _ = built
    pages = [p for p in pdf_text(result.handout["pdf"]).split("\f")]
    contents = next(p for p in pages if "Contents" in p)
    for index, title in enumerate(["Fixture case: slow start", "Failing fixture 失败的案例", "Fixture case: slow start"], 1):
        header = re.sub(r"\s+", "", f"Case {index} · {title}")
        begins = next(n for n, p in enumerate(pages, 1)
                      if re.sub(r"\s+", "", next((ln for ln in p.splitlines() if ln.strip()), "")).startswith(header))
        line = next(ln for ln in contents.splitlines() if re.sub(r"\s+", "", ln).startswith(re.sub(r"\s+", "", f"{index} · {title}")))
        assert line.split()[-1] == str(begins), (line, begins)
    # On screen there are no pages: the numbers are hidden there.
    assert ".tcplab-toc-page { display: none; }" in result.handout["html"].read_text(encoding="utf-8")
