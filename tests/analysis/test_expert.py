"""Wireshark's TCP expert analysis: scripted situations whose flags follow from
Wireshark's documented rules, each also checked cell by cell against tshark; then random
captures and a long one-way capture, where tshark alone is the reference."""

from __future__ import annotations

import pytest

from tcplab.analysis import _tshark, analyze, read_packets
from tcplab.analysis.packets import select_flows

from .pcapgen import ACK, FIN, PSH, RST, SYN, Conn, ethernet, nops, opt_sack, random_capture, write_pcap

T0 = 2000.0
MSS = 1448


def write(path, frames, snaplen=262144):
    write_pcap(path, [(t, ethernet(p)) for t, p in frames], 1, snaplen=snaplen)
    return path


def at(table, column):
    """Frame numbers where a boolean column is True."""
    p = table.packets
    return p.loc[p[column], "frame"].tolist()


def value(table, frame, column):
    return table.packets.set_index("frame").at[frame, column]


def start(ws=(7, 7), win=(64240, 65160)):
    """A connection and its handshake (frames 1-3, RTT 10 ms)."""
    c = Conn()
    return c, c.handshake(T0, rtt=0.010, ws=ws, win=win)


def test_timeout_retransmission_and_rtt_from_the_first_transmission(tmp_path, matches_tshark):
    c, f = start()
    f += [(T0 + 0.020, c.send(0, ACK, 1000, win=502)),  # 4
          (T0 + 0.021, c.send(0, ACK, 1000, win=502)),  # 5
          (T0 + 0.300, c.send(0, ACK, 1000, seq=c.isn[0] + 1, win=502)),  # 6: resend of 4
          (T0 + 0.310, c.send(1, ACK, ack=c.isn[0] + 1001, win=509)),  # 7
          (T0 + 0.320, c.send(1, ACK, win=509))]  # 8
    t = matches_tshark(write(tmp_path / "rto.pcap", f))
    assert at(t, "retransmission") == [6]
    assert at(t, "fast_retransmission") == at(t, "spurious_retransmission") == at(t, "out_of_order") == []
    # Frame 7 ACKs the data of frames 4 and 6: Wireshark takes the RTT from the first.
    assert value(t, 7, "acks_frame") == 4 and value(t, 7, "ack_rtt") == pytest.approx(0.290)
    assert value(t, 8, "acks_frame") == 5 and value(t, 8, "ack_rtt") == pytest.approx(0.299)
    assert value(t, 2, "ack_rtt") == pytest.approx(0.005) and value(t, 3, "acks_frame") == 2
    assert t.packets["bytes_in_flight"].tolist() == [-1, -1, -1, 1000, 2000, 2000, -1, -1]
    assert t.packets["expert_flags"].tolist()[5] == 0x0001  # TCP_A_RETRANSMISSION


def test_lost_segment_duplicate_acks_and_fast_retransmission(tmp_path, matches_tshark):
    c, f = start()
    base = c.isn[0] + 1
    f.append((T0 + 0.020, c.send(0, ACK, MSS, win=502)))  # 4: s1
    c.send(0, ACK, MSS, win=502)  # s2, lost before the capture point
    f += [(T0 + 0.022, c.send(0, ACK, MSS, win=502)),  # 5: s3
          (T0 + 0.023, c.send(0, ACK, MSS, win=502)),  # 6: s4
          (T0 + 0.024, c.send(0, ACK, MSS, win=502))]  # 7: s5
    s = lambda k: base + (k - 1) * MSS  # start of segment k
    f += [(T0 + 0.030, c.send(1, ACK, ack=s(2), win=500)),  # 8
          (T0 + 0.031, c.send(1, ACK, ack=s(2), win=500, opts=nops(2) + opt_sack([(s(3), s(4))]))),  # 9
          (T0 + 0.032, c.send(1, ACK, ack=s(2), win=500, opts=nops(2) + opt_sack([(s(3), s(5))]))),  # 10
          (T0 + 0.033, c.send(1, ACK, ack=s(2), win=500, opts=nops(2) + opt_sack([(s(3), s(6))]))),  # 11
          (T0 + 0.035, c.send(0, ACK, MSS, seq=s(2), win=502)),  # 12: s2 again, 2 ms after dup ACK 3
          (T0 + 0.045, c.send(1, ACK, win=500))]  # 13
    t = matches_tshark(write(tmp_path / "fast.pcap", f))
    assert at(t, "lost_segment") == [5]
    assert at(t, "dup_ack") == [9, 10, 11]
    assert [value(t, n, "dup_ack_num") for n in (9, 10, 11)] == [1, 2, 3]
    assert {value(t, n, "dup_ack_frame") for n in (9, 10, 11)} == {8}
    assert at(t, "fast_retransmission") == [12] and at(t, "retransmission") == [12]
    # After the gap Wireshark stops counting bytes in flight until the peer ACKs again.
    assert [value(t, n, "bytes_in_flight") for n in (4, 5, 6, 7)] == [MSS, -1, -1, -1]
    # s2..s5 un-ACKed (4 segments) minus the 3 SACKed by frame 11.
    assert value(t, 12, "bytes_in_flight") == MSS
    assert value(t, 13, "acks_frame") == 7 and value(t, 13, "ack_rtt") == pytest.approx(0.021)
    assert value(t, 8, "acks_frame") == 4


