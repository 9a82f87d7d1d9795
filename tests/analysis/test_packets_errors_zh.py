"""The pcap engine's errors and warnings in the language in force: each reason a capture is
refused for (:class:`PcapError`), the warning for a cut-off last record (:class:`PcapWarning`)
and the flows that are not there (:class:`FlowError`), read under ``speaking("zh")``, keep the
file's path, the byte counts and the format names and leave no English sentence; in English
they say word for word what they said before they had keys; each travels (pickles) as itself."""

from __future__ import annotations

import os
import pickle
import re
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tcplab
from tcplab.analysis import PcapError, PcapWarning, read_packets
from tcplab.analysis import packets as packets_module
from tcplab.analysis.metrics import flow_metrics
from tcplab.analysis.table import FlowError, flow_view, main_flow
from tcplab.words import speaking

from .pcapgen import ACK, FIN, LINK, PSH, Conn, Interface, ethernet, udp4, write_pcap, write_pcapng

T0 = 1000.0

#: Latin words a Chinese message keeps: format and tool names, protocols.
ALLOWED = {"pcap", "pcapng", "modified", "Kuznetzov", "editcap", "TCP", "IP"}


def conversation():
    """Handshake, 1000 bytes from the client, ACK, FIN both ways: 8 frames, one flow."""
    c = Conn()
    frames = c.handshake(T0, rtt=0.01, ws=(7, 7), mss=(1460, 1400), win=(64240, 65160), ack_win=502)
    return frames + [
        (T0 + 0.02, c.send(0, ACK | PSH, 1000, win=502)),
        (T0 + 0.03, c.send(1, ACK, win=509)),
        (T0 + 0.04, c.send(0, FIN | ACK, win=502)),
        (T0 + 0.05, c.send(1, FIN | ACK, win=509)),
        (T0 + 0.06, c.send(0, ACK, win=502)),
    ]


def good_pcap(path: Path) -> Path:
    linktype, encap = LINK["ethernet"]
    write_pcap(path, [(t, encap(p)) for t, p in conversation()], linktype)
    return path


def _cannot_map(tmp_path, monkeypatch):
    path = good_pcap(tmp_path / "x.pcap")

    def refuse(*args, **kwargs):
        raise OSError("no mapping here")

    monkeypatch.setattr(packets_module.mmap, "mmap", refuse)
    return path


def _corrupt(tmp_path, monkeypatch):
    data = bytearray(good_pcap(tmp_path / "x.pcap").read_bytes())
    first_len = struct.unpack_from("<I", data, 24 + 8)[0]
    struct.pack_into("<I", data, 24 + 16 + first_len + 8, 0x7FFFFFFF)  # the second record's length
    (tmp_path / "corrupt.pcap").write_bytes(bytes(data))
    return tmp_path / "corrupt.pcap"


def _written(name, data):
    def make(tmp_path, monkeypatch):
        (tmp_path / name).write_bytes(data(tmp_path) if callable(data) else data)
        return tmp_path / name
    return make


def _pcapng(name, interfaces, packets):
    def make(tmp_path, monkeypatch):
        write_pcapng(tmp_path / name, interfaces, packets)
        return tmp_path / name
    return make


def _udp_only(tmp_path, monkeypatch):
    write_pcap(tmp_path / "udp.pcap", [(T0 + i, ethernet(udp4("10.0.0.1", "10.0.0.2"))) for i in range(3)])
    return tmp_path / "udp.pcap"


def _wifi(tmp_path, monkeypatch):
    write_pcap(tmp_path / "wifi.pcap", [(T0, b"\x00" * 60)], linktype=105)
    return tmp_path / "wifi.pcap"


def _header(tmp_path) -> bytes:
    return good_pcap(tmp_path / "x.pcap").read_bytes()[:24]


