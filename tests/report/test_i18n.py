"""Translations beside their English source (tcplab.i18n, ``tcplab i18n``) and pages rendered
in Chinese: a translation goes stale when its English changes, a page takes only fresh ones,
the committed zh files are in step with the English, and a replayed zh report is Chinese
where the course's words are (prose, bound sentences, the pages' own words)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tcplab import i18n
from tcplab.commands import main as tcplab
from tcplab.course import ROOT, room
from tcplab.report import prose
from tcplab.units import ParameterError
from tcplab.params import check_language
from tcplab.words import Messages, all_words, languages

CASE = "00-path-check"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def course_copy(tmp_path) -> Path:
    """A course of one case, its room copied with its committed zh translation, to change at will."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "course.toml").write_text(f'cases = ["{CASE}"]\n')
    shutil.copytree(room(CASE).folder, folder / CASE)
    return folder


def _first_markdown(nb) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "markdown")


def _check(course_dir: Path, *extra: str) -> int:
    return tcplab(["i18n", "check", "--language", "zh", "--course-dir", str(course_dir), *extra])


def test_a_changed_english_cell_makes_its_translation_stale(course_copy, capsys):
    report = i18n.check("zh", course_dir=course_copy)
    [case] = report.cases
    assert (case.case_id, case.stale, case.orphan, case.missing) == (CASE, [], [], [])
    assert _check(course_copy) == 0

    path = course_copy / CASE / f"{CASE}.ipynb"
    nb = nbformat.read(path, as_version=4)
    changed = _first_markdown(nb)
    changed.source += "\n\nOne more English sentence."
    nbformat.write(nb, path)
    [case] = i18n.check("zh", course_dir=course_copy).cases
    assert case.stale == [changed.id] and case.translated == case.total - 1
    capsys.readouterr()
    assert _check(course_copy) == 1
    assert f"stale (1): {changed.id}" in capsys.readouterr().out
    # The page keeps the English of a stale cell rather than an outdated translation.
    shown = i18n.translate_notebook(nb, "zh", case_id=CASE, course_dir=course_copy)
    assert _first_markdown(shown).source == changed.source

    # The translator is shown the new English, revises, and accepts: fresh again.
    assert tcplab(["i18n", "stub", "--language", "zh", "--course-dir", str(course_copy), "00"]) == 0
    entry = i18n.read_translation(CASE, "zh", course_copy).cells[changed.id]
    assert entry["english"] == changed.source and entry["text"]
    assert _check(course_copy) == 1
    assert tcplab(["i18n", "accept", "--language", "zh", "--course-dir", str(course_copy), "00",
                   "--cell", changed.id]) == 0
    assert "english" not in i18n.read_translation(CASE, "zh", course_copy).cells[changed.id]
    assert _check(course_copy) == 0


def test_missing_and_orphaned_cells(course_copy):
    path = course_copy / CASE / f"{CASE}.ipynb"
    nb = nbformat.read(path, as_version=4)
    added = nbformat.v4.new_markdown_cell("## A new section\n\nNot translated yet.")
    nb.cells.append(added)
    gone = _first_markdown(nb)
    nb.cells.remove(gone)
    nbformat.write(nb, path)
    [case] = i18n.check("zh", course_dir=course_copy).cases
    assert case.missing == [added.id] and case.orphan == [gone.id] and case.stale == []
    assert _check(course_copy) == 1  # an orphan fails

    translation = i18n.read_translation(CASE, "zh", course_copy)
    del translation.cells[gone.id]
    i18n.write_translation(translation, course_copy)
    assert _check(course_copy) == 0  # missing ones are reported ...
    assert _check(course_copy, "--strict") == 1  # ... and fail only when strict

    # A stub gives the translator the English; it stays untranslated until its text is written.
    path, added_entries = i18n.stub(CASE, "zh", course_copy)
    entry = i18n.read_translation(CASE, "zh", course_copy).cells[added.id]
    assert added_entries == 1 and entry == {"source_sha256": i18n.source_sha256(added.source), "text": None,
                                            "english": added.source}
    [case] = i18n.check("zh", course_dir=course_copy).cases
    assert case.missing == [added.id]
    assert i18n.translate_notebook(nb, "zh", case_id=CASE, course_dir=course_copy).cells[-1].source == added.source


