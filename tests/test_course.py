"""The course end to end: every case notebook runs live under papermill with the quick
profile and its scored checks hold; the handout and PDFs have every case; the student
edition carries no answers; every case renders again from its shipped replay data."""

import contextlib
import html
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from tcplab import course
from tcplab.commands.common import EXIT_BUSY
from tcplab.lab import sysctl
from tcplab.lab.kernels import ModeChoice, choose_mode
from tcplab.lab.link import netem_available
from report.student_pages import code_names, footer, header, page_text, page_type, python_calls, read_pages
from tcplab.course import ROOT
from tcplab.report import prose
from tcplab.report.context import combine_kernels
from tcplab.report.exercises import NOT_RUN_TAG
from tcplab.report.glossary import read_glossary, undefined_jargon
from tcplab.report.offline import find_remote_references
from tcplab.report.scores import scores_in
from tcplab.units import ParameterError
from tcplab.words import Messages


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
    monkeypatch.setattr("tcplab.lab.kernels.host_can_run", lambda: (False, "not root"))
    monkeypatch.setattr("tcplab.lab.kernels.userns_can_run", lambda: (False, "user namespaces are not allowed"))
    monkeypatch.setattr("tcplab.lab.kernels.uml_can_run", lambda: (False, "no User-mode Linux kernel installed"))
    assert choose_mode("auto").mode == "replay"
    with pytest.raises(ParameterError, match="live mode impossible") as info:
        choose_mode("live", parameter="MODE")
    assert info.value.name == "MODE"
    monkeypatch.setattr("tcplab.lab.kernels.uml_can_run", lambda: (True, ""))
    choice = choose_mode("auto")
    assert (choice.mode, choice.kernel) == ("live", "uml") and "UML kernel" in choice.where and "not root" in choice.why
    monkeypatch.setattr("tcplab.lab.kernels.userns_can_run", lambda: (True, ""))
    choice = choose_mode("auto")  # without root, a user namespace on the host's kernel comes before UML
    assert (choice.mode, choice.kernel) == ("live", "userns") and "not root" in choice.why, choice
    monkeypatch.setattr("tcplab.lab.kernels.host_can_run", lambda: (True, ""))
    choice = choose_mode("auto")
    assert (choice.mode, choice.kernel) == ("live", "host") and "host kernel" in choice.where
    assert choose_mode("replay", "uml") == ModeChoice("replay", None, "as requested")


CASES = course.available_cases()
#: A case's pages and its shipped data must name it; everything else is in the notebooks.
REPORT_TIMEOUT_S = 60 * 60


