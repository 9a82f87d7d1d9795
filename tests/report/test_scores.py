"""Scored checks and their machine-readable form, without a kernel."""

from __future__ import annotations

import dataclasses
import json
import math

import nbformat
import numpy as np
import pytest

from tcplab.report.scores import (MIME_TYPE, SCHEMA, Check, Scores, at_least, at_most, check,
                                  equals, or_explained, scores_in, scores_output, within)


def test_within_relative_tolerance_is_a_fraction_of_the_prediction():
    assert within("rtt", 100.0, 109.0, 0.10, unit="ms").passed
    assert not within("rtt", 100.0, 111.0, 0.10, unit="ms").passed
    assert "10 %" in within("rtt", 100.0, 100.0, 0.10).rule


def test_within_absolute_tolerance_is_in_the_values_unit():
    c = within("rtt", 100.0, 104.0, 5.0, unit="ms", relative=False)
    assert c.passed and "5 ms" in c.rule
    assert not within("rtt", 100.0, 106.0, 5.0, relative=False).passed


def test_bounds_and_equality():
    assert at_least("goodput", 9.5, 9.0, unit="Mbit/s").passed
    assert not at_least("goodput", 8.9, 9.0).passed
    assert at_most("loss", 0.5, 1.0).passed
    assert not at_most("loss", 1.5, 1.0).passed
    assert at_least("goodput", 9.5, 9.0, predicted=10.0).predicted == 10.0
    assert equals("bottleneck", "link", "link").passed
    assert not equals("bottleneck", "link", "receiver window").passed
    assert check("custom", True, rule="because").passed


def test_a_second_outcome_the_page_explains_passes_and_the_rule_names_both():
    base = at_most("busy share", 0.7, 0.6)
    held = or_explained(base, True, "an old reader read it in one loop")
    assert held.passed and not base.passed
    assert held.rule == "at most 0.6, or an old reader read it in one loop"
    assert (held.name, held.measured) == (base.name, base.measured)
    assert not or_explained(base, False, "an old reader read it in one loop").passed
    assert or_explained(at_most("busy share", 0.5, 0.6), False, "never").passed


def test_non_finite_measurements_fail_and_become_null():
    c = within("rtt", 100.0, float("nan"), 0.5)
    assert not c.passed and c.measured is None
    assert not at_least("x", math.inf, 1.0).passed
    json.dumps(c.to_json(), allow_nan=False)


def test_numpy_values_are_stored_as_plain_python():
    c = within("rtt", np.float64(10.0), np.int64(10), 0.1)
    assert type(c.predicted) is float and type(c.measured) is int
    assert type(check("flag", np.bool_(True)).passed) is bool


def test_negative_tolerance_is_refused():
    with pytest.raises(ValueError):
        within("rtt", 1.0, 1.0, -0.1)


def _scores() -> Scores:
    return Scores("c1", "Case one 中文", "netem", "replay",
                  (within("rtt", 10.0, 10.5, 0.1, unit="ms"), at_least("rate", 1.0, 2.0)))


def test_scores_round_trip_through_json():
    s = _scores()
    data = json.loads(json.dumps(s.to_json()))
    assert data["schema"] == SCHEMA
    assert (data["n_checks"], data["n_passed"], data["passed"]) == (2, 1, False)
    assert Scores.from_json(data) == s


def test_unknown_schema_is_refused():
    data = _scores().to_json() | {"schema": "tcplab.scores/99"}
    with pytest.raises(ValueError, match="schema"):
        Scores.from_json(data)


def test_output_bundle_has_table_text_and_data():
    bundle = scores_output(_scores())
    assert set(bundle) == {"text/html", "text/plain", MIME_TYPE}
    assert "<table" in bundle["text/html"] and "Case one 中文" in bundle["text/html"]
    assert "1 of 2 checks passed" in bundle["text/plain"]
    assert bundle[MIME_TYPE]["case_id"] == "c1"