#: reason -> (a file refused for it, its English message with {path} for the file's path).
BAD_FILES = {
    "cannot_open": (lambda tmp_path, mp: tmp_path / "nope.pcap", "{path}: cannot open: No such file or directory"),
    "empty": (_written("empty.pcap", b""), "{path}: empty file (0 bytes), not a capture"),
    "cannot_map": (_cannot_map, "{path}: cannot map the file (not a regular file?): no mapping here"),
    "modified_pcap": (_written("kuz.pcap", b"\x34\xcd\xb2\xa1" + b"\x00" * 40),
                      "{path}: 'modified' (Kuznetzov) pcap format is not supported; convert it with editcap"),
    "not_pcap": (_written("notes.pcap", b"these are my notes\n" * 4),
                 "{path}: not a pcap or pcapng file (starts with b'these ar')"),
    "truncated_header": (_written("short.pcap", lambda tmp_path: _header(tmp_path)[:10]),
                         "{path}: truncated pcap file header (10 of 24 bytes)"),
    "pcapng_empty": (_pcapng("bare.pcapng", [], []), "{path}: pcapng file without any interface or packet"),
    "corrupt_record": (_corrupt, "{path}: corrupt record header at byte 102 (after frame 1); file is damaged"),
    "unknown_interface": (_pcapng("noif.pcapng", [Interface(1)], [(1, 0, ethernet(conversation()[0][1]))]),
                          "{path}: packet block names an interface no interface block described at byte 48 "
                          "(after frame 0); file is damaged"),
    "too_many_interfaces": (_pcapng("ifs.pcapng", [Interface(1)] * 4097, []),
                            "{path}: more than 4096 interfaces at byte 81948 (after frame 0); file is damaged"),
    "no_frames": (_written("header.pcap", _header), "{path}: no frames in the file"),
    "no_frames_cut_off": (_written("cut1.pcap", lambda tmp_path: _header(tmp_path) + b"\x00" * 10),
                          "{path}: no frames in the file (its only record is cut off)"),
    "no_tcp": (_udp_only, "{path}: no TCP packets among 3 frames (3 not TCP)"),
}


def _refusal(reason, tmp_path, monkeypatch, language) -> tuple[PcapError, Path]:
    make, _ = BAD_FILES[reason]
    path = make(tmp_path, monkeypatch)
    with speaking(language), pytest.raises(PcapError) as info:
        read_packets(path)
    return info.value, path


def _leftover(text: str, *kept: str) -> list[str]:
    """The Latin words of a Chinese message that are none of its path, what it quotes and ALLOWED."""
    for part in kept:
        text = text.replace(part, " ")
    text = re.sub(r"b'[^']*'", " ", text)  # the bytes a file starts with, as Python writes them
    return [w for w in re.findall(r"[A-Za-z][A-Za-z_]*", text) if w not in ALLOWED]