def test_spurious_retransmission(tmp_path, matches_tshark):
    c, f = start()
    f += [(T0 + 0.020, c.send(0, ACK, 1000, win=502)),
          (T0 + 0.030, c.send(1, ACK, win=509)),
          (T0 + 0.040, c.send(0, ACK, 1000, seq=c.isn[0] + 1, win=502))]  # 6: already ACKed
    t = matches_tshark(write(tmp_path / "spurious.pcap", f))
    assert at(t, "spurious_retransmission") == [6] and at(t, "retransmission") == [6]


@pytest.mark.parametrize("handshake,delay,expect", [
    (True, 0.0002, "out_of_order"),  # within the handshake RTT (10 ms)
    (True, 0.015, "retransmission"),  # later than the handshake RTT
    (False, 0.002, "out_of_order"),  # no handshake: 3 ms
    (False, 0.004, "retransmission"),
])
def test_out_of_order_threshold(tmp_path, handshake, delay, expect, matches_tshark):
    c, f = start()
    if not handshake:
        f = []
    f.append((T0 + 0.020, c.send(0, ACK, 1000, win=502)))  # s1
    s2 = c.isn[0] + 1001
    c.send(0, ACK, 1000, win=502)
    f.append((T0 + 0.0201, c.send(0, ACK, 1000, win=502)))  # s3, ahead of s2
    f.append((T0 + 0.0201 + delay, c.send(0, ACK, 1000, seq=s2, win=502)))  # s2
    t = matches_tshark(write(tmp_path / "ooo.pcap", f))
    last = t.packets["frame"].iloc[-1]
    assert at(t, "lost_segment") == [last - 1]
    other = {"out_of_order", "retransmission"} - {expect}
    assert at(t, expect) == [last] and at(t, other.pop()) == []


def test_ack_of_unseen_data(tmp_path, matches_tshark):
    c, f = start()
    f += [(T0 + 0.020, c.send(0, ACK, 1000, win=502)),
          (T0 + 0.030, c.send(1, ACK, ack=c.isn[0] + 3001, win=509))]  # ACKs 2000 bytes never seen
    t = matches_tshark(write(tmp_path / "unseen.pcap", f))
    assert at(t, "acked_unseen") == [5]


def test_zero_window_probe_probe_ack_and_window_update(tmp_path, matches_tshark):
    c, f = start(ws=(None, None))
    f += [(T0 + 0.020, c.send(0, ACK, 1000, win=502)),  # 4
          (T0 + 0.030, c.send(1, ACK, win=0)),  # 5: receiver full
          (T0 + 0.230, c.send(0, ACK, 1, win=502, advance=False)),  # 6: one byte at the window edge
          (T0 + 0.240, c.send(1, ACK, win=0)),  # 7: still full
          (T0 + 0.300, c.send(1, ACK, win=4000)),  # 8: opens
          (T0 + 0.310, c.send(0, ACK, 1000, win=502))]  # 9
    t = matches_tshark(write(tmp_path / "zero.pcap", f))
    assert at(t, "zero_window") == [5, 7]
    assert at(t, "zero_window_probe") == [6]
    assert at(t, "zero_window_probe_ack") == [7]
    assert at(t, "window_update") == [8]
    assert value(t, 6, "bytes_in_flight") == 1
    assert at(t, "retransmission") == [] and at(t, "dup_ack") == []