def test_scores_are_found_in_a_notebooks_outputs():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("publish(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data=scores_output(_scores()))]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    # Through the file format and back, as the pipeline reads it.
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    (found,) = scores_in(nb)
    assert found == _scores()


def test_scores_say_what_the_machine_did_to_their_runs():
    calm = dataclasses.replace(_scores(), runs_read=4)
    bundle = scores_output(calm)
    assert "(4 in all" in bundle["text/plain"] and "(4 in all" in bundle["text/html"]
    busy = dataclasses.replace(_scores(), runs_read=4, disturbed=("cubic#2: delay line queue1: 1 % of packets …",))
    bundle = scores_output(busy)
    assert "disturbed 1 of the runs behind these numbers (4 in all" in bundle["text/plain"] and "cubic#2: delay line" in bundle["text/html"]
    assert "none scored" in bundle["text/html"] and "checks passed" not in bundle["text/html"]
    assert Scores.from_json(json.loads(json.dumps(busy.to_json()))) == busy
    # Without health readings (replay of runs recorded before they kept one) nothing is said.
    assert "machine" not in scores_output(_scores())["text/plain"]


def test_scores_say_which_paths_ran_in_another_kernel_and_why():
    why = "ip tcp_metrics flush, which the kernel allows only the administrator"
    moved = dataclasses.replace(_scores(), environment={"kernel": "6.18 (user namespace), 6.1.176 (UML)",
                                                         "moved": why})
    bundle = scores_output(moved)
    for shown in (bundle["text/plain"], bundle["text/html"]):
        assert "6.18 (user namespace), 6.1.176 (UML)" in shown and why in shown
    assert bundle["text/html"].count("tcplab-kernels") == 1
    # A lab whose paths all ran in its own kernel says nothing of the kind.
    assert "tcplab-kernels" not in scores_output(_scores())["text/html"]
    assert "lab's own kernel" not in scores_output(_scores())["text/plain"]


def test_the_reasons_for_another_kernel_are_said_in_the_pages_language(monkeypatch):
    """Each reason is written in English where the lab chose the kernel (lab.kernels), and said in
    the page's language under its scores, one by one: a metrics flush and a limit a user namespace
    cannot raise, as path_kernel words them."""
    import re

    from tcplab.lab import kernels, userns
    from tcplab.lab.path import PathSpec

    monkeypatch.setattr(kernels, "uml_can_run", lambda: (True, ""))
    monkeypatch.setattr(kernels, "host_global_needs", lambda spec: {})
    flush = kernels.path_kernel(PathSpec(), "userns", ("tcp_metrics flush",)).why
    monkeypatch.setattr(kernels, "host_global_needs", lambda spec: {"net.core.wmem_max": ("4194304", "212992")})
    limit = kernels.path_kernel(PathSpec(), "userns").why
    assert userns.blockers_text({"net.core.wmem_max": ("4194304", "212992")}) in limit
    published = Scores.from_json({**_scores().to_json(), "environment": {
        "kernel": "6.18 (user namespace), 6.1.176 (UML)", "moved": "\n".join(sorted([flush, limit]))}})
    moved = dataclasses.replace(_scores(), environment=published.environment)  # as a page publishes and reads it
    english = scores_output(moved)["text/plain"]
    assert flush in english and limit in english
    said = scores_output(moved, language="zh")["text/plain"].splitlines()[-1]
    kernels_said, reasons = said.split("：", 1)  # the kernels' names, then why
    assert "6.18 (用户命名空间), 6.1.176 (UML)" in kernels_said  # each kernel's kind in the page's words
    assert "UML" in reasons and "TCP_METRICS_CMD_DEL" in reasons and "net.core.wmem_max 212992 → 4194304" in reasons
    # What stays Latin is what the machine names: no English word of the reasons is left.
    assert not re.search(r"[a-z]+ [a-z]+", reasons.replace("ip tcp_metrics flush", "")), reasons


def test_why_the_lab_runs_in_uml_is_said_in_the_pages_language():
    """The UML banner's reason (kernels.choose_kernel's words) in Chinese, as the page says it."""
    from tcplab.words import Messages

    zh = Messages("zh")
    assert zh.error_phrase("as requested") == "按要求"
    said = zh.error_phrase("the host kernel cannot run the lab (not root), nor in a user namespace "
                           "(user namespaces are not allowed for this user); the UML kernel can")
    # Latin stays only for what the machine names (UML, root).
    assert "UML" in said and not any(c.isascii() and c.isalpha() for c in said.replace("UML", "").replace("root", "")), said


def test_a_disturbed_case_is_neither_passed_nor_failed():
    from tcplab.report.context import ReportContext
    from tcplab.report.handout import CaseSection, case_status, render_handout

    busy = dataclasses.replace(_scores(), runs_read=2, disturbed=("x: delay line queue1: packets released 1.5 ms late on average (limit 0.5 ms)",))
    assert case_status(None, [busy]) == "busy" and case_status(None, [_scores()]) == "failed"
    assert case_status("boom", [busy]) == "error"
    text = scores_output(busy)["text/plain"]
    assert "not scored" in text and "2 checks measured, none scored" in text
    assert " fail" not in text and " pass" not in text
    html = render_handout([CaseSection("c1", "Case one", "busy", scores=[busy])], context=ReportContext())
    assert "machine too busy: result not trusted" in html and "result-untrusted" in html
    assert "too busy for 1 of 1 case:" in html and "did not pass" not in html and "2 checks measured, none scored" in html
