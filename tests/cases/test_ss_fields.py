"""ss_fields on a literal ss sample and a small synthetic telemetry table."""

from __future__ import annotations

import pandas as pd
import pytest

from tcplab.rooms import ss_fields
from tcplab.cases.replay import replay_root
from tcplab.cases.trial import Trial
from tcplab.runs import load_run
from tcplab.observe.ss import frame, parse_ss

LINE = ("ESTAB 0 65536 10.201.2.2:5001 10.201.1.2:40000 skmem:(r0,rb131072,t0,tb32768,f3200,w70528,o0,bl0,d0) "
        "cubic wscale:10,10 rto:224 rtt:23.266/1.506 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:40 "
        "send 19.9Mbps pacing_rate 23.9Mbps delivery_rate 15Mbps busy:400ms unacked:20 rcv_space:14480 "
        "rcv_ssthresh:64088 minrtt:19.993 snd_wnd:1000000")


def _table():
    rows = []
    for i, (sendq, recvq, state) in enumerate([(0, 0, "SYN-SENT"), (65536, 0, "ESTAB"), (65536, 0, "ESTAB"),
                                                (0, 0, "ESTAB")]):
        (row,) = parse_ss(LINE.replace("ESTAB 0 65536", f"{state} {recvq} {sendq}"))
        row.update(time=100.0 + i, side="server")
        rows.append(row)
    return frame(rows)


def test_parsed_fields_the_case_reads():
    (row,) = parse_ss(LINE)
    assert (row["wscale_snd"], row["wscale_rcv"]) == (10, 10)
    assert row["minrtt"] == pytest.approx(0.019993)
    assert row["send_rate"] == pytest.approx(19.9e6)


def test_representative_sample_is_an_established_one():
    tel = _table()
    sample = ss_fields.representative(tel, "server")
    assert sample["state"] == "ESTAB" and sample["send_q"] > 0
    with pytest.raises(ValueError):
        ss_fields.representative(tel, "client")


def test_field_table_shows_units_and_predictions():
    row = _table().iloc[1]
    table = ss_fields.field_table({"s": row}, {"s": {"skmem_tb": 32768}})
    assert table.loc["skmem tb", "s"] == 32768 and table.loc["skmem tb", "s: predicted"] == 32768
    assert table.loc["rtt (srtt)", "s"] == "23.266 ms"
    assert table.loc["rto", "s"] == "224 ms"  # ss's rto:224, not 224.000
    assert table.loc["send", "s"] == "19.90 Mbit/s"


def test_send_rate_error_is_small_for_ss_output():
    err = ss_fields.send_rate_error(_table())
    # ss rounds to 3 significant digits in this literal sample ("19.9Mbps")
    assert len(err) == 3 and err.max() < 0.01


def test_payload_over_charged_and_limited_share():
    tel = _table()
    ratios = ss_fields.payload_over_charged(tel)
    assert ratios["send_q/w"].max() == pytest.approx(65536 / 70528)
    share = ss_fields.limited_share(tel, "server")
    assert share["busy_s"] == pytest.approx(0.4) and share["rwnd_limited"] == 0


@pytest.mark.parametrize("space, shift", [(65535, 0), (65536, 1), (32 * 2**20, 10), (6 * 2**20, 7), (2**40, 14)])
def test_predicted_wscale(space, shift):
    assert ss_fields.predicted_wscale(space) == shift


def test_charged_memory_per_segment_in_flight_leaves_out_data_not_yet_sent():
    # Case 11's runs as shipped. The 16 KB sender: w / unacked is the payload plus each
    # segment's overhead: above the payload, and under twice it (not the 2-3 KB the course's
    # answer once stated).
    shipped = replay_root() / "11-reading-ss"
    small = ss_fields.charged_per_segment(pd.read_parquet(shipped / "sndbuf-16KB" / "telemetry.parquet"), "server")
    assert len(small) >= 5 and (small["w per segment"] > small["mss"]).all()
    assert (small["w per segment"] < 2 * small["mss"]).all(), small["w per segment"].describe()
    # The autotuned sender always had data queued unsent: w would count it, so no sample is read.
    auto = pd.read_parquet(shipped / "autotuned" / "telemetry.parquet")
    assert ss_fields.charged_per_segment(auto, "server").empty
    assert (ss_fields.charged_per_segment(auto.assign(notsent=float("nan")), "server")["w per segment"]
            > 2 * 1448).any()


def test_both_queues_while_the_reader_paused():
    # Case 11's exercise 2 as shipped: the autotuned client stops reading for 3 s.
    from tcplab.cases.trial import Trial
    from tcplab.runs import load_run

    trial = Trial("ex2", load_run(replay_root() / "11-reading-ss" / "ex2-autotuned-pause-1MB-3s"), replayed=True)
    paused = ss_fields.during_pause(trial)
    assert 0 < paused["Recv-Q max"] <= paused["r max"] <= paused["rb"], paused  # r: the payload and its overhead
    assert paused["r max"] >= 0.9 * paused["rb"], paused                       # the buffer filled
    assert 0 < paused["Send-Q max"] <= paused["w max"], paused
    assert 0.9 * paused["tb"] <= paused["w max"] <= 1.2 * paused["tb"], paused  # the writer blocked near tb
    assert paused["unacked median"] == 0, paused                                 # all sent was acknowledged


@pytest.mark.parametrize("run", ["rcvbuf-32KB", "sndbuf-16KB", "autotuned"])
def test_the_kernels_verdict_reads_the_same_in_the_table_and_the_diagnosis(run):
    """Case 11's table of rwnd_limited/sndbuf_limited and the diagnosis on the same page read one
    socket's counters by one rule (a page once said 98.5 % in one and 98.3 % in the other)."""
    trial = Trial(run, load_run(replay_root() / "11-reading-ss" / run), replayed=True)
    table = ss_fields.limited_share(trial.telemetry, trial.sender)
    diagnosis = trial.metrics.telemetry_summary
    assert table["rwnd_limited"] == pytest.approx(diagnosis.get("rwnd_limited_share", 0))
    assert table["sndbuf_limited"] == pytest.approx(diagnosis.get("sndbuf_limited_share", 0))
    assert table["busy_s"] > 0