def test_keep_alives_and_their_acks(tmp_path, matches_tshark):
    c, f = start()
    nxt = c.isn[0] + 101
    f += [(T0 + 0.020, c.send(0, ACK | PSH, 100, win=502)),  # 4
          (T0 + 0.030, c.send(1, ACK, win=509)),  # 5
          (T0 + 10.03, c.send(0, ACK, 0, seq=nxt - 1, win=502)),  # 6: Linux style, no data
          (T0 + 10.031, c.send(1, ACK, win=509)),  # 7
          (T0 + 20.03, c.send(0, ACK, 1, seq=nxt - 1, win=502, advance=False)),  # 8: one garbage byte
          (T0 + 20.031, c.send(1, ACK, win=509))]  # 9
    t = matches_tshark(write(tmp_path / "ka.pcap", f))
    assert at(t, "keep_alive") == [6, 8]
    assert at(t, "keep_alive_ack") == [7, 9]
    assert at(t, "retransmission") == [] and at(t, "dup_ack") == []


def test_window_full(tmp_path, matches_tshark):
    c, f = start(ws=(None, None), win=(64240, 3000))  # the server offers 3000 bytes
    f += [(T0 + 0.020 + i * 0.001, c.send(0, ACK, 1000, win=502)) for i in range(3)]  # 4, 5, 6
    t = matches_tshark(write(tmp_path / "full.pcap", f))
    assert at(t, "window_full") == [6]


def test_retransmitted_syn_and_reused_ports(tmp_path, matches_tshark):
    c = Conn()
    f = [(T0, c.send(0, SYN, win=64240)),
         (T0 + 1.0, c.send(0, SYN, win=64240, seq=c.isn[0]))]  # 1, 2: SYN again (a new IP ID) after a second
    f.append((T0 + 1.001, c.send(1, RST | ACK, win=0)))  # 3: refused
    c2 = Conn(isn=(99999, 0))
    f += [(T0 + 5 + x, p) for x, (_, p) in enumerate(c2.handshake(T0))]  # 4-6: same ports, new ISN
    t = matches_tshark(write(tmp_path / "syn.pcap", f))
    assert at(t, "retransmission") == [2]
    assert at(t, "reused_ports") == [4]
    assert t.packets["flow"].tolist() == [0, 0, 0, 1, 1, 1]


def test_fin_and_rst_are_not_keep_alives_or_lost(tmp_path, matches_tshark):
    c, f = start()
    f += [(T0 + 0.020, c.send(0, ACK, 1000, win=502)),
          (T0 + 0.030, c.send(0, FIN | ACK, win=502)),
          (T0 + 0.040, c.send(1, ACK, win=509)),
          (T0 + 0.050, c.send(1, RST | ACK, seq=c.isn[1] + 5000, win=0))]  # RST far ahead: not "lost"
    t = matches_tshark(write(tmp_path / "fin.pcap", f))
    assert t.packets["expert_flags"].tolist()[3:] == [0, 0, 0, 0]


def test_analysis_needs_the_whole_capture(tmp_path):
    c, f = start()
    path = write(tmp_path / "x.pcap", f + [(T0 + 0.02, c.send(0, ACK, 10))])
    table = select_flows(read_packets(path, expert=False), 0)
    assert len(analyze(table).packets) == 4  # flow 0 of a one-flow capture is all of it
    c2 = Conn(client=("10.9.9.9", 1))
    path2 = write(tmp_path / "y.pcap", f + c2.handshake(T0 + 1))
    with pytest.raises(ValueError, match="whole capture"):
        analyze(select_flows(read_packets(path2, expert=False), 1))


@pytest.mark.parametrize("seed", range(12))
def test_random_captures_match_tshark(tmp_path, seed, matches_tshark):
    """Every kind of event at random, IPv4 and IPv6, several flows, and snaplens that cut
    options (80/96 bytes) on half of them."""
    frames = random_capture(seed, flows=1 + seed % 5, packets=1500, v6_share=0.4)
    path = tmp_path / f"random{seed}.pcap"
    write_pcap(path, [(t, ethernet(p)) for t, p in frames], 1, nanos=True,
               snaplen=(262144, 96, 262144, 80)[seed % 4])
    t = matches_tshark(path)
    p = t.packets
    # The generator makes these happen; the comparison above proves they are right.
    for column in ("retransmission", "dup_ack", "zero_window", "window_update", "lost_segment"):
        assert p[column].any(), column