def tcplab_report(*args: str, data_dir: Path | None = None,
                  timeout_s: float = REPORT_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``tcplab report`` with ``args``. Past ``timeout_s`` its whole process group (the report,
    its notebook kernel, the lab they started) is stopped as a user's Ctrl-C would stop it, so it
    cleans up after itself, and the test fails with what the report had printed so far."""
    env = dict(os.environ)
    if data_dir is not None:
        env["TCPLAB_DATA"] = str(data_dir)  # fresh runs, never the developer's recorded ones
    command = [sys.executable, "-m", "tcplab.commands", "report", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stdout = stderr = ""
            for sig, grace_s in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    stdout, stderr = process.communicate(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            pytest.fail(f"tcplab report ran past {timeout_s / 60:.0f} min and was stopped:\n"
                        f"{stdout[-4000:]}\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def read_summary(reports: Path, judged_elsewhere: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """summary.json, and per case that did not pass (nor has a status in ``judged_elsewhere``):
    its error, or each failed check with what it measured, predicted and allowed, and the case's
    machine reading. CI keeps only a failed test's message, and a check that fails on a machine
    once must be explainable from it."""
    summary = json.loads((reports / "summary.json").read_text())
    failed = {c["case_id"]: (c["error"] or [_failed_check(x) for x in c["checks"] if not x["passed"]],
                             c.get("machine"))
              for c in summary["cases"] if c["status"] not in ("passed", *judged_elsewhere)}
    return summary, failed


def _failed_check(check: dict) -> str:
    return (f"{check['name']}: measured {check.get('measured')!r}, predicted {check.get('predicted')!r}, "
            f"rule: {check.get('rule')}")


def assert_live_course_held(result: subprocess.CompletedProcess, reports: Path) -> dict:
    """A live course run: every case passed, or the machine was too busy to judge it (status
    "busy", exit 4: its runs stayed disturbed after reruns, and the page says which and why).
    That verdict is honest, not a pass: it is reported as a warning.

    A busy case whose checks all held still tested the case: it ran to the end, and every check
    held although the machine disturbed runs behind them. A busy case with a failed check tested
    nothing, since the machine may explain the failure; a run where more than half the cases were
    such fails. (CI on 2026-11-29, a VM whose hypervisor took 6–25 % of the CPU: 7 of 13 cases
    busy, every check of every case held.)"""
    summary, failed = read_summary(reports, judged_elsewhere=("busy",))
    busy = {c["case_id"]: c["machine"]["disturbed"] for c in summary["cases"] if c["status"] == "busy"}
    assert not failed and result.returncode == (EXIT_BUSY if busy else 0), (
        failed, result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    assert all(busy.values()), busy  # a busy case names its disturbed runs
    untested = {c["case_id"]: [_failed_check(x) for x in c["checks"] if not x["passed"]]
                for c in summary["cases"] if c["status"] == "busy" and not all(x["passed"] for x in c["checks"])}
    assert len(untested) <= len(summary["cases"]) // 2, (
        f"the machine was too busy to test the course: {untested}; disturbed runs: {busy}")
    if busy:
        warnings.warn(f"machine too busy, not judged: {busy}; of these, checks failed in {untested}")
    return summary


def pdf_pages(path: Path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


def answer_snippets(case: str, executed: Path | None = None) -> list[str]:
    """The longest run of plain words in each answer cell of a case notebook: text that
    markdown renders unchanged, so it can be looked for in the HTML. An answer written by code
    (a bound sentence) is its output in ``executed``, the notebook as the report ran it."""
    nb = nbformat.read(course.room(case).notebook, as_version=4)
    ran = {c.get("id"): c for c in nbformat.read(executed, as_version=4).cells} if executed else {}
    snippets = []
    for cell in nb.cells:
        if "answer" not in cell.metadata.get("tags", []):
            continue
        if cell.cell_type == "code":
            # A worked answer to an exercise a report skipped is unrun, its note in its place.
            if not executed or NOT_RUN_TAG in ran[cell.id].metadata.get("tags", []):
                continue
            text = " ".join(o.get("data", {}).get("text/plain", "") for o in ran[cell.id].get("outputs", []))
        else:
            text = cell.source
        snippets.append(max(re.findall(r"[A-Za-z][A-Za-z ,]{20,}", text), key=len, default=text)[:50].strip())
    return snippets


#: Most users' machines: Linux's stock buffer limits (this project's machine has 4 MB).
STOCK_LIMITS = {"net.core.wmem_max": 212992, "net.core.rmem_max": 212992}


@pytest.fixture(scope="module")
def live_report(root, tmp_path_factory):
    """The whole course, live, quick profile, instructor edition: what `make report` does, on
    a host with stock buffer limits (set through the guard, restored after): a case that
    needs more raises them for its own runs and says so.

    Without the exercises (``--exercises skip``), as the UML leg: their runs score nothing, and
    on 2026-11-29's CI machine the course with them took 22 of ``make test``'s 90 minutes, which
    it overran. Their cells run in replay (the course's replay tests, every released notebook
    in ``test_release``), and live in a learner's Run All in the browser (``tests/browser``)."""
    reports = tmp_path_factory.mktemp("reports")
    data = tmp_path_factory.mktemp("data")
    with sysctl.HostGuard(STOCK_LIMITS):
        result = tcplab_report("--cases", "all", "--profile", "quick", "--mode", "live", "--exercises", "skip",
                               "--reports-dir", str(reports), data_dir=data)
    return result, reports


def test_every_case_is_a_numbered_notebook_with_the_standard_parameters():
    assert len(CASES) >= 12, CASES  # the path check and the eleven bottleneck cases
    for case in CASES:
        nb = nbformat.read(course.room(case).notebook, as_version=4)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1, case
        for name in ("case_id", "mode", "profile", "fresh"):
            assert re.search(rf"^{name} = ", params[0].source, re.M), (case, name)
        assert f'case_id = "{case}"' in params[0].source
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{case} has outputs"
        assert answer_snippets(case), f"{case} has no answer cell"


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(REPORT_TIMEOUT_S)
def test_every_case_runs_live_and_its_checks_hold(live_report):
    result, reports = live_report
    summary = assert_live_course_held(result, reports)
    assert [c["case_id"] for c in summary["cases"]] == CASES
    assert all(c["checks"] for c in summary["cases"])
    # Cases 01 and 05 needed more than the stock limit for a variant, raised it for that run only.
    for case, key in (("01-send-buffer", "wmem_max"), ("05-zero-window", "rmem_max")):
        page = (reports / f"{case}.html").read_text()
        assert f"<code>net.core.{key}</code> was 212992 on this machine" in page, case
    assert summary["backend"] and ("netem" if netem_available() else "delayline") in summary["backend"]


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(REPORT_TIMEOUT_S)
def test_handout_and_pdfs_have_every_case(live_report, pdf_tools):
    _, reports = live_report
    html = (reports / "handout.html").read_text()
    body = html.split("<body", 1)[1].split("</body>")[0]
    # Offline: nothing the page loads comes from the network (links to read, as the references
    # page's, are not loaded).
    assert find_remote_references(html) == []
    assert re.search(r'<a href="https://www.rfc-editor.org/rfc/rfc9293">', body)  # the references page
    assert ("netem" if netem_available() else "delay line") in html
    for case in CASES:
        assert re.search(rf'<section [^>]*id="case-{case}"', html), case
        assert (reports / f"{case}.pdf").is_file() and pdf_pages(reports / f"{case}.pdf") >= 1, case
    assert pdf_pages(reports / "handout.pdf") >= len(CASES) + 2  # cover and summary, then the cases
    assert pdf_pages(reports / "cheatsheet.pdf") == 1  # a sheet to pin up
    text = subprocess.run(["pdftotext", str(reports / "handout.pdf"), "-"], capture_output=True,
                          text=True).stdout
    assert "Path check" in text and "kernel min_rtt" in text


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(REPORT_TIMEOUT_S)
def test_student_edition_has_no_answers(live_report, tmp_path):
    live, reports = live_report
    student = tmp_path / "student"
    out = subprocess.run([sys.executable, "-m", "tcplab.commands", "report", "--render-only", "--edition", "student",
                          "--formats", "html", "--reports-dir", str(reports), "--output-dir", str(student)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == live.returncode, out.stderr[-2000:]  # 4 where the machine was too busy
    # As words: a glossary term's link sits inside a snippet ("with <a>Window Full</a> marks").
    inline = re.compile(r"</?(?:a|span)\b[^>]*>")
    student_html = inline.sub("", (student / "handout.html").read_text())
    instructor_html = inline.sub("", (reports / "handout.html").read_text())
    assert "student edition" in student_html
    for case in CASES:
        for snippet in answer_snippets(case, reports / f"{case}.ipynb"):
            assert snippet and snippet in instructor_html and snippet not in student_html, (case, snippet)


@pytest.fixture
def pdf_tools():
    for tool in ("pdftotext", "pdfinfo"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            pytest.fail(f"{tool} is missing: apt-get install poppler-utils")


@pytest.mark.slow
def test_every_case_renders_from_its_shipped_replay_data(replay_report):
    out, reports = replay_report
    summary, failed = read_summary(reports)
    assert out.returncode == 0 and not failed, (failed, out.stderr[-3000:])
    html = (reports / "handout.html").read_text()
    assert "recorded earlier on Linux" in html and "replay of recorded runs" in html


def _page_text(path: Path) -> str:
    """A rendered page's words, as a reader sees them: no tags, one space between words."""
    # Inline tags (a glossary term's link, a span) sit inside words and before punctuation.
    text = re.sub(r"</?(?:a|span|em|strong|b|i)\b[^>]*>", "", path.read_text())
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return " ".join(text.split())


@pytest.mark.slow
def test_bound_sentences_on_the_pages_are_their_runs(replay_report):
    """Every sentence that states a run's numbers is on its page, each number written from the
    value the run produced (in the house units), and the sentence is its template filled with
    exactly those numbers: a page cannot state a measured number its run did not produce."""
    out, reports = replay_report
    assert out.returncode == 0, out.stderr[-3000:]
    t, said = Messages("en"), {}
    for case in CASES:
        nb = nbformat.read(reports / f"{case}.ipynb", as_version=4)
        page = _page_text(reports / f"{case}.html")
        for sentence in prose.said_in(nb):
            fields = sentence["fields"]
            for name, field in fields.items():
                if isinstance(field["value"], list):  # a list of the run's values
                    kind = prose.LIST_OF + field["kind"]
                    assert field["text"] == prose.written(field["value"], kind, "en"), (case, name, field)
                elif field["kind"] != "word":
                    assert field["text"] == prose.written(field["value"], field["kind"], "en"), (case, name, field)
            assert sentence["text"] == t(sentence["key"], **{k: f["text"] for k, f in fields.items()})
            # As the page shows it: Markdown's code marks and an instructor span's tags are no words.
            shown = re.sub(r"<[^>]+>", "", sentence["text"]).replace("`", " ")
            assert " ".join(shown.split()) in " ".join(page.split()), (case, sentence["text"])
            said.setdefault(case, []).append(sentence["key"])
    # The cases whose "What this kernel does differently" states this run's numbers.
    assert {"01-send-buffer", "02-receive-buffer", "03-bdp-sweep", "05-zero-window", "07-window-scaling"} <= set(said), said


@pytest.fixture(scope="module")
def student_report(replay_report, tmp_path_factory):
    """The student edition of the whole course, rendered once from the replayed notebooks: every
    case's page as HTML and PDF, the handout and the glossary."""
    out, reports = replay_report
    assert out.returncode == 0, out.stderr[-3000:]
    student = tmp_path_factory.mktemp("student")
    rendered = subprocess.run([sys.executable, "-m", "tcplab.commands", "report", "--render-only", "--edition", "student",
                               "--formats", "html,pdf", "--reports-dir", str(reports), "--output-dir", str(student)],
                              capture_output=True, text=True, timeout=900)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    return reports, student


@pytest.mark.slow
def test_every_case_asks_before_it_tells(student_report):
    """Each case page shows its worksheet before its theory, a box per prediction with room to
    write; the student edition leaves out what the exercises ask students to find out."""
    reports, student = student_report
    for case in CASES:
        for page in (reports / f"{case}.html", student / f"{case}.html"):
            text = page.read_text()
            box = text.find('class="tcplab-table tcplab-worksheet"')
            theory = min(i for i in (text.find("What theory predicts"), text.find("What we expect")) if i >= 0)
            assert 0 <= box < theory, (case, page)
            assert 'class="tcplab-answer"></td>' in text, (case, page)  # an empty box to write in
        assert ("What this kernel does differently" in (reports / f"{case}.html").read_text()) == (case != "00-path-check")
        assert "What this kernel does differently" not in (student / f"{case}.html").read_text(), case
        # In print the student's theory starts on the page after the box; the instructor's follows it.
        page_break = ".tcplab-worksheet-box { break-after: page; }"
        assert page_break in (student / f"{case}.html").read_text() and page_break not in (reports / f"{case}.html").read_text()


# --- the student's printed pages (issue 38) ------------------------------------------------------

#: The cases whose student edition prints on at most five A4 pages (11, a reference of every ss
#: field, prints on seven).
FIVE_PAGE_CASES = [case for case in CASES if case != "11-reading-ss"]


@pytest.mark.slow
def test_student_pages_print_at_ten_point_in_lines_a_reader_can_follow(student_report, pdf_tools):
    """Every student page prints its body at 10–11 pt (measured from the PDF's word boxes: a page
    chromium had to shrink to fit a wide table reads smaller), tables not below the 9 pt floor,
    and full lines of 70–90 characters; the cases a teacher hands out fit five A4 pages."""
    _, student = student_report
    for case in CASES:
        pdf = student / f"{case}.pdf"
        pages = [t for t in map(page_type, read_pages(pdf)) if t is not None]
        # chromium scales a whole print alike: its typical page is body text, a page of one
        # long table reads at the table's size, never below the floor.
        assert 10 <= statistics.median(page.body_pt for page in pages) <= 11, (case, [p.body_pt for p in pages])
        for number, page in enumerate(pages, 1):
            assert 8.95 <= page.body_pt <= 11, (case, number, page.body_pt)
            # Below 9 pt only a formula's indices (KaTeX) and the like.
            assert page.small_share <= 0.03, (case, number, page.small_share)
        lines = [n for page in pages for n in page.full_line_chars]
        assert lines and 70 <= statistics.median(lines) <= 90, (case, statistics.median(lines) if lines else None)
        if case in FIVE_PAGE_CASES:
            assert pdf_pages(pdf) <= 5, (case, pdf_pages(pdf))


@pytest.mark.slow
def test_the_prediction_sheet_ends_its_page(student_report, pdf_tools):
    """The worksheet's boxes and its "stop here" share a page that tells nothing of the theory:
    the answers are on the next sheet."""
    _, student = student_report
    for case in CASES:
        texts = subprocess.run(["pdftotext", "-layout", str(student / f"{case}.pdf"), "-"], capture_output=True,
                               text=True, check=True).stdout.split("\f")
        (sheet,) = [number for number, text in enumerate(texts) if "Stop here." in text]
        theory = next(number for number, text in enumerate(texts) if "What theory predicts" in text or "What we expect" in text)
        assert theory == sheet + 1, (case, sheet, theory)
        assert "Your prediction: the number" in texts[sheet], case


@pytest.mark.slow
def test_student_pages_name_no_variant_parameter_or_call(student_report):
    """A student page names a variant in words, never by its label in the run records
    (sndbuf-256KB-wmem_max-131071), and shows none of its notebook's variables (clamp_ok,
    ex1_rtts_ms) or calls (theory.nagle_stall(…), PathSpec(…)): those belong to the code cells,
    which print hides. A name that is also a term of the glossary (rmem_max) is the kernel's."""
    _, student = student_report
    glossary = read_glossary()
    found = {}
    for case in CASES:
        text = page_text(student / f"{case}.html")
        index = json.loads((ROOT / "data" / course.room(case).replay / "index.json").read_text())
        labels = {label.split("#")[0] for label in index["runs"] if re.search(r"[-_]", label)}
        assigned, callables = code_names(course.room(case).notebook)
        variables = {name for name in assigned if "_" in name and not glossary.defines(name)}
        shown = ([label for label in labels if re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", text)]
                 + [name for name in variables if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text)]
                 + python_calls(text, callables))
        if shown:
            found[case] = shown
    assert not found, found


@pytest.mark.slow
def test_student_pages_define_their_jargon_and_link_it(student_report):
    """Every jargon word a student page uses is in the glossary (course/glossary.toml), whose page
    closes the handout; each case states its units under its title, and links the first use of
    its terms to the glossary."""
    _, student = student_report
    glossary = read_glossary()
    undefined = {case: undefined_jargon(page_text(student / f"{case}.html"), glossary) for case in CASES}
    assert not any(undefined.values()), {c: w for c, w in undefined.items() if w}
    for case in CASES:
        page = (student / f"{case}.html").read_text(encoding="utf-8")
        title = page.index("<h1")
        assert page.index('class="tcplab-units"', title) < page.index("</h1>", title) + 200, case
        assert page.count('class="tcplab-term" href="glossary.html#glossary-') >= 5, case
    handout = (student / "handout.html").read_text(encoding="utf-8")
    assert all(f'id="{term.anchor}"' in handout for term in glossary.terms)
    assert 'class="tcplab-term" href="#glossary-' in handout and "glossary.html" not in handout
    assert (student / "glossary.pdf").is_file()


@pytest.mark.slow
def test_each_handout_page_names_the_kernel_of_its_runs(student_report, pdf_tools):
    """A case's pages in the handout name the kernels and backends of that case's runs in their
    footer, and only those; a page of no run (the cover, the glossary) names none."""
    reports, student = student_report
    kernels = {case: combine_kernels(s.environment for s in scores_in(nbformat.read(reports / f"{case}.ipynb", as_version=4)))
               for case in CASES}
    every = {k for kernel in kernels.values() for k in kernel.split(",")}
    assert len(every) > 1  # case 02 and 10 ran on a second kernel: the footers can differ
    seen = set()
    for lines in read_pages(student / "handout.pdf"):
        top, bottom = header(lines), footer(lines)
        case = next((c for c in CASES if top.startswith(f"Case {course.case_number(c)} ")), None)
        if case is None:
            if top.startswith("Glossary"):
                assert "Linux" not in bottom, bottom
            continue
        own = kernels[case].split(",")
        assert all(k in bottom for k in own) and not any(k in bottom for k in every - set(own)), (case, bottom)
        seen.add(case)
    assert seen == set(CASES)


def _comparable(summary: dict) -> dict:
    """What a report says, without where and how long: per case its status and checks."""
    return {"context": [summary[k] for k in ("mode", "profile", "edition", "backend", "kernel")],
            "cases": [(c["case_id"], c["title"], c["status"], c["checks"]) for c in summary["cases"]]}


@pytest.mark.slow
def test_shards_merged_give_the_unsharded_report(replay_report, tmp_path):
    """Three shards run one after another (as three CI jobs would), then a merge that runs
    nothing: the same cases, checks and handout as one run of the whole course."""
    dirs = [tmp_path / f"shard-{i}" for i in (1, 2, 3)]
    for i, shard_dir in enumerate(dirs, 1):
        out = tcplab_report("--mode", "replay", "--formats", "html", "--shard", f"{i}/3",
                            "--reports-dir", str(shard_dir))
        assert out.returncode == 0, out.stderr[-3000:]
        shard = json.loads((shard_dir / "summary.json").read_text())
        assert [c["case_id"] for c in shard["cases"]] == CASES[i - 1::3] and shard["shard"]["selection"] == CASES
    merged = tmp_path / "merged"
    out = tcplab_report("--merge", *map(str, dirs), "--formats", "html", "--reports-dir", str(merged))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "executing" not in out.stderr  # rendering only
    whole = json.loads((replay_report[1] / "summary.json").read_text())
    summary = json.loads((merged / "summary.json").read_text())
    assert _comparable(summary) == _comparable(whole)
    assert [m["shard"] for m in summary["merged_from"]] == ["1/3", "2/3", "3/3"] and not summary["missing_shards"]
    assert all(c["execution_s"] > 0 for c in summary["cases"])  # as the shards' notebooks recorded it
    sections = [re.findall(r'<section class="tcplab-case[^>]* data-case="([^"]+)" data-status="([a-z]+)"',
                           (d / "handout.html").read_text()) for d in (replay_report[1], merged)]
    assert sections[0] == sections[1] == [(case, "passed") for case in CASES]

    # A shard that never came back: its cases show as not run, and the merge fails.
    partial = tmp_path / "partial"
    out = tcplab_report("--merge", str(dirs[0]), str(dirs[2]), "--formats", "html", "--reports-dir", str(partial))
    summary = json.loads((partial / "summary.json").read_text())
    assert out.returncode == 1 and "shard(s) 2/3 missing" in out.stderr and summary["missing_shards"] == ["2/3"]
    assert {c["case_id"] for c in summary["cases"] if c["status"] == "error"} == set(CASES[1::3])
