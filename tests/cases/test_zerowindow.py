"""Case 05 helpers: the persist timer's schedule, and reading a real zero-window run."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tcplab.cases import CaseLab
from tcplab.cases.replay import replay_root
from tcplab.cases.trial import Trial
from tcplab.rooms import zerowindow as zw
from tcplab.lab import PathSpec
from tcplab.runs import load_run
from tcplab.traffic import Bulk, Slowreader


def test_probe_schedule_doubles_the_gap_up_to_the_cap():
    assert zw.probe_schedule(0.2, 3.0) == pytest.approx([0.2, 0.6, 1.4, 3.0])
    assert zw.probe_schedule(0.25, 3.0, rto_max_s=0.5) == pytest.approx([0.25, 0.75, 1.25, 1.75, 2.25, 2.75])
    assert zw.probe_schedule(1.0, 0.5) == []


def test_unanswered_probes_are_fine_only_inside_the_rate_limit():
    table = pd.DataFrame({"answer_win": [0.0, math.nan, 0.0], "since_answered_s": [math.nan, 0.45, 0.9]})
    assert zw.probes_answered_as_expected(table)
    table.loc[1, "since_answered_s"] = 0.7
    assert not zw.probes_answered_as_expected(table)
    table.loc[1, ["answer_win", "since_answered_s"]] = [1000.0, 0.45]  # answered, but the window was open
    assert not zw.probes_answered_as_expected(table)
    with pytest.raises(ValueError):
        zw.probe_schedule(0, 1)


def test_recorded_probes_follow_the_schedule_under_the_servers_rto_max():
    # Case 05's exercise 2 as shipped (Linux 6.18, the server's tcp_rto_max_ms at 1000): the gaps
    # double until they reach 1 s and then stay there, and the schedule with that cap says so.
    run = load_run(replay_root() / "05-zero-window" / "ex2-rto-max-1000ms-pause-10s")
    assert PathSpec.of_run(run).side_sysctls["server"]["tcp_rto_max_ms"] == 1000
    rows = zw.probes_against_schedule(Trial("ex2", run, replayed=True), rto_s=0.22, rto_max_s=1.0)
    measured = rows["measured s"].dropna()
    gaps = measured.diff().dropna()
    assert len(measured) >= 8 and rows["predicted s"].notna().all()
    assert gaps.iloc[0] == pytest.approx(2 * measured.iloc[0], rel=0.25)  # doubling before the cap
    assert gaps.iloc[2:].between(0.95, 1.1).all(), gaps.tolist()            # then the cap, not 120 s
    assert len(rows) - len(measured) <= 1  # the schedule cut where the reader resumed: one probe more at most


def test_the_windows_offered_between_a_readers_stop_and_the_zero_add_up_to_what_it_queued():
    # Case 05's fixed 256 KB buffer as shipped (Linux 6.18): after the reader stopped, the
    # receiver gave out the rest of its buffer a window at a time, each in the ACK of the data
    # sent into the one before, and the windows sum to the payload queued while it was closed
    # (to a few segments: the first is the window in force at the stop).
    run = load_run(replay_root() / "05-zero-window" / "rcvbuf-256KB")
    trial = Trial("rcvbuf-256KB", run, replayed=True)
    view = zw.sender_packets(trial)
    stopped, _ = zw.pause(trial, view)
    closed, _ = zw.episode(view)
    windows = zw.windows_offered(view, stopped, closed)
    assert windows[-1] == 0 and len(windows) >= 3 and windows == sorted(windows, reverse=True)
    queued = zw.receive_queue(trial)
    assert sum(windows) == pytest.approx(queued[queued.time > closed].recv_q.iloc[0], abs=4 * 1448)


@pytest.mark.kernel
def test_paused_reader_closes_the_window_and_its_update_reopens_it(root, tmp_path):
    lab = CaseLab("96-zero-window-fixture", runs_dir=tmp_path)
    with lab.path(PathSpec(rtt="10ms", rate="50mbit")) as path:
        paused = lab.run("paused", Slowreader(size="2MB", rcvbuf="64KB", pause_after="128KB", pause_for="1.5s",
                                              cc="cubic"), path=path, observe=dict(capture="both"))
        read = lab.run("read", Bulk(size="256KB", rcvbuf="8KB", cc="cubic"), path=path)
    sender = zw.sender_packets(paused)
    stopped, resumed = zw.pause(paused, sender)
    closed, reopened = zw.episode(sender)
    assert stopped < closed < resumed < reopened
    probes = zw.probe_table(sender)
    assert len(probes) >= 2 and (probes.len == 0).all() and probes.seq_is_una_minus_1.all()
    assert probes.gap_ratio.dropna().between(1.5, 2.5).all()
    # At 10 ms the second probe comes < 500 ms after the first: the receiver's rate limit skips its answer.
    assert zw.probes_answered_as_expected(probes) and probes.answer_win.notna().any()
    skipped = int(probes.answer_win.isna().sum())
    assert paused.counters("client").get("TcpExtTCPACKSkippedSeq", 0) == skipped
    back = zw.recovery(paused)
    assert back["update after resume"] < 0.05 and back["data after resume"] < 0.01 + 0.05
    queue = zw.receive_queue(paused)
    assert (queue.r / queue.rb).max() > 0.75 and queue.recv_q.max() > 64 * 1024
    # Samples that ss finished while the window was closed and the reader idle all see one queue;
    # "until" bounds when ss read it, so a sample begun just before the resume is not among them.
    assert (queue.until >= queue.time).all()
    during = queue[(queue.time > closed + 0.01) & (queue.until < resumed)]
    assert len(during) >= 10 and during.recv_q.max() - during.recv_q.min() <= 1448
    assert paused.counters("client")["TcpExtTCPToZeroWindowAdv"] >= 1
    assert read.metrics.zero_window_packets == 0  # small but read: never zero


@pytest.mark.kernel
def test_tiny_segments_collapse_a_fixed_buffer_and_grow_an_autotuned_one(root, tmp_path):
    lab = CaseLab("96-zero-window-fixture", runs_dir=tmp_path)
    tiny = dict(size="64KB", write_size=10, write_rate="400kbit", nodelay=True, pause_after=1, pause_for="1.5s",
                cc="cubic")
    with lab.path(PathSpec(rtt="10ms", rate="50mbit")) as path:
        fixed = lab.run("fixed", Slowreader(rcvbuf="32KB", **tiny), path=path)
        grown = lab.run("grown", Slowreader(**tiny), path=path)
    assert fixed.socket(fixed.sender)["nodelay"] and not fixed.socket(fixed.receiver)["nodelay"]
    collapsed, grew = zw.collapse_row(fixed), zw.collapse_row(grown)
    # 10-byte segments cost far more memory than payload, beyond the window's one-half share.
    assert grew["memory per payload byte"] > 2
    assert grew["PruneCalled"] >= 1 and grew["TCPRcvCollapsed"] == 0 and grew["collapses seen"] == 0
    assert grew["largest rb during the pause, B"] > zw.receive_queue(grown).rb.iloc[0]  # autotuning grew the buffer
    assert collapsed["TCPRcvCollapsed"] >= 1 and collapsed["collapses seen"] >= 1
    assert collapsed["largest rb during the pause, B"] == 65536  # fixed: SO_RCVBUF 32 KB, doubled
    # A collapse packs the copied payload tightly: little more memory than payload right after it.
    assert collapsed["memory per payload byte after"] < 1.5
    assert 0 < collapsed["payload copied B"] < 65536
    seen = zw.collapses(fixed)
    assert (seen.r_after < 0.8 * seen.r_before).all()


def test_a_sender_gives_up_at_its_retries2_th_unanswered_probe_and_its_next_firing():
    assert zw.giveup_after(0.2, 5) == pytest.approx(0.2 * 63)  # 6 firings: 5 probes, then the abort
    assert zw.giveup_after(0.2, 2) == pytest.approx(0.2 * 7)
    assert zw.giveup_after(0.5, 3, rto_max_s=1.0) == pytest.approx(0.5 + 1 + 1 + 1)
    with pytest.raises(ValueError):
        zw.giveup_after(0, 5)


@pytest.mark.kernel
def test_a_router_that_drops_the_probes_makes_the_sender_give_up_and_the_reader_meet_a_reset(root, tmp_path):
    """Case 05's exercise 4, shortened: tcp_retries2 = 2 gives up after about 7 RTOs."""
    lab = CaseLab("96-zero-window-fixture", runs_dir=tmp_path)
    reader = Slowreader(size="2MB", rcvbuf="64KB", pause_after="128KB", pause_for="4s", cc="cubic", reset_ok=True)
    spec = PathSpec(rtt="10ms", rate="50mbit", drop_bare_acks_to="client", side_sysctls={"server": {"tcp_retries2": 2}})
    with lab.path(spec) as path:
        dead = lab.run("probes-dropped", reader, path=path)
    death = zw.death(dead)
    assert death["probes"] == 2 and death["probes answered"] == 0, death
    assert death["dropped by the router"] >= 2, death  # the probes, and no more than bare ACKs
    # The persist timer's base is the first probe's delay: it gives up at 1 + 2 + 4 times that.
    assert 0.15 <= death["first probe s"] <= 0.5, death
    assert death["sender gave up s"] == pytest.approx(zw.giveup_after(death["first probe s"], 2), rel=0.15), death
    assert "TimeoutError" in death["sender's error"], death
    assert not death["sender's FIN"] and death["reset s"] > death["reader resumed s"] > death["sender gave up s"], death
    assert "ConnectionResetError" in death["reader's error"], death
    assert dead.app.ok and dead.app.bytes < reader.size