def test_a_translated_notebook_replaces_exactly_the_fresh_markdown_cells():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Fresh", id="fresh"),
        nbformat.v4.new_markdown_cell("Changed since", id="stale"),
        nbformat.v4.new_markdown_cell("Never translated", id="untranslated"),
        nbformat.v4.new_code_cell("x = 1  # code is never translated", id="code"),
        nbformat.v4.new_markdown_cell("A stub", id="stub"),
    ])
    before = json.loads(nbformat.writes(nb))
    translation = i18n.Translation("zh", "99-test", cells={
        "fresh": {"source_sha256": i18n.source_sha256("# Fresh"), "text": "# 新的"},
        "stale": {"source_sha256": i18n.source_sha256("As it was"), "text": "旧的"},
        "code": {"source_sha256": i18n.source_sha256("x = 1  # code is never translated"), "text": "x = 2"},
        "stub": {"source_sha256": i18n.source_sha256("A stub"), "text": None, "english": "A stub"},
    })
    shown = i18n.translate_notebook(nb, "zh", translation=translation)
    assert [c.source for c in shown.cells] == ["# 新的", "Changed since", "Never translated",
                                               "x = 1  # code is never translated", "A stub"]
    assert [c.metadata for c in shown.cells] == [c.metadata for c in nb.cells]
    assert json.loads(nbformat.writes(nb)) == before  # a copy; the notebook itself is untouched
    assert i18n.translate_notebook(nb, "en", translation=translation).cells[0].source == "# Fresh"
    titled = i18n.Translation("zh", "x", title={"english": "Zero window", "text": "零窗口"})
    assert i18n.translated_title("Zero window", titled) == "零窗口"
    assert i18n.translated_title("Zero windows", titled) == "Zero windows"  # another title: English


def test_the_strings_check_finds_missing_extra_stale_and_broken_keys(tmp_path):
    english = {"a": "plain", "b": "{n} of {total}", "c": "only English", "d": "changed later"}
    (tmp_path / "en.json").write_text(json.dumps(english))
    (tmp_path / "xx.json").write_text(json.dumps({"a": "平", "b": "{n} / {all}", "d": "后来", "old": "旧"}))
    i18n.accept_strings("xx", strings_dir=tmp_path)
    assert json.loads(i18n.sources_path("xx", tmp_path).read_text()) == {
        k: i18n.source_sha256(english[k]) for k in ("a", "b", "d")}
    english["d"] = "changed since it was translated"
    (tmp_path / "en.json").write_text(json.dumps(english))
    found = i18n.check_strings("xx", tmp_path)
    assert (found.missing, found.extra, found.stale, found.placeholders) == (["c"], ["old"], ["d"], ["b"])
    assert found.translated == 2 and found.total == 4
    i18n.accept_strings("xx", ["d"], strings_dir=tmp_path)
    assert i18n.check_strings("xx", tmp_path).stale == []
    with pytest.raises(ParameterError):
        i18n.accept_strings("xx", ["c"], strings_dir=tmp_path)


def test_accepting_named_keys_touches_only_the_folders_that_hold_them(tmp_path, monkeypatch):
    shared, room = tmp_path / "strings", tmp_path / "room"
    for folder, key in ((shared, "shared.key"), (room, "room.key")):
        folder.mkdir()
        (folder / "en.json").write_text(json.dumps({key: "English"}))
        (folder / "zh.json").write_text(json.dumps({key: "中文"}, ensure_ascii=False))
    # a sidecar written by hand (another layout, a stale hash): left byte for byte as it was
    untouched = '{"shared.key": "0000"}'
    i18n.sources_path("zh", shared).write_text(untouched)
    monkeypatch.setattr(i18n, "words_dirs", lambda: [shared, room])
    assert i18n.accept_strings("zh", ["room.key"]) == ["room.key"]
    assert i18n.sources_path("zh", shared).read_text() == untouched
    assert json.loads(i18n.sources_path("zh", room).read_text()) == {"room.key": i18n.source_sha256("English")}


