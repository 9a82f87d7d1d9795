"""Case pages: code hidden, self-contained, readable in Chinese, math typeset locally."""

from __future__ import annotations

import re

import nbformat
import pytest

from tcplab.report.context import ReportContext
from tcplab.report.html import render_case_page
from tcplab.report.offline import find_remote_references

REMOTE_SCRIPT = re.compile(r"""<script[^>]*\ssrc=["']?(?:https?:)?//""", re.IGNORECASE)
REMOTE_LINK = re.compile(r"""<link[^>]*\shref=["']?(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def alpha_html(built) -> str:
    result, _ = built
    return result["alpha"].outputs["html"].read_text(encoding="utf-8")


def test_code_is_hidden(alpha_html):
    for source in ("import seaborn", "sns.lineplot", "from tcplab.report.scores import",
                   'print("PARAM', 'case_id = "alpha"', 'backend = "delayline"'):
        assert source not in alpha_html
    assert "jp-InputArea-editor" not in alpha_html and "In&nbsp;[" not in alpha_html


def test_nothing_is_fetched_from_the_network(built):
    result, reports = built
    for page in [*reports.glob("*.html")]:
        html = page.read_text(encoding="utf-8")
        assert not REMOTE_SCRIPT.search(html), page.name
        assert not REMOTE_LINK.search(html), page.name
        assert find_remote_references(html) == [], page.name
        for cdn in ("cdnjs", "unpkg", "jsdelivr", "require.js", "mathjax"):
            assert cdn not in html.lower(), (page.name, cdn)


def test_outputs_scores_and_chinese_text_are_in_the_page(alpha_html):
    assert 'class="tcplab-scores"' in alpha_html
    assert "round-trip time" in alpha_html and "3 of 3 checks passed" in alpha_html
    assert "中文内容显示正常" in alpha_html          # markdown, as characters not entities
    assert "拥塞窗口每个往返时间翻倍" in alpha_html    # printed output
    assert re.search(r'<img [^>]*src="data:image/png;base64,', alpha_html), "the seaborn plot"
    # The figure in words, for a reader who cannot see it (plots.describe, via the kernel).
    assert re.search(r'<img [^>]*alt="cwnd per round trip: cwnd against round"', alpha_html)
    assert "Noto Sans CJK SC" in alpha_html


def test_math_is_left_for_the_inlined_katex(alpha_html, built):
    assert r"$W_\text{max}" in alpha_html
    assert "renderMathInElement" in alpha_html and "data:font/woff2;base64," in alpha_html
    broken = built[0]["broken"].outputs["html"].read_text(encoding="utf-8")
    assert "renderMathInElement" not in broken, "a page without math carries no KaTeX"


def test_page_is_a4_with_running_header_and_footer(alpha_html):
    assert "size: A4" in alpha_html
    assert re.search(r'@bottom-left \{ content: "Linux [^"]*backend: delay line', alpha_html)
    assert '@top-left { content: "Fixture case: slow start"' in alpha_html
    assert 'counter(page) " of " counter(pages)' in alpha_html


def test_instructor_edition_keeps_answers(alpha_html):
    assert "ANSWER-MARKER" in alpha_html and "PREDICTION-MARKER" in alpha_html


def test_failed_case_page_says_why(built):
    html = built[0]["broken"].outputs["html"].read_text(encoding="utf-8")
    assert "This case did not run to the end" in html
    assert "RuntimeError: fixture failure on purpose" in html
    assert "before the failure" in html
    # It published no backend; the one it was asked to use labels its pages.
    assert "backend: delay line" in html


def test_remote_references_in_outputs_are_removed(tmp_path):
    v = nbformat.v4
    cell = v.new_code_cell("show()")
    cell.outputs = [v.new_output("display_data", data={
        "text/html": '<script src="https://cdn.example.org/plot.js"></script><div>plot 图</div>',
        "text/plain": "plot"})]
    nb = v.new_notebook(cells=[v.new_markdown_cell("# T\n\n![logo](https://example.org/l.png)"), cell])
    html = render_case_page(nb, context=ReportContext(), case_id="t", base_dir=tmp_path)
    assert find_remote_references(html) == []
    assert "plot 图" in html and "cdn.example.org" not in html
    assert 'data-offline-removed="https://example.org/l.png"' in html


def test_a_notebooks_own_title_leaves_out_the_case_number_pages_add():
    """A case that fails before publishing its title is named by its first heading; the handout
    puts the case's number before every title, so the heading's own "01 · " must not come too."""
    from tcplab.report.html import notebook_title

    for heading, title in (("# 01 · The send buffer and the round trip", "The send buffer and the round trip"),
                           ("# 05 · 零窗口：当读取方不再读取", "零窗口：当读取方不再读取"),
                           ("# A title without a number", "A title without a number")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(heading + "\n\nText.")])
        assert notebook_title(nb, "fallback") == title
