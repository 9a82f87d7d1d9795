"""`tcplab diagnose` as a user runs it: a subprocess, its output and its exit code."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .pcapgen import Transfer, write_pcap

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
