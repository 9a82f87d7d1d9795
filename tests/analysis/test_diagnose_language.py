"""`tcplab diagnose --language zh` (issue 17): the lines, the tables' headers, the diagnosis's
title and sentences and the HTML page in Chinese; a language without strings is bad input
(exit 2) named by the option or variable it came from, with the languages there are."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import escape as html_escape
from pathlib import Path

import pytest

from .pcapgen import Transfer, write_pcap

TCPLAB = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "tcplab")
CAPTURES = Path(os.environ.get("TCPLAB_PUBLIC_CAPTURES", Path(__file__).resolve().parents[3] / "shared" / "captures"))
ZERO_WINDOW = CAPTURES / "cs_tcp_zerowindowdead.pcapng"
HAN = re.compile(r"[\u4e00-\u9fff]")


def tcplab(*args, env=None):
    return subprocess.run([TCPLAB, "diagnose", *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TCPLAB_LANG": "", **(env or {})})


@pytest.fixture(scope="module")
def sndbuf_pcap(tmp_path_factory):
    """Bulk data held to 22 segments in flight by the sender's buffer (as test_diagnose_cli)."""
    tr = Transfer(rtt=0.02)
    tr.clocked(22 * 1448, 400, rwnd=3 << 20)
    path = tmp_path_factory.mktemp("lang") / "sndbuf.pcap"
    write_pcap(path, tr.frames, linktype=101)
    return path


def test_plain_text_in_chinese(sndbuf_pcap):
    out = tcplab(sndbuf_pcap, "--language", "zh")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("流 0：10.0.0.1:40000 -> 10.0.0.2:5001（") and "有效吞吐量" in lines[0]
    assert lines[1] == "诊断：受限于发送缓冲区 (sender-buffer-limited)"
    sentences = [line for line in lines if line.startswith("  - ")]
    assert sentences and all(HAN.search(s) for s in sentences)
    assert lines[-1].startswith("各限制因素：sender-buffer-limited ")
    assert "diagnosis:" not in out.stdout and "goodput" not in out.stdout


def test_english_stays_the_default(sndbuf_pcap):
    out = tcplab(sndbuf_pcap)
    assert out.returncode == 0, out.stderr
    assert "diagnosis: sender-buffer-limited" in out.stdout and not HAN.search(out.stdout)
    assert tcplab(sndbuf_pcap, env={"TCPLAB_LANG": "zh"}).stdout.splitlines()[1].startswith("诊断：")


def test_all_and_list_headers_in_chinese(sndbuf_pcap, tmp_path):
    table = tmp_path / "verdicts.csv"
    out = tcplab(sndbuf_pcap, "--all", "--language", "zh", "-o", table)
    assert out.returncode == 0, out.stderr
    head, row, count, written = out.stdout.splitlines()
    assert head.split() == ["流", "发送方", "接收方", "数据量", "耗时", "有效吞吐量", "诊断"]
    # Aligned as the terminal shows it: a Chinese character is two columns wide.
    assert _width(head[:head.index("诊断")]) == row.index("sender-buffer-limited")
    assert count == "1 个流：1 sender-buffer-limited" and written == f"表格已写入 {table}"
    # The table's summary sentence is Chinese; its columns and labels are codes.
    csv = table.read_text(encoding="utf-8").splitlines()
    assert csv[0].startswith("capture,flow,sender") and "sender-buffer-limited" in csv[1] and HAN.search(csv[1])
    listed = tcplab(sndbuf_pcap, "--list", "--language", "zh").stdout.splitlines()
    assert listed[0].split() == ["流", "客户端", "服务器", "报文数", "c->s", "s->c", "耗时"]


def test_json_keeps_its_keys_and_labels(sndbuf_pcap):
    out = tcplab(sndbuf_pcap, "--json", "--language", "zh")
    result = json.loads(out.stdout)
    assert result["label"] == "sender-buffer-limited" and result["title"].startswith("受限于发送缓冲区")
    assert all(HAN.search(s) for s in result["sentences"])


def test_html_report_in_chinese(sndbuf_pcap, tmp_path):
    report = tmp_path / "report.html"
    out = tcplab(sndbuf_pcap, "--language", "zh", "-o", report)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"报告已写入 {report}"
    html = report.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html and "<h1>TCP 诊断</h1>" in html
    assert '<p class="label" data-label="sender-buffer-limited">受限于发送缓冲区' in html


@pytest.mark.parametrize("how", ("option", "variable"))
def test_a_language_without_strings_is_bad_input_named_with_the_accepted(sndbuf_pcap, tmp_path, how):
    report = tmp_path / "report.html"
    if how == "option":
        out = tcplab(sndbuf_pcap, "--language", "fr", "-o", report)
        name = "--language"
    else:
        out = tcplab(sndbuf_pcap, "-o", report, env={"TCPLAB_LANG": "fr"})
        name = "TCPLAB_LANG"
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"tcplab diagnose: {name}: 'fr' is not accepted; accepted: one of en, zh"
    assert not report.exists()


