"""The diagnosis on real captures: the course's shipped runs, recorded on a real kernel with
a known cause each, must be named for that cause (with the run's context, as the course
gives it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcplab.cases import Trial
from tcplab.runs import Run, data_root

#: (case, variant) -> the label its cause must get.
KNOWN = {
    ("01-send-buffer", "sndbuf-16KB"): "sender-buffer-limited",
    ("01-send-buffer", "unset"): "path-bandwidth",
    # cubic past a 16 KB SO_SNDBUF: bursts at line rate build a queue between long waits for ACKs
    ("01-send-buffer", "sndbuf-16KB-cubic"): "sender-buffer-limited",
    ("11-reading-ss", "sndbuf-16KB"): "sender-buffer-limited",
    ("01-send-buffer", "unset-cubic"): "path-bandwidth",
    ("01-send-buffer", "sndbuf-256KB"): "path-bandwidth",
    ("02-receive-buffer", "rtt40-rcvbuf8KB"): "receiver-window-limited",
    # a server reading 4 Mbit/s behind 8 KB, no added delay: its late ACKs, not a queue, grow the RTT
    ("02-receive-buffer", "ex4-nodelay-rcvbuf8KB-read4mbit"): "receiver-window-limited",
    ("03-bdp-sweep", "pinned-2ms-loss-10"): "congestion-loss",
    ("04-nagle-delayed-ack", "split-nagle"): "nagle-delayed-ack",
    ("04-nagle-delayed-ack", "split-nodelay-20ms"): "application-limited",  # request/response turns
    ("04-nagle-delayed-ack", "split-nodelay"): "application-limited",  # turns faster than the idle threshold
    ("05-zero-window", "rcvbuf-256KB"): "zero-window",
    ("06-packet-loss", "bbr-20ms-10pct-seed1"): "congestion-loss",
    ("06-packet-loss", "cubic-20ms-1pct-seed1"): "congestion-loss",  # mostly the cwnd the losses cut
    ("07-window-scaling", "off-client-20ms"): "window-scaling-absent",
    ("08-slow-start", "initcwnd-default#1"): "slow-start",
    ("08-slow-start", "idle-cubic-ssai1"): "application-limited",  # 2 s without a request
    ("08-slow-start", "next-save0"): "cwnd-limited",  # congestion avoidance from a cached ssthresh
}


@pytest.mark.parametrize(("case", "variant"), sorted(KNOWN))
def test_a_recorded_run_is_named_for_its_cause(case, variant):
    trial = Trial(variant, Run.load(data_root() / "replay" / case / variant))
    diagnosis = trial.diagnosis
    assert diagnosis.label == KNOWN[case, variant], diagnosis.summary
    assert diagnosis.sentences and diagnosis.evidence


#: Runs kept for what they happened to show, apart from the course's replay data, which is
#: recorded again whenever a case changes (and then shows whatever that run did).
FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"


def test_resends_wireshark_calls_out_of_order_still_count_as_loss():
    """In this run (case 08's next-save1 as recorded in 2026-11, on 6.18) the receiver's window
    grew during recovery, so Wireshark's rules call every resend "out-of-order"; counted by
    sequence coverage they are resends, and the diagnosis sees the loss."""
    trial = Trial("next-save1", Run.load(FIXTURE_RUNS / "next-save1"))
    m = trial.metrics
    assert m.retransmissions == 0 and m.resent_segments > 100
    resent = trial.packets.packets["rel_time"].isin(m.resent["time"])
    assert trial.packets.packets.loc[resent, "out_of_order"].all()
    assert dict(trial.diagnosis.limits).get("congestion-loss", 0) > 0.2


def test_a_receiver_squeezed_by_tcp_mem_is_told_from_a_slow_reader():
    """Case 09's squeezed run and case 05's slow reader both close the window; only the
    receiver's nstat counters (queue pruned for lack of memory) tell them apart."""
    squeezed = Trial("squeezed-tcp_mem", Run.load(data_root() / "replay" / "09-tcp-mem" / "squeezed-tcp_mem"))
    slow = Trial("rcvbuf-256KB", Run.load(data_root() / "replay" / "05-zero-window" / "rcvbuf-256KB"))
    assert squeezed.context().receiver_prunes > 0 and "pruned its receive queue" in squeezed.diagnosis.summary
    assert slow.context().receiver_prunes == 0 and "pruned" not in slow.diagnosis.summary


def test_a_queue_built_by_bursts_is_not_the_path_from_the_pcap_alone():
    """Cubic behind a 16 KB SO_SNDBUF at 20 ms and 100 Mbit/s (case 01's run as recorded in
    2026-11, on 6.18, kept as a fixture): its round trips grow 20 -> 36 ms, but it waits for
    ACKs 84 % of the transfer and moves 39 Mbit/s; the packets alone cannot tell its send
    buffer from its congestion window, so no verdict rather than the path."""
    from tcplab.analysis import diagnose, read_packets

    d = diagnose(read_packets(FIXTURE_RUNS / "sndbuf-16KB-cubic" / "server-eth0.pcap"))
    assert d.label == "undetermined", d.summary
    assert "waiting for ACKs for 83.8 %" in d.summary