def test_the_sidecar_is_no_language():
    assert "zh" in languages() and not any("." in lang for lang in languages())
    assert i18n.translation_languages() == [lang for lang in languages() if lang != "en"]
    with pytest.raises(ParameterError) as refused:
        check_language("zh.sources")
    assert "is not accepted" in str(refused.value)  # said in English: the sidecar holds no words
    assert Messages("zh.sources")("status.passed") == "passed"
    with pytest.raises(ParameterError):
        i18n.check("en")


def test_the_committed_zh_translations_are_in_step_with_the_english():
    report = i18n.check("zh")
    stale = {c.case_id: c.stale for c in report.cases if c.stale}
    orphan = {c.case_id: c.orphan or c.error for c in report.cases if c.orphan or c.error}
    assert report.n_stale == 0 and report.n_orphan == 0, (stale, orphan, report.strings)
    # Every case is translated: a Markdown cell added or changed in English fails here until
    # its translation follows (tcplab i18n stub / accept).
    missing = {c.case_id: c.missing for c in report.cases if c.missing}
    assert not missing and all(c.translated > 0 for c in report.cases), missing
    assert report.ok(strict=True), report.strings  # every string too
    # The zh words (shared and each room's) are flat files words.py reads, with every key of the
    # English at the time of writing.
    zh = all_words("zh")
    assert all(isinstance(v, str) for v in zh.values()) and set(zh) == set(all_words("en"))
    assert Messages("zh")("language.tag") == "zh-CN" and Messages("en")("language.tag") == "en"


def test_make_report_lang_picks_the_language_not_the_locale():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    run = lambda *args: subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True,  # noqa: E731
                                       env={**os.environ, "LANG": "C.UTF-8"}).stdout
    assert "--language zh" in run("report", "LANG=zh") and "--language zh" in run("render", "LANG=zh")
    assert "--language" not in run("report")


# --- a report in Chinese, replayed ---------------------------------------------------------------------