def _chinese(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


@pytest.mark.parametrize("reason", sorted(BAD_FILES))
def test_english_refusal_says_what_it_said(reason, tmp_path, monkeypatch):
    error, path = _refusal(reason, tmp_path, monkeypatch, "en")
    assert error.reason == reason
    assert str(error) == BAD_FILES[reason][1].format(path=path)


@pytest.mark.parametrize("reason", sorted(BAD_FILES))
def test_chinese_refusal_keeps_the_path_and_no_english_sentence(reason, tmp_path, monkeypatch):
    error, path = _refusal(reason, tmp_path, monkeypatch, "zh")
    said = str(error)
    assert said.startswith(f"{path}：") and _chinese(said) and "\n" not in said, said
    # What the system said of the file (strerror, mmap's error) is quoted as it was.
    quoted = {"cannot_open": "No such file or directory", "cannot_map": "no mapping here"}.get(reason, "")
    assert _leftover(said, str(path), *filter(None, [quoted])) == [], said
    assert isinstance(error, ValueError)


def test_unsupported_link_type_is_named_in_both_languages(tmp_path):
    path = _wifi(tmp_path, None)
    with speaking("en"), pytest.raises(PcapError) as info:
        read_packets(path)
    assert str(info.value) == (f"{path}: no TCP packets among 1 frames (1 unsupported link type); "
                               "unsupported link type(s) [105]")
    with speaking("zh"), pytest.raises(PcapError) as info:
        read_packets(path)
    said = str(info.value)
    assert said == f"{path}：1 帧中没有 TCP 报文（1 帧链路类型不受支持）；不支持的链路类型：[105]"
    assert _leftover(said, str(path)) == []


@pytest.mark.parametrize("reason", ["not_pcap", "no_tcp", "corrupt_record"])
def test_a_refusal_travels_as_itself_and_says_what_it_said_where_it_arose(reason, tmp_path, monkeypatch):
    for language in ("zh", "en"):
        error, _ = _refusal(reason, tmp_path, monkeypatch, language)
        with speaking("en" if language == "zh" else "zh"):  # unpickled where another language is in force
            again = pickle.loads(pickle.dumps(error))
        assert type(again) is PcapError and str(again) == str(error)
        assert again.reason == error.reason and again.fields == error.fields


def _cut(tmp_path) -> Path:
    whole = good_pcap(tmp_path / "x.pcap").read_bytes()
    (tmp_path / "cut.pcap").write_bytes(whole[:-20])
    return tmp_path / "cut.pcap"


CUT_OFF = ("file ends inside a record at byte {end} (after frame 7): the capture was cut off; "
           "that last record was dropped")


def test_cut_off_warning_in_english_is_unchanged(tmp_path):
    path = _cut(tmp_path)
    end = _record_starts(path)[-1]  # where the cut-off record starts
    with speaking("en"), pytest.warns(PcapWarning) as caught:
        table = read_packets(path)
    assert [str(w.message) for w in caught] == [f"{path}: " + CUT_OFF.format(end=end)]
    assert table.source.warnings == (CUT_OFF.format(end=end),)


def _record_starts(path: Path) -> list[int]:
    """Where each record of a little-endian pcap file starts, the cut-off last one included."""
    data = path.read_bytes()
    pos, starts = 24, []
    while pos + 16 <= len(data):
        starts.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    if pos < len(data):
        starts.append(pos)
    return starts


def test_cut_off_warning_in_chinese(tmp_path):
    path = _cut(tmp_path)
    with speaking("zh"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_packets(path)
    [warning] = [w for w in caught if issubclass(w.category, PcapWarning)]
    said = str(warning.message)
    assert said.startswith(f"{path}：") and "第 7 帧之后" in said and "截断" in said, said
    assert _leftover(said, str(path)) == []
    assert table.source.warnings[0] in said and _chinese(table.source.warnings[0])
    again = pickle.loads(pickle.dumps(warning.message))
    assert type(again) is PcapWarning and str(again) == said


def test_flows_that_are_not_there_in_both_languages(tmp_path):
    path = good_pcap(tmp_path / "one.pcap")
    table = read_packets(path)
    english = {}
    chinese = {}
    for language, said in (("en", english), ("zh", chinese)):
        with speaking(language):
            for name, call in (("select", lambda: read_packets(path, flow=5)),
                               ("metrics", lambda: flow_metrics(table, 4)),
                               ("empty", lambda: flow_metrics(table.between(50, 60))),
                               ("plot", lambda: flow_view(table, 7)),
                               ("payload", lambda: flow_view(table, 0, 1)),
                               ("nothing", lambda: flow_view(table.packets.iloc[:0])),
                               ("main", lambda: main_flow(table.packets.iloc[:0]))):
                with pytest.raises(FlowError) as info:
                    call()
                said[name] = str(info.value)
                assert isinstance(info.value, ValueError)
                assert str(pickle.loads(pickle.dumps(info.value))) == said[name]
    assert english == {
        "select": f"{path}: no flow 5 (flows are 0..0)",
        "metrics": f"{path}: no flow 4 (flows are 0..0)",
        "empty": f"{path}: no TCP flow",
        "plot": "flow 7 has no packets (flows present: [0])",
        "payload": "flow 0 carries no payload in direction 1: nothing to plot",
        "nothing": "no packets to plot",
        "main": "no TCP packets",
    }
    for name, said in chinese.items():
        assert _chinese(said) and _leftover(said, str(path)) == [], said
    assert chinese["select"] == f"{path}：没有流 5（现有的流：0..0）"


def _diagnose(*args) -> subprocess.CompletedProcess:
    lib = str(Path(tcplab.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [lib, os.environ.get("PYTHONPATH")]))}
    env.pop("TCPLAB_LANG", None)
    return subprocess.run([sys.executable, "-m", "tcplab.commands", "diagnose", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_diagnose_says_a_damaged_capture_in_chinese(tmp_path):
    bad = tmp_path / "capture.pcap"
    bad.write_bytes(b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n" * 4)
    out = _diagnose(bad, "--language", "zh")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"tcplab diagnose: {bad}：不是 pcap 或 pcapng 文件（开头为 b'GET / HT'）\n"

    cut = _cut(tmp_path)
    out = _diagnose(cut, "--language", "zh", "--list")
    assert out.returncode == 0, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith(f"tcplab diagnose: 警告：{cut}：文件在第 ") and "截断" in line, line


def test_a_folder_row_says_why_a_file_was_not_diagnosed_in_the_language_asked_for(tmp_path):
    from tcplab.analysis.batch import diagnose_file

    bad = tmp_path / "notes.pcap"
    bad.write_bytes(b"not packets\n")
    with speaking("en"):  # what the caller speaks does not reach a worker: the argument does
        [row] = diagnose_file(bad, language="zh")
        assert row["error"] == f"PcapError: {bad}：不是 pcap 或 pcapng 文件（开头为 b'not pack'）"
        [row] = diagnose_file(bad)
        assert row["error"] == f"PcapError: {bad}: not a pcap or pcapng file (starts with b'not pack')"
