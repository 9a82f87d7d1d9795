"""The course's pages that no run produces: the references and the cheat sheet."""

from __future__ import annotations

import re

from tcplab.course import available_cases
from tcplab.report.context import ReportContext
from tcplab.report.course_pages import cheatsheet_rows, cited_by, read_references, render_cheatsheet
from tcplab.report.handout import CaseSection, render_handout
from tcplab.words import messages

#: What the references page must hold (issue: standards, papers and manuals the cases use).
MUST_CITE = {"RFC9293", "RFC7323", "RFC5681", "RFC896", "Minshall", "Mathis1997", "BBR2016", "tcp.7", "ss.8"}


def test_every_case_cites_its_references_and_every_reference_names_real_cases():
    references = read_references()
    ids = [r.id for r in references]
    assert len(ids) == len(set(ids)) and MUST_CITE <= set(ids)
    cases = set(available_cases())
    for r in references:
        assert r.cases and set(r.cases) <= cases, r.id
        assert r.url is None or re.match(r"https?://\S+$", r.url), r.id
    for case in cases - {"00-path-check"}:
        assert any(r.kind == "seed" for r in cited_by(references, case)), case  # each retells a seed


def test_a_chinese_page_cites_every_work_in_chinese_but_its_title():
    """Seeds by their original title; a work whose English citation describes it (a manual's
    summary, a note in brackets) by a translation; a bare title as written."""
    for r in read_references():
        cite = r.cite_in("zh")
        described = r.kind in {"seed", "manual", "source", "article"} or re.search(r"\([^)]*[a-z]{3}[^)]*\)", r.cite)
        assert (cite != r.cite) == bool(described), r.id
        assert r.cite_in("en") == r.cite
        if described:
            told = re.findall(r"（([^）]*)）", cite) + cite.split("：")[1:]  # what the citation says of the work
            assert re.search(r"[\u4e00-\u9fff]", cite) and not re.search(r"\b(?:the|and|of)\b", " ".join(told)), r.id


def test_the_cheat_sheet_has_a_row_per_case_with_every_column():
    rows = cheatsheet_rows(messages("en"), available_cases())
    assert [r.case_id for r in rows] == available_cases()
    assert all(len(r.cells) == 4 and all(c.strip() for c in r.cells) for r in rows)
    page = render_cheatsheet(available_cases(), context=ReportContext())
    assert "A4 landscape" in page and page.count("<tr data-case=") == len(rows)
    assert "zero-window probes" in page  # a cell's words, escaped once


def test_the_handout_lists_each_cases_references_and_ends_with_the_page():
    references = read_references()
    sections = [CaseSection("04-nagle-delayed-ack", "Nagle meets delayed ACK", "passed")]
    html = render_handout(sections, context=ReportContext(), references=references)
    assert 'id="references"' in html and 'href="#ref-RFC896"' in html and 'id="ref-RFC896"' in html
    assert "Case 04 · Nagle meets delayed ACK" in html  # the course's own number, not the place in the handout
    assert html.index("Cheat sheet") < html.index("Nagle meets delayed ACK · ")


def test_the_student_summary_gives_away_no_check():
    """The student edition's summary, at the front of the handout, tells how many checks of a case
    passed, not what any check predicted, measured or ruled: each case's worksheet asks for them."""
    from tcplab.report.scores import Scores, within

    scores = Scores("04-nagle-delayed-ack", "Nagle", "delayline", "replay",
                    [within("stall", 41.5, 43.0, tolerance=0.25, unit="ms")])
    sections = [CaseSection("04-nagle-delayed-ack", "Nagle", "passed", scores=[scores])]
    student = render_handout(sections, context=ReportContext(edition="student"))
    instructor = render_handout(sections, context=ReportContext(edition="instructor"))
    assert "Predicted" in instructor and "41.5" in instructor and "43" in instructor and "stall" in instructor
    summary = student[student.index('class="tcplab-summary"'):student.index("</table>", student.index('class="tcplab-summary"'))]
    assert "Nagle" in summary and "1 of 1" in summary
    assert not [word for word in ("Predicted", "Measured", "41.5", "43", "stall", "check-row") if word in summary]


def test_the_cheat_sheet_writes_commands_and_kernel_names_as_code_in_both_languages():
    """Issue 17: a cell's `backticked` fragments (a command, a sysctl, an ss field) are <code>, so
    a zh reader does not take them for English left untranslated; the zh page has no Latin word
    outside code and the allowed names and units."""
    from tcplab.report.templating import code_spans

    from .test_i18n import latin_words

    assert str(code_spans("a <b> `x<y` and `ss -tinm`")) == "a &lt;b&gt; <code>x&lt;y</code> and <code>ss -tinm</code>"
    assert str(code_spans("an odd ` tick")) == "an odd ` tick"
    pages = {lang: render_cheatsheet(available_cases(), context=ReportContext(language=lang)) for lang in ("en", "zh")}
    for lang, page in pages.items():
        assert "`" not in page, lang
        for fragment in ("ping", "SO_SNDBUF", "ip route ... initcwnd", "curl --limit-rate", "ss -tinm"):
            assert f"<code>{fragment}</code>" in page, (lang, fragment)
    assert pages["en"].count("<code>") == pages["zh"].count("<code>")
    assert latin_words(pages["zh"]) == []