def _report(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TCPLAB_LANG"}
    return subprocess.run([sys.executable, "-m", "tcplab.commands", "report", *args], capture_output=True,
                          text=True, timeout=600, env=env)


def _page_text(path: Path) -> str:
    import html

    text = html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8")))
    return " ".join(text.split())


#: The cases the zh report below renders (and renders again in English).
ZH_CASES = "00,05,07,10"


@pytest.fixture(scope="module")
def zh_report(tmp_path_factory):
    reports = tmp_path_factory.mktemp("zh")
    out = _report("--cases", ZH_CASES, "--mode", "replay", "--language", "zh", "--formats", "html,pdf",
                  "--reports-dir", str(reports))
    return out, reports


def test_a_replayed_report_renders_in_chinese(zh_report):
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((reports / "summary.json").read_text())
    assert summary["language"] == "zh" and all(c["status"] == "passed" for c in summary["cases"])
    for case, heading in (("00-path-check", "00 · 路径检查：模拟的线路是否符合我们的设定？"),
                          ("05-zero-window", "05 · 零窗口：当读取方不再读取")):
        page = (reports / f"{case}.html").read_text(encoding="utf-8")
        assert '<html lang="zh-CN"' in page and heading in page, case
        nb = nbformat.read(reports / f"{case}.ipynb", as_version=4)
        assert nb.metadata["tcplab"]["language"] == "zh"  # the kernel ran with TCPLAB_LANG=zh
        assert Messages("zh")("scores.caption") in page
    for name in ("handout", "cheatsheet"):
        page = (reports / f"{name}.html").read_text(encoding="utf-8")
        assert '<html lang="zh-CN"' in page and Messages("zh")("cheatsheet.title") in page
    handout = (reports / "handout.html").read_text(encoding="utf-8")
    assert "05 · 零窗口" in handout and Messages("zh")("handout.contents") in handout


def test_the_bound_sentences_on_a_zh_page_are_chinese(zh_report):
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    nb = nbformat.read(reports / "05-zero-window.ipynb", as_version=4)
    page = " ".join(_page_text(reports / "05-zero-window.html").split())
    said = prose.said_in(nb)
    assert said
    zh = Messages("zh")
    for sentence in said:
        fields = {k: f["text"] for k, f in sentence["fields"].items()}
        assert sentence["text"] == zh(sentence["key"], **fields) != Messages("en")(sentence["key"], **fields)
        assert CJK.search(sentence["text"])
        assert " ".join(sentence["text"].replace("`", " ").split()) in page, sentence["text"]


def test_a_zh_run_renders_again_in_english(zh_report, tmp_path):
    """Rendering the zh run in English: the same checks, English prose, and the bound sentences
    written again in English from the values the notebook keeps."""
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    again = _report("--render-only", "--cases", ZH_CASES, "--language", "en", "--formats", "html",
                    "--reports-dir", str(reports), "--output-dir", str(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    checks = lambda d: [(c["case_id"], [(x["name"], x["measured"], x["passed"]) for x in c["checks"]])  # noqa: E731
                        for c in json.loads((d / "summary.json").read_text())["cases"]]
    assert checks(tmp_path) == checks(reports)
    page = (tmp_path / "05-zero-window.html").read_text(encoding="utf-8")
    assert '<html lang="en"' in page and "05 · Zero window: when the reader stops reading" in page
    text = _page_text(tmp_path / "05-zero-window.html")
    nb = nbformat.read(reports / "05-zero-window.ipynb", as_version=4)
    for sentence in prose.said_in(nb):
        english = Messages("en")(sentence["key"], **{k: f["text"] for k, f in sentence["fields"].items()})
        assert " ".join(english.replace("`", " ").split()) in text


def test_the_kernel_environment_is_set_for_the_run_and_restored(monkeypatch):
    from tcplab.report.execute import _kernel_environment

    monkeypatch.delenv("TCPLAB_LANG", raising=False)
    with _kernel_environment({"TCPLAB_LANG": "zh"}):
        assert os.environ["TCPLAB_LANG"] == "zh" and Messages().language == "zh"
    assert "TCPLAB_LANG" not in os.environ
    monkeypatch.setenv("TCPLAB_LANG", "en")
    with _kernel_environment({"TCPLAB_LANG": "zh"}):
        pass
    assert os.environ["TCPLAB_LANG"] == "en"


# --- no English left on a zh page ----------------------------------------------------------------------

#: Latin words a zh page may show outside code: units, kernel and tool names, ss and capture
#: fields, the names of algorithms and people; words with a digit or an underscore (tcp_rmem,
#: SO_SNDBUF, a kernel's version), in capitals (TCP, RTT, ACK) or hyphenated (a variant's label
#: such as split-nagle) are names or codes too.
LATIN_ALLOWED = set("""
    s ms us sec B KB MB GB KiB MiB Kbit kbit Mbit Gbit mbit gbit bit bytes pages p
    Linux Wireshark JupyterLab Jupyter Python Go Redis Nginx MySQL InfoQ Cloudflare UML max
    ss tcpdump ping curl libcurl tc netem tbf fq veth sysctl nstat ip getsockopt setsockopt send recv writev
    bbr cubic reno Reno Nagle Minshall Mathis Cheshire Stuart Semke Mahdavi Ott Jacobson Karels
    cwnd ssthresh rtt srtt minrtt rttvar rto ato mss advmss rcvmss pmtu wscale skmem tb rb r w t f o bl d
    unacked retrans notsent pacing delivery busy rwnd sndbuf rcvbuf delayline netns fc
    host auto quick full instructor student delayline seq len ack una
    rtt jitter loss rate backend mtu cc autotuned unset control x
    tcplab doctor diagnose report grade replay Window Full ZeroWindow
""".split())
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.'’-]*")
#: Where a page is not the course's words: code, maths, and the references page, which cites
#: every work by its title in the language it was written in.
NOT_PROSE = {"code", "pre", "kbd", "samp", "script", "style", "svg", "math"}
NOT_PROSE_CLASSES = {"katex", "katex-display", "tcplab-references-page"}
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$|\\\(.+?\\\)|\\\[.+?\\\]", re.S)
QUOTED = re.compile(r"《[^》]*》|\"[^\"]*\"|“[^”]*”")
GLOSS = re.compile(r"（[A-Za-z][^（）\u4e00-\u9fff]*）")
MATH_TEXT = re.compile(r"\\(?:text|mathrm|textrm|operatorname)\{([^{}]*)\}")


def latin_words(page: str) -> list[str]:
    """The Latin words of an HTML page that are not code, maths, a name or a unit."""
    from html.parser import HTMLParser

    class Words(HTMLParser):
        def __init__(self):
            super().__init__()
            self.open, self.hidden, self.found = [], 0, []

        def handle_starttag(self, tag, attrs):
            if tag in ("br", "img", "meta", "link", "hr", "input", "col", "wbr", "source", "area", "base"):
                return
            hide = tag in NOT_PROSE or bool(NOT_PROSE_CLASSES & set((dict(attrs).get("class") or "").split()))
            self.open.append((tag, hide))
            self.hidden += hide

        def handle_endtag(self, tag):
            while self.open:  # an unclosed <p> or <li> closes with its parent
                name, hide = self.open.pop()
                self.hidden -= hide
                if name == tag:
                    break

        def handle_data(self, data):
            if not self.hidden:
                # Maths is read by KaTeX on the page: only its \\text{…} is words.
                prose = MATH.sub(lambda m: " ".join(MATH_TEXT.findall(m.group(0))), data)
                prose = QUOTED.sub(" ", prose)  # a seed's title, a tool's words, quoted as written
                prose = GLOSS.sub(" ", prose)  # 接收窗口（receive window）: the English term beside ours
                self.found += [w.rstrip(".'’") for w in LATIN_WORD.findall(prose)]

    parser = Words()
    parser.feed(page)
    return [w for w in parser.found
            if w and w not in LATIN_ALLOWED and not w.isupper() and "-" not in w and "_" not in w
            and not any(ch.isdigit() for ch in w) and not any(ch.isupper() for ch in w[1:])]


def test_latin_words_are_counted_outside_code_names_and_units():
    page = ('<p>窗口 <code>tcp_rmem</code> 20 ms，TCP 与 cubic、split-nagle、6.18.44 的 the window</p>'
            r'<p>$$\text{吞吐量} \le \frac{B_\text{usable}}{\text{RTT}}, \qquad x$$ 与 $\sqrt{p}$</p>'
            '<pre>print("hello world")</pre><section class="tcplab-references-page"><p>RFC 9293, Transmission '
            'Control Protocol</p></section><p>still English')
    page += '<p>零窗口（zero window）、"TCP ZeroWindow"、“connection reset by peer”、TcpExtTCPToZeroWindowAdv</p>'
    assert latin_words(page) == ["the", "window", "usable", "still", "English"]


#: English words a zh page may still show outside the allow-list, per page: table cells and rule
#: texts that a notebook's code writes in its own words (see docs/translating.md).
LATIN_LIMIT = {"00-path-check.html": 3, "05-zero-window.html": 2, "07-window-scaling.html": 2,
               "10-rate-limiting.html": 1, "handout.html": 5, "cheatsheet.html": 0}


def test_a_zh_page_has_almost_no_english_outside_code_names_and_units(zh_report):
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    found = {name: latin_words((reports / name).read_text(encoding="utf-8")) for name in LATIN_LIMIT}
    over = {name: sorted(set(words)) for name, words in found.items() if len(words) > LATIN_LIMIT[name]}
    assert not over, ({name: len(words) for name, words in found.items()}, over)


def _pdf_fonts(path: Path) -> list[dict[str, str]]:
    lines = subprocess.run(["pdffonts", str(path)], check=True, capture_output=True, text=True).stdout.splitlines()
    header, rule = lines[0], lines[1]
    # Columns are as wide as the dashes under their names; a name may contain spaces ("Type 3").
    spans, start = [], 0
    for dashes in rule.split(" "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 1
    names = [header[a:b].strip() for a, b in spans]
    return [{n: line[a:b].strip() for n, (a, b) in zip(names, spans)} for line in lines[2:]]


@pytest.mark.skipif(shutil.which("pdffonts") is None, reason="pdffonts (poppler-utils) is missing")
def test_a_zh_pdf_embeds_its_fonts_and_its_chinese_reads_back(zh_report):
    """Every font of a zh PDF is embedded with a ToUnicode map, and the Chinese text reads back
    from it: the glyphs are the Noto CJK font's, not boxes."""
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("05-zero-window.pdf", "handout.pdf"):
        fonts = _pdf_fonts(reports / name)
        assert fonts and all(f["emb"] == "yes" and f["uni"] == "yes" for f in fonts), (name, fonts)
        text = subprocess.run(["pdftotext", str(reports / name), "-"], check=True, capture_output=True,
                              text=True).stdout
        assert "零窗口" in text and "接收窗口" in text and "\ufffd" not in text, name


@pytest.mark.skipif(shutil.which("pdffonts") is None, reason="pdffonts (poppler-utils) is missing")
def test_a_zh_pdf_embeds_cjk_as_a_cid_font(zh_report):
    """Chinese text is printed in the Noto CJK font as a CID font with TrueType outlines, in
    body and bold weights; no glyph is drawn by a Type 3 procedure (what chromium makes of a
    font with CFF outlines)."""
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("05-zero-window.pdf", "handout.pdf"):
        fonts = _pdf_fonts(reports / name)
        assert not [f for f in fonts if f["type"] == "Type 3"], (name, fonts)
        cjk = {f["name"].split("+")[-1] for f in fonts if "CJK" in f["name"]}
        assert {"NotoSansCJKsc-Regular", "NotoSansCJKsc-Bold"} <= cjk, (name, fonts)
        assert all(f["type"] == "CID TrueType" for f in fonts if "CJK" in f["name"]), (name, fonts)


def test_the_seeds_are_cited_by_their_original_titles(zh_report, tmp_path):
    """Both languages cite a seed by its original Chinese title, with the address it gives for
    itself; a zh page cites it as a Chinese text does, without our English translation."""
    out, reports = zh_report
    assert out.returncode == 0, out.stderr[-3000:]
    zh = _page_text(reports / "handout.html")
    assert "阿里技术，《直击案发现场！TCP 10倍延迟的真相是？》（InfoQ）" in zh
    assert "plantegg，《就是要你懂TCP--TCP性能问题》" in zh and "Understanding TCP" not in zh
    assert "https://mp.weixin.qq.com/s/fKWJrDNSAZjLsyobolIQKw" in zh
    again = _report("--render-only", "--cases", ZH_CASES, "--language", "en", "--formats", "html",
                    "--reports-dir", str(reports), "--output-dir", str(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    en = _page_text(tmp_path / "handout.html")
    assert "plantegg, 就是要你懂TCP--TCP性能问题 (Understanding TCP: TCP performance problems)" in en
    assert "https://mp.weixin.qq.com/s/fKWJrDNSAZjLsyobolIQKw" in en