def test_more_than_10000_unacked_segments(tmp_path, matches_tshark):
    """A one-way capture (ACKs not seen): Wireshark stops listing un-ACKed segments at
    10,000, which changes bytes in flight and the segments an ACK can match."""
    import random

    rnd = random.Random(7)
    c = Conn(isn=(4294960000, 77))
    f = c.handshake(T0)
    t0 = T0 + 0.02
    for i in range(12_500):
        f.append((t0 + i * 1e-4, c.send(0, ACK, rnd.choice([MSS, 100, 1]), win=500)))
        if i % 3000 == 2999:
            f.append((t0 + i * 1e-4 + 5e-5, c.send(1, ACK, ack=c.nxt[0] - 5000, win=300)))
    t = matches_tshark(write(tmp_path / "oneway.pcap", f))
    assert t.packets["bytes_in_flight"].max() > 10_000 * 100


def test_the_tshark_comparison_notices_differences(tmp_path, tshark):
    """The oracle is only worth something if it fails on a wrong table."""
    from tcplab.analysis import _tshark

    c, f = start()
    path = write(tmp_path / "x.pcap", f + [(T0 + 0.02, c.send(0, ACK, 100, win=502))])
    table = read_packets(path)
    theirs = _tshark.run(str(path), tshark)
    assert _tshark.compare(table.packets, theirs).ok
    wrong = table.packets.copy()
    wrong.loc[3, "retransmission"] = True
    wrong.loc[1, "seq"] += 2**32 + 1  # off by one after the 32-bit wrap
    result = _tshark.compare(wrong, theirs)
    assert result.mismatched_rows == 2
    assert sorted(result.details["column"]) == ["retransmission", "seq"]
    assert _tshark.compare(wrong.drop(index=2), theirs).details["column"].tolist().count("frame") == 1


def test_duplicate_frames_are_copies_not_retransmissions(tmp_path, tshark):
    """A capture holding some packets twice (port mirroring): the copies (same IP ID) are
    flagged, get no other flag and no RTT, and everything else is what tshark says of the
    capture without them; a real resend (a new IP ID) stays a retransmission."""
    c, f = start()
    sent = []
    for k in range(6):
        seg = c.send(0, ACK | PSH, MSS, win=502)
        sent.append(seg)
        f.append((T0 + 0.020 + k * 0.001, seg))
    f.append((T0 + 0.021, sent[0]))  # copies, a little late, among the original frames
    f.append((T0 + 0.0235, sent[2]))
    f.append((T0 + 0.030, c.send(1, ACK, ack=c.isn[0] + 1 + 3 * MSS, win=509)))
    f.append((T0 + 0.0305, sent[4]))  # a copy after the ACK that the original crossed
    f.append((T0 + 0.300, c.send(0, ACK | PSH, MSS, seq=c.isn[0] + 1 + 3 * MSS, win=502)))  # a real resend
    f.append((T0 + 0.310, c.send(1, ACK, win=509)))
    f.sort(key=lambda tp: tp[0])
    path = write(tmp_path / "dups.pcap", f)
    table = read_packets(path)
    p = table.packets
    copies = at(table, "duplicate_frame")
    assert len(copies) == 3
    assert not p.loc[p["duplicate_frame"], "expert_flags"].any() and p.loc[p["duplicate_frame"], "ack_rtt"].isna().all()
    assert (p["ack_rtt"].dropna() > 0).all()
    resend = p.loc[(p["seq"] == 1 + 3 * MSS) & (p["rel_time"] > 0.2), "frame"].tolist()
    assert at(table, "retransmission") == resend
    # The reference: tshark on the same file with the copies taken out.
    clean = tmp_path / "clean.pcap"
    write(clean, [fr for number, fr in enumerate(f, 1) if number not in copies])
    ours = _tshark.without_frames(p, copies)
    result = _tshark.compare(ours, _tshark.run(str(clean), tshark))
    assert result.rows == len(p) - 3 and result.ok, result.summary()
