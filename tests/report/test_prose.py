"""A page states a measured number only where its own run produced it.

Two halves: the course's static prose (notebook Markdown and the ``prose.*`` sentence
templates) states no quantity it has not declared as theory, seed, kernel fact or setup; and
a bound sentence writes exactly the values it was given, each in the house units. The rendered
course is held to its runs in ``tests/test_course.py``
(``test_bound_sentences_on_the_pages_are_their_runs``).
"""

from __future__ import annotations

import ast
import json
import math
import re

import nbformat
import pytest

from tcplab import course
from tcplab.report import prose
from tcplab.words import Messages, _load, template_fields


@pytest.mark.parametrize("case", course.available_cases())
def test_static_prose_declares_every_quantity_it_states(case):
    nb = nbformat.read(course.room(case).notebook, as_version=4)
    undeclared = prose.undeclared_numbers(nb)
    assert not undeclared, (
        f"{case}: Markdown cells state quantities without declaring them (cell metadata tcplab.states, "
        f"one or more of {prose.STATIC_KINDS}); a measured number goes through page.say: {undeclared}")


def test_sentence_templates_hold_no_quantity_of_their_own():
    """Every number in a bound sentence is a field: a template that wrote one itself would
    state it whatever the run measured."""
    templates = {k: v for k, v in _load("en").items() if k.startswith("prose.")}
    assert templates, "no bound sentences in the strings"
    for key, text in templates.items():
        assert not prose.static_numbers(re.sub(r"\{[^}]*\}", "", text)), (key, text)


def test_every_sentence_a_notebook_says_exists_with_the_fields_it_fills():
    """Each ``page.say(name, field=...)`` call names a template that exists, and gives it the
    fields it uses, raw numbers into typed slots: a typo would otherwise show up only when the
    page rendered, and a number wrapped by hand would be written twice."""
    t = Messages("en")
    calls = 0
    for case in course.available_cases():
        nb = nbformat.read(course.room(case).notebook, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for call in ast.walk(ast.parse(cell.source)):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "say"
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "page"):
                    continue
                names = [a.value for a in call.args[:1] if isinstance(a, ast.Constant)]
                if isinstance(call.args[0], ast.IfExp):  # one of two sentences, by the run
                    names = [call.args[0].body.value, call.args[0].orelse.value]
                for name in names:
                    calls += 1
                    key = f"prose.{case}.{name}"
                    assert t.has(key), key
                    given = {kw.arg for kw in call.keywords}
                    assert template_fields(t.template(key)) <= given, (key, template_fields(t.template(key)) - given)
                for kw in call.keywords:
                    wrapped = isinstance(kw.value, ast.Call) and ast.unparse(kw.value.func).startswith("prose.")
                    assert not wrapped, (case, name, kw.arg)
    assert calls >= 100


def test_a_bound_sentence_writes_its_values_in_the_house_units():
    text, data = prose.sentence("02-receive-buffer", "upload", {"rtt": 0.04, "took": 1.8})
    assert Messages("en").template("prose.02-receive-buffer.upload") == "In this run the {rtt:duration} upload took {took:duration}."
    assert text == "In this run the 40 ms upload took 1.8 s."
    assert data["key"] == "prose.02-receive-buffer.upload" and data["text"] == text
    assert data["fields"]["took"] == {"value": 1.8, "kind": "duration", "text": "1.8 s"}
    assert prose.written(96256, "size") == "94 KB"              # buffers: KB = 1024 B
    assert prose.written(8688, "bytes") == "8\u202f688 B"        # a window, to the byte
    assert prose.written(1.93e6, "byte_rate") == "1.93 MB/s"    # rates: decimal
    assert prose.written(95e6, "rate") == "95 Mbit/s"
    assert prose.written(0.994, "percent") == "99.4 %"
    assert prose.written(1.6949, "times") == "1.69 ×"
    # A value the run could not measure is a gap, never "nan".
    assert prose.written(math.nan, "size") == "—" and prose.quantity(math.nan, "size").to_json()["value"] is None
    json.dumps(data)  # what the notebook keeps must be JSON


def test_a_list_of_values_is_joined_as_its_language_joins_a_list():
    gaps = prose.quantity([0.22, 0.44, 1.5], "list of duration")
    assert gaps.text("en") == "220 ms, 440 ms, 1.5 s" and gaps.text("zh") == "220 ms、440 ms、1.5 s"
    _, data = prose.sentence("05-zero-window", "theory_probes", {"rtt": 0.02, "rto": 0.22, "times": [0.22, 0.44, 1.5],
                                                                 "giveup": 945}, language="zh")
    assert data["fields"]["times"] == {"value": [0.22, 0.44, 1.5], "kind": "duration", "text": "220 ms、440 ms、1.5 s"}


def test_bad_sentences_are_refused():
    with pytest.raises(KeyError, match="prose.01-send-buffer.nonexistent"):
        prose.sentence("01-send-buffer", "nonexistent", {})
    with pytest.raises(ValueError, match="kind"):
        prose.Quantity(1.0, "furlongs")
    with pytest.raises(TypeError):
        prose.written("16KB", "size")
    # A number in a slot that does not say its kind would reach the page unwritten.
    with pytest.raises(TypeError, match="upload"):
        prose.sentence("02-receive-buffer", "upload", {"rtt": 0.04, "took": 1.8, "extra": 3})


def test_an_undeclared_quantity_in_static_prose_is_found():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("In our runs the upload took 1.8 s."),
                nbformat.v4.new_markdown_cell("The path has a 40 ms round trip."),
                nbformat.v4.new_markdown_cell("No quantity here, only `tcp_rmem[2]`.")]
    nb.cells[1].metadata["tcplab"] = {"states": ["setup"]}
    assert prose.undeclared_numbers(nb) == [(nb.cells[0].id, ["1.8 s"])]
    nb.cells[1].metadata["tcplab"] = {"states": ["measured"]}  # not a kind static prose may state
    assert [cell_id for cell_id, _ in prose.undeclared_numbers(nb)] == [nb.cells[0].id, nb.cells[1].id]
