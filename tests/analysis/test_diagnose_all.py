"""``tcplab diagnose FILE --all``: every flow diagnosed from one compiled pass over the whole
capture must get exactly what that flow gets when diagnosed alone (label, shares, evidence,
sentences, every metric and every series), on a synthetic server's capture of many kinds
of connection interleaved and on the public captures with many flows."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tcplab.analysis import read_packets
from tcplab.analysis.batch import TableWriter, table_frame, table_row
from tcplab.analysis.diagnose import diagnose, diagnose_flows
from tcplab.analysis.metrics import SERIES, all_flow_metrics, flow_metrics
from tcplab.analysis.table import data_flows

from .pcapgen import many_flows
from .test_public_captures import CAPTURES

ROOT = Path(__file__).resolve().parents[2]
TCPLAB = str(ROOT / ".venv" / "bin" / "tcplab")


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, inside dicts and lists too."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def assert_each_flow_as_alone(table, flows=None):
    flows = data_flows(table) if flows is None else flows
    together = list(diagnose_flows(table, flows))
    assert [d.metrics.flow for d in together] == flows
    for d in together:
        alone = diagnose(table, d.metrics.flow)
        assert same(d.to_dict(), alone.to_dict()), d.metrics.flow
    return together


@pytest.fixture(scope="module")
def server_capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "server.pcap"
    meta = many_flows(path, 400, seed=3)
    return path, meta


def test_every_flow_of_a_busy_server_gets_what_it_gets_alone(server_capture):
    path, meta = server_capture
    table = read_packets(path)
    assert len(table.flows) == meta["flows"] == 400 and len(table.packets) == meta["packets"]
    together = assert_each_flow_as_alone(table)
    assert len(together) == 400
    # Flows are numbered as they start, as the generator started them: each kind's verdict.
    by_kind = Counter((meta["kinds"][d.metrics.flow], d.label) for d in together)
    for kind, label in (("bulk", "receiver-window-limited"), ("loss", "congestion-loss"),
                        ("zero-window", "zero-window"), ("idle", "application-limited"),
                        ("request-response", "application-limited"), ("tiny", "undetermined")):
        assert by_kind[(kind, label)] > 0, by_kind
    assert {label for _, label in by_kind} == {"receiver-window-limited", "congestion-loss", "zero-window",
                                              "application-limited", "undetermined"}


def test_the_series_of_a_flow_of_all_are_those_it_has_alone(server_capture):
    path, meta = server_capture
    table = read_packets(path)
    wanted = [f for f in range(40) if meta["kinds"][f] in ("loss", "zero-window", "request-response", "bulk")][:8]
    for together in all_flow_metrics(table, wanted):  # series computed on first use
        alone = flow_metrics(table, together.flow)
        for name in (*SERIES, "round_states"):
            a, b = together.series()[name], alone.series()[name]
            if isinstance(a, np.ndarray):
                assert np.array_equal(a, b), name
            elif isinstance(a, pd.Series):
                pd.testing.assert_series_equal(a, b)
            else:
                pd.testing.assert_frame_equal(a, b)
        assert len(together.gaps) == len(alone.gaps) and together.to_dict(tables=True) == alone.to_dict(tables=True)


@pytest.mark.parametrize("name", ["tt_http.pcap", "zk_echo_connections.pcap", "zk_irc_dcc_send.pcapng"])
def test_public_captures_with_many_flows(name):
    path = CAPTURES / name
    if not path.is_file():
        pytest.skip(f"no {path}")
    table = read_packets(path)
    together = assert_each_flow_as_alone(table)
    assert len(together) == len(data_flows(table)) >= 3


def test_a_flow_subset_and_a_time_range_give_the_same_as_alone(server_capture):
    path, _ = server_capture
    cut = read_packets(path).between(1.0, 3.0)
    flows = data_flows(cut)[::7]
    assert_each_flow_as_alone(cut, flows)


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([TCPLAB, "diagnose", *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_all_writes_the_table_of_every_flow(server_capture, tmp_path, suffix):
    path, _ = server_capture
    out = run(path, "--all", "-o", tmp_path / f"verdicts{suffix}")
    assert out.returncode == 0, out.stderr
    assert f"table written to {tmp_path / f'verdicts{suffix}'}" in out.stdout
    frame = pd.read_parquet(tmp_path / "verdicts.parquet") if suffix == ".parquet" else \
        pd.read_csv(tmp_path / "verdicts.csv")
    rows = json.loads(run(path, "--all", "--json").stdout)
    assert list(frame["flow"]) == [r["metrics"]["flow"] for r in rows]
    assert list(frame["label"]) == [r["label"] for r in rows]
    assert list(frame["summary"]) == [r["summary"] for r in rows]
    assert frame["error"].isna().all() and set(frame["capture"]) == {str(path)}


def test_the_table_written_in_chunks_is_the_table(server_capture, tmp_path):
    path, _ = server_capture
    table = read_packets(path)
    rows = [table_row(path, diagnosis=d) for d in diagnose_flows(table, data_flows(table)[:11])]
    for suffix in (".csv", ".parquet"):
        with TableWriter(tmp_path / f"t{suffix}", chunk=4) as writer:
            for row in rows:
                writer.add(row)
        read = pd.read_csv if suffix == ".csv" else pd.read_parquet
        got = read(tmp_path / f"t{suffix}")
        want = table_frame(rows)
        assert len(got) == 11 and list(got.columns) == list(want.columns)
        assert list(got["summary"]) == list(want["summary"]) and list(got["flow"]) == list(want["flow"])
        assert np.allclose(got["share"], want["share"].astype(float))


def test_the_compiled_arithmetic_is_numpys_and_pandas():
    """The kernel reproduces the primitives the pandas version used, to the last bit: sums in
    NumPy's pairwise order, linear quantiles, medians, and searchsorted on unsorted arrays
    (a flow whose clock ran backwards) as NumPy answers it."""
    from tcplab.analysis._metrics_kernel import _median, _quantile, _search_many, _sum

    rnd = np.random.default_rng(16)
    for n in (0, 1, 2, 7, 8, 9, 127, 128, 129, 300, 1000, 4099):
        a = rnd.random(n) * 10.0 ** rnd.integers(-6, 6, n)
        assert _sum(a) == pd.Series(a).sum()
        if n:
            ints = rnd.integers(0, 10**6, n)
            for values in (a, ints):
                s = pd.Series(values)
                assert _median(values) == s.median()
                assert _quantile(values, 0.05) == s.quantile(0.05) and _quantile(values, 0.9) == s.quantile(0.9)
    for _ in range(300):
        arr, keys = rnd.random(int(rnd.integers(0, 40))), rnd.random(int(rnd.integers(0, 20)))
        for right in (True, False):
            assert np.array_equal(_search_many(arr, keys, right),
                                  np.searchsorted(arr, keys, side="right" if right else "left"))
