"""`tcplab diagnose` as a user runs it: a subprocess, its output and its exit code."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .pcapgen import ACK, PSH, Conn, Transfer, ethernet, merge_pcaps, write_pcap

TCPLAB = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "tcplab")
MSS = 1448


def tcplab(*args):
    return subprocess.run([TCPLAB, "diagnose", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def sndbuf_pcap(tmp_path):
    tr = Transfer(rtt=0.02)
    tr.clocked(22 * MSS, 400, rwnd=3 << 20)
    path = tmp_path / "sndbuf.pcap"
    write_pcap(path, tr.frames, linktype=101)
    return path


def test_text_output_names_the_limit_with_numbers(sndbuf_pcap):
    out = tcplab(sndbuf_pcap)
    assert out.returncode == 0, out.stderr
    assert "diagnosis: sender-buffer-limited" in out.stdout
    assert "31.1 KB" in out.stdout and "3 MB" in out.stdout and "flow 0: 10.0.0.1:40000 -> 10.0.0.2:5001" in out.stdout


def test_json_output(sndbuf_pcap):
    out = tcplab(sndbuf_pcap, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["label"] == "sender-buffer-limited"
    assert result["metrics"]["payload_bytes"] == 422 * MSS
    assert result["evidence"]["inflight_plateau_bytes"] == 22 * MSS


def test_list_flows(sndbuf_pcap):
    out = tcplab(sndbuf_pcap, "--list", "--json")
    assert out.returncode == 0
    (row,) = json.loads(out.stdout)
    assert row["flow"] == 0 and row["bytes_c2s"] == 422 * MSS and row["handshake"]
    assert "10.0.0.2:5001" in tcplab(sndbuf_pcap, "--list").stdout


def test_html_report_is_self_contained(sndbuf_pcap, tmp_path):
    report = tmp_path / "report.html"
    out = tcplab(sndbuf_pcap, "-o", report)
    assert out.returncode == 0, out.stderr
    html = report.read_text()
    assert 'data-label="sender-buffer-limited"' in html
    # No network references: no scripts, styles or images fetched from anywhere.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<script" not in html and "@import" not in html
    # Time-sequence, throughput, window and RTT figures, inline.
    assert html.count("data:image/png;base64,") == 4


def test_html_report_of_a_flow_without_round_trip_samples(tmp_path):
    # Data one way and no ACK captured (one direction of an asymmetric route): no RTT to plot.
    c = Conn()
    frames = [(1000.0 + 0.001 * i, c.send(0, ACK | PSH, 1000)) for i in range(20)]
    path = tmp_path / "one-way.pcap"
    write_pcap(path, [(t, ethernet(p)) for t, p in frames])
    report = tmp_path / "report.html"
    out = tcplab(path, "-o", report)
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
    html = report.read_text()
    assert "Not drawn: flow 0 has no ACK round-trip samples" in html
    assert html.count("data:image/png;base64,") == 3


def test_time_range_and_flow_selection(sndbuf_pcap):
    out = tcplab(sndbuf_pcap, "--flow", "0", "--t-range", "0.1:0.2", "--json")
    assert out.returncode in (0, 1), out.stderr
    m = json.loads(out.stdout)["metrics"]
    assert m["transfer_s"] <= 0.1 + 0.021  # the last ACK may come one round trip after the range


def test_undetermined_exits_1(tmp_path):
    tr = Transfer()
    for k in range(30):
        tr.round(30000, rwnd=1 << 20, rtt=0.02 + 0.0004 * k)
    path = tmp_path / "ambiguous.pcap"
    write_pcap(path, tr.frames, linktype=101)
    out = tcplab(path)
    assert out.returncode == 1 and "diagnosis: undetermined" in out.stdout


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n" * 4, "not a pcap or pcapng file"),
])
def test_bad_files_exit_2_with_a_clear_message(tmp_path, content, message):
    path = tmp_path / "capture.pcap"
    path.write_bytes(content)
    out = tcplab(path)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_missing_file_bad_flow_and_bad_range_exit_2(sndbuf_pcap, tmp_path):
    for args, message in (([tmp_path / "nope.pcap"], "cannot open"),
                          ([sndbuf_pcap, "--flow", "7"], "--flow"),
                          ([sndbuf_pcap, "--t-range", "5:1"], "--t-range"),
                          ([sndbuf_pcap, "--t-range", "50:60"], "no packet")):
        out = tcplab(*args)
        assert out.returncode == 2, (args, out.stdout)
        assert message in out.stderr and "Traceback" not in out.stderr


def test_help_documents_exit_codes():
    out = tcplab("--help")
    assert out.returncode == 0
    assert "exit codes" in out.stdout and "undetermined" in out.stdout


def test_all_flows_each_diagnosed_largest_first(tmp_path):
    # A server's capture in miniature: flows with different limits, interleaved in time,
    # plus a connection that never carried data (left out of the table).
    sndbuf = Transfer(port=40001)
    sndbuf.clocked(22 * MSS, 400, rwnd=3 << 20)
    rwnd = Transfer(port=40002)
    rwnd.clocked(65160, 600, rwnd=65160)
    zero = Transfer(port=40003)
    zero.rounds([30000] * 5, rwnd=200_000)
    zero.zero_window(30000, closed_s=1.0, probe_every=0.2)
    zero.rounds([30000] * 5, rwnd=200_000)
    idle = Transfer(port=40004)
    path = tmp_path / "server.pcap"
    write_pcap(path, sorted(sndbuf.frames + rwnd.frames + zero.frames + idle.frames, key=lambda f: f[0]),
               linktype=101)

    out = tcplab(path, "--all", "--json")
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    by_port = {r["metrics"]["client"].rsplit(":", 1)[1]: r for r in results}
    assert sorted(by_port) == ["40001", "40002", "40003"]
    assert by_port["40001"]["label"] == "sender-buffer-limited"
    assert by_port["40002"]["label"] == "receiver-window-limited"
    assert by_port["40003"]["label"] == "zero-window"
    sizes = [r["metrics"]["payload_bytes"] for r in results]
    assert sizes == sorted(sizes, reverse=True)
    # Each row is the same diagnosis as asking for that flow alone.
    single = json.loads(tcplab(path, "--flow", by_port["40002"]["metrics"]["flow"], "--json").stdout)
    assert single["label"] == "receiver-window-limited" and single["summary"] == by_port["40002"]["summary"]

    text = tcplab(path, "--all")
    assert text.returncode == 0
    rows = [line for line in text.stdout.splitlines() if "10.0.0.1:4000" in line]
    assert len(rows) == 3 and rows[0].endswith("receiver-window-limited")
    assert "3 flows: 1 receiver-window-limited, 1 sender-buffer-limited, 1 zero-window" in text.stdout


def test_all_flows_undetermined_exits_1_and_bad_combinations_exit_2(sndbuf_pcap, tmp_path):
    tr = Transfer()
    for k in range(30):
        tr.round(30000, rwnd=1 << 20, rtt=0.02 + 0.0004 * k)
    ambiguous = tmp_path / "ambiguous.pcap"
    write_pcap(ambiguous, tr.frames, linktype=101)
    out = tcplab(ambiguous, "--all")
    assert out.returncode == 1 and "1 flow: 1 undetermined" in out.stdout

    handshake_only = tmp_path / "idle.pcap"
    write_pcap(handshake_only, Transfer().frames, linktype=101)
    for args, message in (([sndbuf_pcap, "--all", "--flow", "0"], "--all"),
                          ([sndbuf_pcap, "--all", "-o", tmp_path / "r.html"], "--all"),
                          ([handshake_only, "--all"], "no flow carried data")):
        out = tcplab(*args)
        assert out.returncode == 2, (args, out.stdout)
        assert message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r.html").exists()


def test_all_flows_of_real_captures_merged_into_one(tmp_path):
    """Three shipped course runs (a pinned SO_SNDBUF, an 8 KB SO_RCVBUF upload, scaling off),
    recorded on a real kernel, merged into one capture as a server's tcpdump would hold them:
    each flow gets the diagnosis its own capture gets."""
    from tcplab.analysis import diagnose, read_packets
    from tcplab.runs import data_root

    captures = [next((data_root() / "replay" / case / variant).glob("*.pcap")) for case, variant in (
        ("01-send-buffer", "sndbuf-16KB"), ("02-receive-buffer", "rtt40-rcvbuf8KB"),
        ("07-window-scaling", "off-client-20ms"))]
    merged = tmp_path / "merged.pcap"
    merge_pcaps(captures, merged)

    out = tcplab(merged, "--all", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    alone = [diagnose(read_packets(capture)) for capture in captures]
    assert len(rows) == len(alone) == 3
    by_size = sorted(alone, key=lambda d: d.metrics.payload_bytes, reverse=True)
    assert [r["label"] for r in rows] == [d.label for d in by_size]
    assert [r["metrics"]["payload_bytes"] for r in rows] == [d.metrics.payload_bytes for d in by_size]
    assert {d.label for d in alone} >= {"sender-buffer-limited", "receiver-window-limited"}


def test_a_folder_of_captures_is_one_table_and_a_bad_file_does_not_stop_it(tmp_path, sndbuf_pcap):
    """Shipped course runs and a synthetic capture in a folder (one a level down), beside a file
    that is no capture: every capture gets its row, the bad file its error, the table its file."""
    import shutil

    import pandas as pd

    from tcplab.analysis import diagnose, read_packets
    from tcplab.runs import data_root

    folder = tmp_path / "captures"
    (folder / "day2").mkdir(parents=True)
    sources = {"sndbuf.pcap": sndbuf_pcap,
               "day2/rcvbuf.pcap": next((data_root() / "replay" / "02-receive-buffer" / "rtt40-rcvbuf8KB").glob("*.pcap"))}
    for name, source in sources.items():
        shutil.copy(source, folder / name)
    (folder / "notes.pcap").write_text("not packets\n")
    (folder / "readme.txt").write_text("not a capture by its name: not read\n")

    out = tcplab(folder, "-o", tmp_path / "verdicts.csv")
    assert out.returncode == 0, out.stderr
    assert "3 captures, 2 flows" in out.stdout and re.search(r"notes\.pcap +not diagnosed: PcapError", out.stdout)
    table = pd.read_csv(tmp_path / "verdicts.csv")
    assert list(table["capture"]) == ["day2/rcvbuf.pcap", "notes.pcap", "sndbuf.pcap"]
    for name, source in sources.items():
        row = table[table["capture"] == name].iloc[0]
        assert row["label"] == diagnose(read_packets(source)).label and pd.isna(row["error"])
    assert table[table["capture"] == "notes.pcap"]["error"].iloc[0].startswith("PcapError")

    assert tcplab(folder, "--all", "--json").returncode == 0
    for bad, option in (([folder, "-o", tmp_path / "x.html"], "--output"), ([folder, "--flow", "0"], "--flow"),
                        ([tmp_path / "empty"], "file")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        out = tcplab(*bad)
        assert out.returncode == 2 and option in out.stderr, out.stderr
