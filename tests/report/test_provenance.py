"""A page predicts from parameters, kernel facts and theory, never from a measurement: every
check's prediction in every case is read, statically, for what it is computed from."""

from __future__ import annotations

import nbformat
import pytest

from tcplab.course import course
from tcplab.report import provenance


def _notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def _found(*sources: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.check, f.reads) for f in provenance.measured_predictions(_notebook(*sources))]


def test_a_prediction_read_from_a_run_is_found_however_it_travels():
    run = "slow = lab.run('slow', Bulk(size='1MB'), path=spec)\n"
    assert _found(run, "checks = [within('direct', slow.goodput_bps, slow.goodput_bps, tolerance=0.1)]") == [
        ("'direct'", ("slow",))]
    # through assignments, a loop over runs, a container filled with them, a comprehension
    assert _found(run, "rate = slow.goodput_bps / 8\nw = rate * 2\nequals('assigned', w, 1)") == [("'assigned'", ("w",))]
    assert _found("rows = []\nfor r in ['1ms', '5ms']:\n    rows.append(lab.run(r, Bulk(), path=spec))\n",
                  "at_least('filled', 3, 1, predicted=rows[0].duration_s)") == [("'filled'", ("rows",))]
    assert _found("runs = {r: lab.run(r, Bulk(), path=spec) for r in rtts}\n"
                  "best = max(t.goodput_bps for t in runs.values())\n",
                  "within('comprehension', best, 1, tolerance=0.1)") == [("'comprehension'", ("best",))]
    assert _found("table = nagle.latency_table(lab.trials, predicted_s)\n",
                  "within('from the trials', table.loc['a', 'median ms'], 1, tolerance=0.1)") == [
        ("'from the trials'", ("table",))]
    assert _found("with lab.path(spec) as path:\n    kept = lab.keep('trace', lambda: trace(path))\n",
                  "below_line('ceiling from a trace', 1, kept)") == [("'ceiling from a trace'", ("kept",))]


def test_predictions_from_parameters_kernel_facts_and_theory_are_clean():
    assert _found(
        "rtt_s = parse_duration('rtt', rtt)\nlimits = buffers.BufferLimits(lab)\n"
        "before = lab.keep('tcp_mem before', tcp_mem.read_tcp_mem)\n"
        "slow = lab.run('slow', Bulk(size='1MB'), path=spec)\n",
        # the bounds of a rule may compare two measurements; only the "Predicted" column may not
        "checks = [within('bdp', theory.bdp(rate_bps, rtt_s), slow.metrics.inflight_max_bytes, tolerance=0.2),\n"
        "          equals('clamp', theory.effective_sndbuf(16384, limits.wmem_max), slow.socket('server')['sndbuf']),\n"
        "          at_least('ratio', slow.duration_s / 2, 0.5 * slow.duration_s),\n"
        "          equals('restored', before, 1),\n"
        # a record's field that holds its parameters, and a ceiling's span (its resolution)
        "          within('configured', slow.rows['configured'], 1, tolerance=0.1),\n"
        "          below_line('line', 1, theory.line_ceiling(rate_bps, slow.duration_s / 2) / 1e6),\n"
        # and the delay line's lateness, which shortens that span (by keyword or by position)
        "          below_line('late', 1, theory.line_ceiling(rate_bps, 1.0, late_s=slow.late_s) / 1e6)]") == []


def test_a_ceiling_whose_line_reads_a_measurement_is_found():
    """Only the span and the lateness are a ceiling's resolution: its rate is its prediction."""
    found = _found("slow = lab.run('slow', Bulk(size='1MB'), path=spec)\n"
                   "checks = [below_line('line', 1, theory.line_ceiling(slow.goodput_bps, 1.0, late_s=slow.late_s))]")
    assert found == [("'line'", ("slow",))]


def test_a_cell_that_is_not_python_is_named():
    with pytest.raises(ValueError, match="not Python"):
        provenance.measured_predictions(_notebook("x = (1,"))


@pytest.mark.parametrize("room", course().rooms, ids=lambda room: room.case_id)
def test_no_case_predicts_from_a_measurement(room):
    found = provenance.measured_predictions(nbformat.read(room.notebook, as_version=4))
    assert not found, provenance.explain(found)