@pytest.mark.skipif(not ZERO_WINDOW.is_file(), reason=f"no public captures at {CAPTURES}")
def test_a_folder_and_a_public_capture_in_chinese(tmp_path):
    """A public capture (a 23.7 s zero-window stall), alone and as a folder's table."""
    out = tcplab(ZERO_WINDOW, "--language", "zh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1] == "诊断：零窗口（接收方应用没有读取）"
    assert "接收方 4 次通告零窗口" in out.stdout
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(ZERO_WINDOW, folder)
    lines = tcplab(folder, "--language", "zh").stdout.splitlines()
    assert lines[0].split()[:3] == ["抓包", "流", "发送方"]
    assert lines[-1] == "1 个抓包，1 个流：1 zero-window"


def _width(text: str) -> int:
    return sum(2 if HAN.match(c) else 1 for c in text)


# --- the page's language is passed, not set in the environment (issue 17) -----------------------------

REPLAY = Path(__file__).resolve().parents[2] / "data" / "replay"
#: Captures whose zh pages are held to no Latin word: a sender buffer, a receiver window with
#: scaling off, an undetermined flow with a zero window, a public zero-window stall.
PAGE_CAPTURES = [REPLAY / "01-send-buffer" / "sndbuf-16KB" / "server-eth0.pcap",
                 REPLAY / "07-window-scaling" / "off-client-10ms" / "server-eth0.pcap",
                 REPLAY / "05-zero-window" / "tiny-autotuned" / "server-eth0.pcap", ZERO_WINDOW]
#: Codes a zh page writes as they are: the diagnosis's labels (also in --json and the tables).
LABEL_CODES = {"undetermined"}
NUMBER = re.compile(r"\b\d+(?:\.\d+)?e[-+]?\d+\b")  # 1.5e+07: a number, not the word "e"


def _words(html: str) -> list[str]:
    """The Latin words of a page (or of escaped lines) outside code, names, units and labels."""
    from report.test_i18n import latin_words

    return [w for w in latin_words(NUMBER.sub("0", html)) if w not in LABEL_CODES]


def _diagnose_here(*args) -> int:
    """``tcplab diagnose`` in this process, so its effect on os.environ can be seen."""
    from tcplab.commands.diagnose import main

    return main([str(a) for a in args])


@pytest.mark.parametrize("before", (None, "en"))
def test_a_zh_page_leaves_the_environment_as_it_was_and_passes_its_language(sndbuf_pcap, tmp_path, monkeypatch,
                                                                              capsys, before):
    from tcplab import plots

    if before is None:
        monkeypatch.delenv("TCPLAB_LANG", raising=False)
    else:
        monkeypatch.setenv("TCPLAB_LANG", before)
    seen = []
    drawn = plots.rtt

    def spy(*args, **kwargs):
        seen.append((os.environ.get("TCPLAB_LANG"), kwargs.get("language")))
        return drawn(*args, **kwargs)

    monkeypatch.setattr(plots, "rtt", spy)
    report = tmp_path / "report.html"
    assert _diagnose_here(sndbuf_pcap, "--language", "zh", "-o", report) == 0
    assert os.environ.get("TCPLAB_LANG") == before
    assert seen == [(before, "zh")]  # drawn in zh with the environment untouched
    assert "往返时延" in report.read_text(encoding="utf-8") and "报告已写入" in capsys.readouterr().out


def test_the_asked_language_wins_over_the_environment(sndbuf_pcap, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TCPLAB_LANG", "zh")
    report = tmp_path / "report.html"
    assert _diagnose_here(sndbuf_pcap, "--language", "en", "-o", report) == 0
    html = report.read_text(encoding="utf-8")
    assert '<html lang="en">' in html and not HAN.search(html) and not HAN.search(capsys.readouterr().out)
    assert os.environ["TCPLAB_LANG"] == "zh"


@pytest.mark.parametrize("capture", PAGE_CAPTURES, ids=lambda p: p.parent.name if p.parent.name != "captures" else p.stem)
def test_a_zh_page_has_no_english_outside_code_names_units_and_labels(capture, tmp_path):
    if not capture.is_file():
        pytest.skip(f"no capture {capture}")
    report = tmp_path / "report.html"
    out = tcplab(capture, "--language", "zh", "-o", report)
    assert out.returncode in (0, 1), out.stderr
    lines = out.stdout.replace(str(report), "")
    assert _words(html_escape(lines)) == [], out.stdout  # the lines, by the page's rule
    assert _words(report.read_text(encoding="utf-8")) == []
    html = report.read_text(encoding="utf-8")
    # The numbers: each field named in Chinese, the field itself (its --json key) beside it as code.
    assert "<tr><th>往返时延中位数（s） <code>rtt_median_s</code></th>" in html
    assert "<tr><th>窗口缩放 <code>window_scaling</code></th><td>" in html


def test_the_english_page_is_as_before(sndbuf_pcap, tmp_path, monkeypatch):
    """English output unchanged: the numbers headed by their field names (no code beside them), word
    values as the metrics hold them, and the figures drawn as tcplab.plots draws them by default."""
    import base64

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tcplab import plots
    from tcplab.analysis import read_packets
    from tcplab.analysis.metrics import _SUMMARY

    monkeypatch.delenv("TCPLAB_LANG", raising=False)
    report = tmp_path / "report.html"
    out = tcplab(sndbuf_pcap, "-o", report)
    assert out.returncode == 0, out.stderr
    html = report.read_text(encoding="utf-8")
    heads = re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", html)
    assert [h for h, _ in heads] == list(_SUMMARY) and "<code>rtt_median_s</code>" not in html
    values = dict(heads)
    assert values["sender"] == "client" and values["window_scaling"] in ("on", "off", "unknown")
    assert values["rwnd_unknown_scale"] in ("True", "False")
    png = re.search(r'alt="time_sequence" src="data:image/png;base64,([^"]+)"', html).group(1)
    fig = plots.time_sequence(read_packets(sndbuf_pcap).packets, 0)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    assert base64.b64decode(png) == buf.getvalue()
