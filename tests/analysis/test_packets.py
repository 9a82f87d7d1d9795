"""The pcap engine: formats, link types, IP versions, relative numbers, windows, flows,
errors. Expected values are worked out from how each capture is built; tshark checks the
rest cell by cell."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pandas as pd
import pytest

from tcplab.analysis import PcapError, PcapWarning, analyze, read_packets
from tcplab.analysis.packets import FLOW_COLUMNS, PACKET_COLUMNS

from .pcapgen import (
    ACK, FIN, LINK, PSH, SYN, Conn, Interface, ethernet, nops, opt_sack, opt_ts, sll2, udp4, write_pcap,
    write_pcapng,
)

T0 = 1000.0


def conversation(conn=None, ws=(7, 7), handshake=True):
    """Handshake, 1000 bytes from the client, ACK, FIN both ways: 8 frames."""
    c = conn or Conn()
    frames = c.handshake(T0, rtt=0.01, ws=ws, mss=(1460, 1400), win=(64240, 65160), ack_win=502)
    if not handshake:
        frames = []
    frames += [
        (T0 + 0.02, c.send(0, ACK | PSH, 1000, win=502)),
        (T0 + 0.03, c.send(1, ACK, win=509)),
        (T0 + 0.04, c.send(0, FIN | ACK, win=502)),
        (T0 + 0.05, c.send(1, FIN | ACK, win=509)),
        (T0 + 0.06, c.send(0, ACK, win=502)),
    ]
    return frames


def write(path, frames, link="ethernet", **kw):
    linktype, encap = LINK[link]
    write_pcap(path, [(t, encap(p)) for t, p in frames], linktype, **kw)
    return path


@pytest.fixture
def simple(tmp_path):
    return write(tmp_path / "simple.pcap", conversation())


def test_columns_of_a_complete_connection(simple):
    table = read_packets(simple)
    p = table.packets
    assert tuple(p.columns[:len(PACKET_COLUMNS)]) == PACKET_COLUMNS
    assert p["frame"].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert p["flow"].tolist() == [0] * 8
    assert p["dir"].tolist() == [0, 1, 0, 0, 1, 0, 1, 0]
    assert p["seq"].tolist() == [0, 0, 1, 1, 1, 1001, 1, 1002]
    assert p["ack"].tolist() == [0, 1, 1, 1, 1001, 1, 1002, 2]
    assert p["seq_raw"].tolist() == [1000, 5000, 1001, 1001, 5001, 2001, 5001, 2002]
    assert p["len"].tolist() == [0, 0, 0, 1000, 0, 0, 0, 0]
    # SYNs are never scaled; afterwards each side's window is shifted by its own scale.
    assert p["win"].tolist() == [64240, 65160] + [502 << 7, 502 << 7, 509 << 7, 502 << 7, 509 << 7, 502 << 7]
    assert p["win_raw"].tolist()[:3] == [64240, 65160, 502]
    assert p["mss"].tolist()[:3] == [1460, 1400, 0]
    assert p["wscale"].tolist()[:3] == [7, 7, -1]
    assert p["f_syn"].tolist()[:3] == [True, True, False]
    assert p["f_fin"].tolist() == [False] * 5 + [True, True, False]
    assert p["f_psh"].tolist()[3] and p["f_ack"].tolist()[1:] == [True] * 7
    assert p["flags"].tolist()[:2] == [SYN, SYN | ACK]
    assert p["time"].iloc[0] == T0 and p["rel_time"].tolist()[-1] == pytest.approx(0.06)
    assert p["time_ns"].iloc[3] == int(T0 * 1e9) + 20_000_000
    assert not p["snaplen_truncated"].any()
    assert (p["ts_val"] == -1).all() and (p["sack_count"] == 0).all()
    assert not any(p[c].dtype == object for c in p.columns), "no per-packet Python objects"

    f = table.flows
    assert tuple(f.columns) == FLOW_COLUMNS
    row = f.iloc[0].to_dict()
    assert row == {
        "flow": 0, "ip_version": 4, "client": "10.0.0.1", "client_port": 40000, "server": "10.0.0.2",
        "server_port": 80, "handshake": True, "wscale_client": 7, "wscale_server": 7, "window_scaling": "on",
        "mss_client": 1460, "mss_server": 1400, "packets": 8, "bytes_c2s": 1000, "bytes_s2c": 0,
        "first": T0, "last": pytest.approx(T0 + 0.06), "reused_ports": False,
    }
    s = table.source
    assert (s.format, s.link_types, s.frames, s.packets, s.skipped, s.complete) == ("pcap", (1,), 8, 8, 0, True)


@pytest.mark.parametrize("link,ip", [(link, ip) for link in sorted(LINK) for ip in (4, 6)
                                     if (link, ip) not in {("ipv4", 6), ("ipv6", 4)}])
def test_every_link_type_gives_the_same_columns(tmp_path, link, ip, matches_tshark):
    v6 = ip == 6
    mk = lambda: Conn(v6=v6, client=("fd00::1" if v6 else "10.0.0.1", 40000),
                      server=("fd00::2" if v6 else "10.0.0.2", 80))
    ref = read_packets(write(tmp_path / "ref.pcap", conversation(mk())))
    path = write(tmp_path / f"{link}.pcap", conversation(mk()), link)
    table = matches_tshark(path)
    assert table.source.link_types == (LINK[link][0],)
    pd.testing.assert_frame_equal(table.packets, ref.packets)
    pd.testing.assert_frame_equal(table.flows, ref.flows)
    assert table.flows["client"].iloc[0] == ("fd00::1" if v6 else "10.0.0.1")


def test_ipv6_extension_headers_and_fragments(tmp_path, matches_tshark):
    hop_by_hop = bytes([60, 0, 1, 4, 0, 0, 0, 0])  # next: destination options; PadN
    dest_opts = bytes([6, 0, 1, 4, 0, 0, 0, 0])  # next: TCP
    c = Conn(v6=True, client=("fd00::1", 40000), server=("fd00::2", 80), ext=hop_by_hop + dest_opts, ext_first=0)
    frames = conversation(c)
    ref = read_packets(write(tmp_path / "plain6.pcap",
                             conversation(Conn(v6=True, client=("fd00::1", 40000), server=("fd00::2", 80)))))
    table = matches_tshark(write(tmp_path / "ext6.pcap", frames))
    pd.testing.assert_frame_equal(table.packets, ref.packets)

    # A non-first fragment carries no TCP header: left out, and counted as such.
    frag = bytes([6, 0, 0x00, 0x08 | 1, 0, 0, 0, 7])  # offset 1 (x8 bytes), more fragments
    tail = frames[3][1][:4] + struct.pack("!H", 8 + 16) + bytes([44]) + frames[3][1][7:40] + frag + b"\x00" * 16
    table = read_packets(write(tmp_path / "frag6.pcap", frames[:4] + [(T0 + 0.021, tail)] + frames[4:]))
    assert table.source.frames == 9 and table.source.packets == 8
    assert table.source.skipped_by_reason == {"IP fragment": 1}
    assert table.packets["frame"].tolist() == [1, 2, 3, 4, 6, 7, 8, 9]


def test_ipv4_non_first_fragment_and_other_protocols_are_skipped(tmp_path):
    from .pcapgen import ipv4

    frames = conversation()
    frag = ipv4("10.0.0.1", "10.0.0.2", b"\x00" * 64, proto=6, frag_offset=1480)
    frames = frames[:4] + [(T0 + 0.021, frag), (T0 + 0.022, udp4("10.0.0.1", "10.0.0.9"))] + frames[4:]
    table = read_packets(write(tmp_path / "frag4.pcap", frames))
    assert table.source.frames == 10 and table.source.packets == 8
    assert table.source.skipped_by_reason == {"not TCP": 1, "IP fragment": 1}
    # Frame numbers keep counting the frames that were left out, like Wireshark's.
    assert table.packets["frame"].tolist() == [1, 2, 3, 4, 7, 8, 9, 10]


def test_pcapng_with_two_interfaces_of_different_link_types(tmp_path, matches_tshark):
    a = conversation(Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 80)))
    b = conversation(Conn(client=("10.1.0.1", 50000), server=("10.1.0.2", 443)))
    # Interface 0: Ethernet, microseconds (default). Interface 1: SLL2, nanoseconds.
    # Interface 2: raw IP with binary resolution 2^-20 s, unused but present.
    interfaces = [Interface(1), Interface(276, tsresol=9), Interface(101, tsresol=0x80 | 20)]
    packets = []
    for i in range(8):
        packets.append((0, round(a[i][0] * 1e6), ethernet(a[i][1])))
        packets.append((1, round(b[i][0] * 1e9) + 5, sll2(b[i][1])))
    extra = [(3, 4, struct.pack("<HH", 0, 0)),  # name resolution block: not a frame
             (9, 0x00000BAD, b"\x00" * 8)]  # custom block: a frame in Wireshark, not TCP
    path = tmp_path / "two.pcapng"
    write_pcapng(path, interfaces, packets, extra_blocks=extra)
    table = matches_tshark(path)
    p = table.packets
    assert table.source.format == "pcapng" and table.source.link_types == (1, 276, 101)
    assert p["frame"].tolist() == list(range(1, 10)) + list(range(11, 18))
    assert table.source.frames == 17 and table.source.skipped_by_reason == {"not IP": 1}
    assert p["flow"].tolist() == [0, 1] * 8
    assert table.flows["server_port"].tolist() == [80, 443]
    assert p["time_ns"].iloc[0] == round(a[0][0] * 1e6) * 1000
    assert p["time_ns"].iloc[1] == round(b[0][0] * 1e9) + 5
    assert p["rel_time"].iloc[1] == pytest.approx(5e-9, abs=1e-12)
    ref = read_packets(write(tmp_path / "a.pcap", a))
    mine = p[p["flow"] == 0].reset_index(drop=True)
    for col in ("seq", "ack", "len", "win", "dir", "mss", "wscale", "retransmission", "bytes_in_flight"):
        assert mine[col].tolist() == ref.packets[col].tolist(), col


def test_pcapng_big_endian_binary_resolution_offset_and_simple_packets(tmp_path, matches_tshark):
    a = conversation()
    # 2^-20 s ticks, plus a 100 s offset: 1000.5 s is exactly 1048576 * 900.5 ticks.
    itf = [Interface(1, tsresol=0x80 | 20, tsoffset=100)]
    packets = [(0, (1 << 20) * 900 + (1 << 19), ethernet(a[0][1]))]
    packets += [("spb", None, ethernet(p)) for _, p in a[1:3]]
    packets += [(0, round((t - 100) * (1 << 20)), ethernet(p)) for t, p in a[3:]]
    path = tmp_path / "be.pcapng"
    write_pcapng(path, itf, packets, big_endian=True)
    table = matches_tshark(path)
    p = table.packets
    assert p["time_ns"].iloc[0] == 1_000_500_000_000
    assert p["time_ns"].iloc[1] == 0 and p["time_ns"].iloc[2] == 0  # SPBs have no timestamp
    assert p["seq"].tolist() == [0, 0, 1, 1, 1, 1001, 1, 1002]


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path, big_endian, nanos, matches_tshark):
    base = 1_700_000_000_123_456_789
    frames = [(base + i * 1_000_001 if nanos else (base + i * 1_000_001) / 1e9, p)
              for i, (_, p) in enumerate(conversation())]
    path = write(tmp_path / "x.pcap", frames, nanos=nanos, big_endian=big_endian)
    table = matches_tshark(path)
    p = table.packets
    if nanos:
        assert p["time_ns"].tolist() == [base + i * 1_000_001 for i in range(8)]
        assert p["rel_time"].iloc[7] == pytest.approx(7 * 1_000_001e-9, abs=1e-12)
    else:
        assert (p["time_ns"] % 1000 == 0).all()
        assert abs(p["time_ns"].iloc[0] - base) <= 1000
    assert p["seq"].tolist() == [0, 0, 1, 1, 1, 1001, 1, 1002]


def test_without_handshake_the_window_scale_is_unknown(tmp_path, matches_tshark):
    table = matches_tshark(write(tmp_path / "mid.pcap", conversation(handshake=False)))
    p = table.packets
    assert p["dir"].tolist() == [0, 1, 0, 1, 0]  # the first sender counts as the client
    assert p["seq"].tolist() == [1, 1, 1001, 1, 1002]  # relative to first seq - 1
    assert p["ack"].tolist() == [1, 1001, 1, 1002, 2]
    assert (p["win"] == -1).all()
    row = table.flows.iloc[0]
    assert (row.handshake, row.window_scaling, row.wscale_client, row.mss_client) == (False, "unknown", -1, 0)


@pytest.mark.parametrize("ws,scaling", [((None, None), "off"), ((7, None), "off"), ((None, 7), "off"),
                                        ((0, 0), "on"), ((14, 3), "on")])
def test_window_scaling_needs_the_option_on_both_syns(tmp_path, ws, scaling, matches_tshark):
    table = matches_tshark(write(tmp_path / "ws.pcap", conversation(ws=ws)))
    p = table.packets
    assert table.flows["window_scaling"].iloc[0] == scaling
    after = p.iloc[2:]
    shift = {0: ws[0], 1: ws[1]}
    for d in (0, 1):
        rows = after[after["dir"] == d]
        expect = rows["win_raw"].to_numpy(np.int64) << (shift[d] if scaling == "on" else 0)
        assert rows["win"].tolist() == expect.tolist()


def test_synack_first_makes_its_receiver_the_client(tmp_path, matches_tshark):
    frames = conversation()[1:]  # SYN not captured
    p = matches_tshark(write(tmp_path / "synack.pcap", frames)).packets
    assert p["dir"].tolist() == [1, 0, 0, 1, 0, 1, 0]


def test_retransmitted_syn_stays_in_its_flow_and_a_new_isn_opens_another(tmp_path, matches_tshark):
    c = Conn()
    frames = [(T0, c.send(0, SYN, win=64240)), (T0 + 1, c.send(0, SYN, win=64240, seq=c.isn[0]))]
    c2 = Conn(isn=(777777, 888888))
    frames += [(T0 + 2 + t - T0, p) for t, p in conversation(c2)]
    table = matches_tshark(write(tmp_path / "reuse.pcap", frames))
    assert table.packets["flow"].tolist() == [0, 0] + [1] * 8
    assert table.flows["reused_ports"].tolist() == [False, True]
    assert table.packets["reused_ports"].tolist() == [False, False, True] + [False] * 7
    assert table.packets["retransmission"].tolist()[:2] == [False, True]


def test_sequence_numbers_wrapping_past_2_32(tmp_path, matches_tshark):
    c = Conn(isn=(2**32 - 100, 2**32 - 1))
    frames = c.handshake(T0) + [(T0 + 0.02 + i / 1000, c.send(0, ACK, 1000, win=502)) for i in range(3)]
    frames.append((T0 + 0.05, c.send(1, ACK, win=502)))
    p = matches_tshark(write(tmp_path / "wrap.pcap", frames)).packets
    assert p["seq"].tolist() == [0, 0, 1, 1, 1001, 2001, 1]
    assert p["seq_raw"].tolist()[3:6] == [2**32 - 99, 901, 1901]
    assert p["ack"].tolist()[-1] == 3001 and p["ack_raw"].tolist()[-1] == 2901


def test_relative_sequence_numbers_keep_growing_beyond_4_gib(tmp_path, matches_tshark):
    # 66,000 segments of 65,495 bytes (4.32 GB), captured with a 40-byte snaplen: raw IP,
    # headers only, the total length in the IP header telling the real size.
    isn, count, seglen = 3_000_000_000, 66_000, 65_495
    tmpl = bytearray(struct.pack("!BBHHHBBH4s4sHHIIBBHHH", 0x45, 0, 40 + seglen, 0, 0x4000, 64, 6, 0,
                                 bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 40000, 80, 0, 0, 0x50, ACK, 500, 0, 0))
    ack_tmpl = bytearray(struct.pack("!BBHHHBBH4s4sHHIIBBHHH", 0x45, 0, 40, 0, 0x4000, 64, 6, 0,
                                     bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1]), 80, 40000, 0, 0, 0x50, ACK, 500,
                                     0, 0))
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 40, 101)]
    seq = isn
    for i in range(count):
        struct.pack_into("!II", tmpl, 24, seq & 0xFFFFFFFF, 7)
        out.append(struct.pack("<IIII", 1000 + i // 10000, (i % 10000) * 100, 40, 40 + seglen) + tmpl)
        seq += seglen
        if i % 50 == 49:
            struct.pack_into("!II", ack_tmpl, 24, 7, seq & 0xFFFFFFFF)
            out.append(struct.pack("<IIII", 1000 + i // 10000, (i % 10000) * 100 + 50, 40, 40) + ack_tmpl)
    path = tmp_path / "big.pcap"
    path.write_bytes(b"".join(out))
    table = matches_tshark(path)
    data = table.packets[table.packets["dir"] == 0]
    assert len(data) == count
    seqs = data["seq"].to_numpy()
    assert (np.diff(seqs) == seglen).all() and seqs[0] == 1
    assert seqs[-1] == 1 + (count - 1) * seglen > 2**32
    assert (data["len"] == seglen).all()
    assert table.flows["bytes_c2s"].iloc[0] == count * seglen


def test_snaplen_64_keeps_lengths_from_the_ip_header(tmp_path, matches_tshark):
    from .pcapgen import opt_mss, opt_sack_perm, opt_ws

    c = Conn()
    syn_opts = opt_mss(1460) + opt_sack_perm() + opt_ts(1, 0) + nops(1) + opt_ws(7)  # Linux's order
    frames = [(T0, c.send(0, SYN, win=64240, opts=syn_opts)),
              (T0 + 0.005, c.send(1, SYN | ACK, win=65160, opts=syn_opts)),
              (T0 + 0.01, c.send(0, ACK, win=502))]
    frames += [(T0 + 0.02 + i / 1000, c.send(0, ACK | PSH, 1448, win=502)) for i in range(3)]
    frames.append((T0 + 0.03, c.send(1, ACK, win=509)))
    path = write(tmp_path / "snap64.pcap", frames, snaplen=64)
    table = matches_tshark(path)
    p = table.packets
    assert p["len"].tolist() == [0, 0, 0, 1448, 1448, 1448, 0]
    # 14 + 20 + 20 bytes of headers leave 10 bytes of options: MSS and SACK-permitted
    # fit, the timestamp and window-scale options do not.
    assert p["snaplen_truncated"].tolist() == [True, True, False, False, False, False, False]
    assert p["mss"].tolist()[:2] == [1460, 1460]
    assert p["wscale"].tolist()[:2] == [-1, -1] and p["ts_val"].tolist()[:2] == [-1, -1]
    assert (p["win"].iloc[2:] == -1).all()  # the scale was cut off: unknown, as in Wireshark
    assert table.flows["bytes_c2s"].iloc[0] == 3 * 1448


def test_zero_ip_total_length_is_taken_as_tso(tmp_path, matches_tshark):
    """A sender-side capture of a segmentation-offload packet can carry IP total length 0;
    like Wireshark, the frame's length on the wire then gives the segment's size."""
    from .pcapgen import ipv4, tcp_segment

    c = Conn()
    frames = c.handshake(T0)
    big = tcp_segment(40000, 80, c.nxt[0], c.nxt[1], ACK, 502, payload=b"\x00" * 3000)
    frames.append((T0 + 0.02, ipv4("10.0.0.1", "10.0.0.2", big, total_length=0)))
    frames.append((T0 + 0.03, c.send(1, ACK, ack=c.nxt[0] + 3000, win=509)))
    p = matches_tshark(write(tmp_path / "tso.pcap", frames, snaplen=96)).packets
    assert p["len"].tolist() == [0, 0, 0, 3000, 0]
    assert p["ack"].tolist()[-1] == 3001


def test_ip_length_beyond_the_frame_falls_back_to_the_frame(tmp_path, matches_tshark):
    from .pcapgen import ipv4, tcp_segment

    c = Conn()
    frames = c.handshake(T0)
    seg = tcp_segment(40000, 80, c.nxt[0], c.nxt[1], ACK, 502, payload=b"\x00" * 100)
    frames.append((T0 + 0.02, ipv4("10.0.0.1", "10.0.0.2", seg, total_length=2000)))
    p = matches_tshark(write(tmp_path / "bogus.pcap", frames)).packets
    assert p["len"].tolist() == [0, 0, 0, 100]


def test_sack_blocks_and_timestamps(tmp_path, matches_tshark):
    c = Conn()
    frames = c.handshake(T0)
    frames += [(T0 + 0.02 + i / 1000, c.send(0, ACK, 1000, win=502, opts=nops(2) + opt_ts(100 + i, 9)))
               for i in range(6)]
    base = c.isn[0] + 1
    blocks = [(base + 2000, base + 3000), (base + 4000, base + 5000), (base + 5000, base + 6000),
              (base + 1000, base + 1500)]
    frames.append((T0 + 0.03, c.send(1, ACK, ack=base + 1000, win=509, opts=nops(2) + opt_sack(blocks))))
    p = matches_tshark(write(tmp_path / "sack.pcap", frames)).packets
    last = p.iloc[-1]
    assert last["sack_count"] == 4
    assert [last[f"sack_le{j}"] for j in range(1, 5)] == [2001, 4001, 5001, 1001]
    assert [last[f"sack_re{j}"] for j in range(1, 5)] == [3001, 5001, 6001, 1501]
    assert p["ts_val"].tolist()[3:9] == [100, 101, 102, 103, 104, 105]
    assert p["ts_ecr"].tolist()[3] == 9
    assert (p["sack_le1"].iloc[:-1] == -1).all()


def test_flow_selection_keeps_analysis_of_the_whole_capture(tmp_path):
    a = conversation(Conn(client=("10.0.0.1", 40000)))
    b = conversation(Conn(client=("10.0.0.3", 40001)))
    frames = sorted(a + [(t + 0.001, p) for t, p in b], key=lambda x: x[0])
    path = write(tmp_path / "two.pcap", frames)
    whole = read_packets(path)
    one = read_packets(path, flow=1)
    assert one.packets["flow"].unique().tolist() == [1] and one.flows["flow"].tolist() == [1]
    expect = whole.packets[whole.packets["flow"] == 1].reset_index(drop=True)
    pd.testing.assert_frame_equal(one.packets, expect)
    assert len(read_packets(path, flow=[0, 1]).packets) == 16
    with pytest.raises(ValueError, match="no flow 5"):
        read_packets(path, flow=5)


def test_analyze_adds_the_same_columns_as_read_packets(simple):
    plain = read_packets(simple, expert=False)
    assert "retransmission" not in plain.packets.columns
    pd.testing.assert_frame_equal(analyze(plain).packets, read_packets(simple).packets)
    again = analyze(read_packets(simple))
    pd.testing.assert_frame_equal(again.packets, read_packets(simple).packets)


# ---------------------------------------------------------------- bad files


def one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    with pytest.raises(PcapError) as exc:
        read_packets(path)
    assert str(path) in one_line(exc) and "empty" in one_line(exc)


def test_text_file_renamed_pcap(tmp_path):
    path = tmp_path / "notes.pcap"
    path.write_text("these are my notes, not a capture\n" * 10)
    with pytest.raises(PcapError) as exc:
        read_packets(path)
    assert str(path) in one_line(exc) and "not a pcap or pcapng file" in one_line(exc)
    assert isinstance(exc.value, ValueError)


def test_missing_file(tmp_path):
    with pytest.raises(PcapError, match="cannot open"):
        read_packets(tmp_path / "nope.pcap")


def test_truncated_file_header(tmp_path):
    path = tmp_path / "short.pcap"
    path.write_bytes(write(tmp_path / "x.pcap", conversation()).read_bytes()[:10])
    with pytest.raises(PcapError, match="truncated pcap file header"):
        read_packets(path)


@pytest.mark.parametrize("cut", [5, 20, 70])
def test_cut_off_last_record_is_dropped_with_a_warning(tmp_path, cut):
    whole = write(tmp_path / "x.pcap", conversation()).read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(whole[:-cut])  # ends inside the last record (its header or its data)
    with pytest.warns(PcapWarning, match="cut off"):
        table = read_packets(path)
    assert not table.source.complete and table.source.frames == 7
    assert table.packets["frame"].tolist() == list(range(1, 8))
    assert "cut off" in table.source.warnings[0]


def test_corrupt_record_length_is_an_error(tmp_path):
    data = bytearray(write(tmp_path / "x.pcap", conversation()).read_bytes())
    # Second record's captured length -> 0x7fffffff: not a packet any tool would write.
    first_len = struct.unpack_from("<I", data, 24 + 8)[0]
    struct.pack_into("<I", data, 24 + 16 + first_len + 8, 0x7FFFFFFF)
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(bytes(data))
    with pytest.raises(PcapError) as exc:
        read_packets(path)
    assert "corrupt record header" in one_line(exc) and "after frame 1" in one_line(exc)


def test_pcapng_packet_for_an_undeclared_interface_is_an_error(tmp_path):
    path = tmp_path / "noif.pcapng"
    write_pcapng(path, [Interface(1)], [(1, 0, ethernet(conversation()[0][1]))])
    with pytest.raises(PcapError, match="interface"):
        read_packets(path)


def test_file_without_tcp(tmp_path):
    path = write(tmp_path / "udp.pcap", [(T0 + i, udp4("10.0.0.1", "10.0.0.2")) for i in range(3)])
    with pytest.raises(PcapError) as exc:
        read_packets(path)
    assert "no TCP packets among 3 frames (3 not TCP)" in one_line(exc)


def test_unsupported_link_type_is_named(tmp_path):
    path = tmp_path / "wifi.pcap"
    write_pcap(path, [(T0, b"\x00" * 60)], linktype=105)
    with pytest.raises(PcapError, match=r"unsupported link type\(s\) \[105\]"):
        read_packets(path)


def test_no_warning_for_a_complete_file(simple):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_packets(simple)


def test_more_open_connections_than_the_first_flow_table_holds(tmp_path, matches_tshark):
    # 5,000 connections open at once: the connection table grows several times (first at the
    # 513th) while every one of them is still open, and each must keep its flow afterwards.
    n = 5000
    conns = [Conn(client=("10.0.%d.%d" % (i // 250, i % 250 + 1), 40000 + i % 20000)) for i in range(n)]
    step = 1e-4
    frames = [(T0 + step * i, c.send(0, SYN, win=64240)) for i, c in enumerate(conns)]
    frames += [(T0 + 1 + step * i, c.send(1, SYN | ACK, win=65160)) for i, c in enumerate(conns)]
    frames += [(T0 + 2 + step * i, c.send(0, ACK | PSH, 100, win=502)) for i, c in enumerate(conns)]
    frames += [(T0 + 3 + step * i, c.send(1, ACK, win=509)) for i, c in enumerate(conns)]
    table = matches_tshark(write(tmp_path / "many.pcap", frames))
    assert len(table.flows) == n
    assert table.packets["flow"].tolist() == list(range(n)) * 4
    assert not table.packets["retransmission"].any()
