"""Case 05, zero window: when the reader stopped and resumed, the persist timer's probes, the
window update that ends the stall, the receive queue as ``ss`` saw it, and what the kernel
does when tiny segments fill the queue's memory before they fill its window (prune and
collapse).

Times are seconds since the first packet of the capture that is read (``rel_time``); the
reader's pause comes from the client program's report (epoch seconds) and is put on the
same scale.
"""

from __future__ import annotations

import errno
import math
import re

import numpy as np
import pandas as pd

from tcplab.analysis.packets import read_packets
from tcplab.analysis.table import data_direction, main_flow
from tcplab.observe.ss import read_by
from tcplab.cases.trial import Trial

__all__ = ["pause", "pause_span", "sender_packets", "receiver_packets", "probe_table", "episode", "windows_offered", "recovery",
           "receive_queue", "probe_schedule", "probes_against_schedule", "probes_answered_as_expected", "receive_queue_plot", "collapses", "collapse_row",
           "PROBE_COUNTERS", "COLLAPSE_COUNTERS", "RTO_MAX_S"]

#: The longest gap between probes by default: TCP_RTO_MAX (include/net/tcp.h), the default of
#: net.ipv4.tcp_rto_max_ms where a kernel has it (Linux 6.15 and later).
RTO_MAX_S = 120.0
#: The reader's nstat counters about its window (see :meth:`Trial.counters`).
PROBE_COUNTERS = ("TcpExtTCPToZeroWindowAdv", "TcpExtTCPFromZeroWindowAdv", "TcpExtTCPWantZeroWindowAdv",
                  "TcpExtTCPACKSkippedSeq")
#: The reader's nstat counters about making room in its receive queue: prune passes, buffers
#: merged by a collapse, and segments dropped because even that did not make room.
COLLAPSE_COUNTERS = ("TcpExtPruneCalled", "TcpExtTCPRcvCollapsed", "TcpExtRcvPruned")
#: A fall of skmem r by more than this share from one ss sample to the next, while the reader
#: is not reading, is memory the kernel gave back by collapsing the queue.
COLLAPSE_DROP = 0.2


def _flow(pk: pd.DataFrame) -> pd.DataFrame:
    return pk[pk["flow"] == main_flow(pk)].sort_values("time").reset_index(drop=True)


def _origin(pk: pd.DataFrame) -> float:
    return float((pk["time"] - pk["rel_time"]).iloc[0])


def sender_packets(trial: Trial) -> pd.DataFrame:
    """The main flow as the sender's (server's) capture saw it."""
    return _flow(trial.packets.packets)


def receiver_packets(trial: Trial) -> pd.DataFrame:
    """The main flow as the receiver's (client's) capture saw it (run with capture="both")."""
    pcap = next((p for p in trial.run.pcaps if p.name.startswith(trial.receiver)), None)
    if pcap is None:
        raise LookupError(f"{trial.label}: no capture at the {trial.receiver}; run it with capture='both'")
    return _flow(read_packets(pcap).packets)


def pause(trial: Trial, packets: pd.DataFrame) -> tuple[float, float]:
    """When the reader stopped and resumed reading, in ``packets``' rel_time (NaN if it never paused)."""
    if not trial.reader_pauses:
        return math.nan, math.nan
    origin = _origin(packets)
    stopped, resumed = trial.reader_pauses[0]
    return stopped - origin, resumed - origin


def episode(packets: pd.DataFrame) -> tuple[float, float]:
    """The first zero-window episode: when the receiver first advertised 0, and when it first
    advertised a window again (rel_time; NaN when there is none)."""
    acks = packets[(packets["dir"] == 1 - data_direction(packets)) & packets["f_ack"] & (packets["win"] >= 0)]
    zero = acks[acks["win"] == 0]
    if zero.empty:
        return math.nan, math.nan
    start = float(zero["rel_time"].iloc[0])
    reopened = acks[(acks["rel_time"] > start) & (acks["win"] > 0)]
    return start, float(reopened["rel_time"].iloc[0]) if len(reopened) else math.nan


def pause_span(trial: Trial, round_trips: float = 5.0) -> tuple[float, float]:
    """``t_range`` (rel_time) of the sender's capture that holds the zero-window episode: from
    the first data segment to ``round_trips`` round trips (the median ACK round trip; 100 ms
    without one) after the window reopened, when the sender has restarted. The rest of a large
    transfer, sent at full speed, would size a graph's axes to itself and squash the episode.
    The whole transfer where the window never closed (or the reader never paused)."""
    packets = sender_packets(trial)
    direction = data_direction(packets)
    sent = packets.loc[(packets["dir"] == direction) & (packets["len"] > 0), "rel_time"]
    start, last = float(sent.min()), float(sent.max())
    reopened = episode(packets)[1]
    if math.isnan(reopened):
        reopened = pause(trial, packets)[1]
    if math.isnan(reopened):
        return start, last
    samples = packets["ack_rtt"].dropna() if "ack_rtt" in packets else pd.Series(dtype=float)
    rtt = float(samples.median()) if len(samples) else 0.1
    return start, max(min(last, reopened + round_trips * rtt), reopened)


def windows_offered(packets: pd.DataFrame, start: float, end: float) -> list[int]:
    """The windows the receiver advertised from ``start`` to ``end`` (rel_time, both included):
    the one in force at ``start`` first, then each change, in bytes. Between a reader's stop
    and the zero window, the steps in which the receiver gave out the rest of its buffer."""
    acks = packets[(packets["dir"] == 1 - data_direction(packets)) & packets["f_ack"] & (packets["win"] >= 0)]
    seen = pd.concat([acks[acks["rel_time"] <= start].tail(1),
                      acks[(acks["rel_time"] > start) & (acks["rel_time"] <= end)]])["win"].astype(int).tolist()
    return [w for i, w in enumerate(seen) if i == 0 or w != seen[i - 1]]


def probe_table(packets: pd.DataFrame) -> pd.DataFrame:
    """The sender's window probes during the first zero-window episode: time since the window
    closed, gap to the previous probe (or to the closing), ratio of successive gaps, whether the
    probe carried new data, the receiver's answer (delay and window; NaN when no ACK came back
    before the next probe), and the time since the last probe that was answered.

    A Linux receiver answers such a probe (an old, empty segment) through its rate limit for
    out-of-window segments: at most one answer per ``net.ipv4.tcp_invalid_ratelimit`` (500 ms);
    a probe arriving sooner after the last answered one gets none (``TcpExtTCPACKSkippedSeq``)."""
    d = data_direction(packets)
    start, end = episode(packets)
    cols = ["time", "since_zero_s", "gap_s", "gap_ratio", "len", "seq_is_una_minus_1", "answer_s", "answer_win",
            "since_answered_s"]
    if math.isnan(start):
        return pd.DataFrame(columns=cols)
    end = end if not math.isnan(end) else math.inf
    mine = packets[(packets["dir"] == d) & (packets["rel_time"] > start) & (packets["rel_time"] < end)]
    probes = mine[mine["keep_alive"] | mine["zero_window_probe"]]
    acks = packets[(packets["dir"] != d) & packets["f_ack"]]
    times = probes["rel_time"].to_list()
    rows, previous, answered = [], start, math.nan
    for k, (_, p) in enumerate(probes.iterrows()):
        until = times[k + 1] if k + 1 < len(times) else end
        una = acks.loc[acks["rel_time"] <= p["rel_time"], "ack"].max()
        answer = acks[(acks["rel_time"] > p["rel_time"]) & (acks["rel_time"] < until)].head(1)
        rows.append({"time": p["rel_time"], "since_zero_s": p["rel_time"] - start, "gap_s": p["rel_time"] - previous,
                     "len": int(p["len"]), "seq_is_una_minus_1": bool(p["seq"] == una - 1),
                     "answer_s": float(answer["rel_time"].iloc[0] - p["rel_time"]) if len(answer) else math.nan,
                     "answer_win": float(answer["win"].iloc[0]) if len(answer) else math.nan,
                     "since_answered_s": p["rel_time"] - answered})
        previous = p["rel_time"]
        if len(answer):
            answered = p["rel_time"]
    table = pd.DataFrame(rows, columns=[c for c in cols if c != "gap_ratio"])
    table.insert(3, "gap_ratio", table["gap_s"] / table["gap_s"].shift())
    return table


def probes_answered_as_expected(probes: pd.DataFrame, ratelimit_s: float = 0.5, slack_s: float = 0.010) -> bool:
    """Every answered probe got a zero window back, and every unanswered one came within the
    receiver's rate limit (``ratelimit_s`` after the last answered probe, give or take a tick)."""
    answered = probes["answer_win"].notna()
    return bool((probes.loc[answered, "answer_win"] == 0).all()
                and (probes.loc[~answered, "since_answered_s"] < ratelimit_s + slack_s).all())


def recovery(trial: Trial) -> dict[str, float]:
    """From the receiver's capture: how long after the reader resumed its TCP sent the window
    update, and how long after that new data arrived (seconds)."""
    pk = receiver_packets(trial)
    stopped, resumed = pause(trial, pk)
    d = data_direction(pk)
    start, _ = episode(pk)
    update = pk[(pk["dir"] != d) & pk["f_ack"] & (pk["win"] > 0) & (pk["rel_time"] > max(start, stopped))]
    update_t = float(update["rel_time"].iloc[0]) if len(update) else math.nan
    data = pk[(pk["dir"] == d) & (pk["len"] > 0) & (pk["rel_time"] > update_t)] if len(update) else pk.iloc[0:0]
    data_t = float(data["rel_time"].iloc[0]) if len(data) else math.nan
    probes = probe_table(pk)
    last_probe = float(probes["time"].iloc[-1]) if len(probes) else math.nan
    return {"reader stopped": stopped, "window closed": start, "reader resumed": resumed,
            "window update": update_t, "update after resume": update_t - resumed,
            "data after resume": data_t - resumed, "last probe before the update": last_probe}


def receive_queue(trial: Trial) -> pd.DataFrame:
    """The receiver's socket as ``ss -tinm`` sampled it: Recv-Q, skmem r (bytes queued, with
    overhead) and rb (the buffer's limit), in time since the sender's capture began.

    ss read the socket somewhere between ``time`` and ``until`` (when it returned; the same
    as ``time`` for runs recorded before the sampler stamped it). A sample that must lie
    before an event, such as the reader resuming, is one whose ``until`` does."""
    rows = trial.socket_samples(trial.receiver)
    origin = _origin(trial.packets.packets)
    until = read_by(rows)
    return pd.DataFrame({"time": rows["time"].to_numpy() - origin, "until": until.to_numpy() - origin,
                         "recv_q": rows["recv_q"].to_numpy(), "r": rows["skmem_r"].to_numpy(),
                         "rb": rows["skmem_rb"].to_numpy()})


def _paused_queue(trial: Trial) -> pd.DataFrame:
    """The receive queue's samples wholly inside the reader's pause, with the payload queued."""
    q = receive_queue(trial)
    stopped, resumed = pause(trial, trial.packets.packets)
    return q[(q["time"] > stopped) & (q["until"] < resumed) & (q["recv_q"] > 0)].reset_index(drop=True)


def collapses(trial: Trial) -> pd.DataFrame:
    """The collapses ``ss`` saw while the reader was paused: samples whose memory (skmem r)
    fell by more than :data:`COLLAPSE_DROP` from the sample before while the payload queued
    (Recv-Q) did not fall. Nothing was read, so the memory came back from the kernel copying
    the queued payload into fewer, fuller buffers. Columns: ``time``, ``recv_q`` (the payload
    queued, which the collapse copied), ``r_before``, ``r_after``."""
    return _collapses(_paused_queue(trial))


def _collapses(q: pd.DataFrame) -> pd.DataFrame:
    before = q.shift(1)
    fell = (q["r"] < (1 - COLLAPSE_DROP) * before["r"]) & (q["recv_q"] >= before["recv_q"])
    return pd.DataFrame({"time": q["time"][fell], "recv_q": q["recv_q"][fell], "r_before": before["r"][fell],
                         "r_after": q["r"][fell]}).reset_index(drop=True)


def collapse_row(trial: Trial) -> dict[str, object]:
    """One row of the tiny-writes table: the reader's buffer, memory per payload byte before
    the first collapse (or over the whole pause where none came) and right after it, the
    reader's prune and collapse counters, and the first collapse as ``ss`` saw it (None
    where there was none)."""
    q = _paused_queue(trial)
    seen = _collapses(q)
    first = seen.iloc[0] if len(seen) else None
    ahead = q[q["time"] < first["time"]] if first is not None else q
    counted = trial.counters(trial.receiver)
    pruned, collapsed = (counted.get(k, 0) for k in COLLAPSE_COUNTERS[:2])
    return {
        "variant": trial.label,
        "largest rb during the pause, B": float(q["rb"].max()) if len(q) else None,
        "memory per payload byte": float((ahead["r"] / ahead["recv_q"]).iloc[-1]) if len(ahead) else None,
        **{name.removeprefix("TcpExt"): counted.get(name, 0) for name in COLLAPSE_COUNTERS},
        "collapsed per prune": collapsed / pruned if pruned else None,
        "collapses seen": len(seen),
        "first collapse s": None if first is None else float(first["time"]),
        "payload copied B": None if first is None else float(first["recv_q"]),
        "memory per payload byte after": None if first is None else float(first["r_after"] / first["recv_q"]),
    }


def receive_queue_plot(trial: Trial, *, ax=None, title: str | None = None, unit: str = "MB"):
    """Recv-Q, skmem r and rb of the reader over time, with its pause shaded; sizes in ``unit``
    (KB or MB, 1024-based as the course's buffer sizes)."""
    import matplotlib.pyplot as plt

    from ..words import Messages

    t = Messages()
    q = receive_queue(trial)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    scale = {"KB": 2**10, "MB": 2**20}[unit]
    ax.step(q["time"], q["rb"] / scale, where="post", linestyle="--", label=t("plot.rb_limit"))
    ax.step(q["time"], q["r"] / scale, where="post", label=t("plot.r_memory"))
    ax.step(q["time"], q["recv_q"] / scale, where="post", linestyle=":", label=t("plot.recv_q_unread"))
    stopped, resumed = pause(trial, trial.packets.packets)
    if not math.isnan(stopped):
        ax.axvspan(stopped, resumed, alpha=0.12, color="grey", label=t("plot.reader_paused"))
    top = np.nanmax(q[["r", "recv_q"]].to_numpy()) / scale if len(q) else 1.0
    ax.set_ylim(0, 1.6 * top)
    ax.set_xlabel(t("plot.time"))
    ax.set_ylabel(unit)
    ax.set_title(title or t("plot.title.receive_queue", variant=trial.label))
    ax.legend(loc="upper right", fontsize=8)
    return ax


def death(trial: Trial) -> dict[str, object]:
    """How a connection whose probes went unanswered ended (a run with ``reset_ok`` behind a
    router that drops bare ACKs to the reader): times in seconds after the window closed, from
    the sender's capture and both sides' reports; NaN or None for what did not happen."""
    view = sender_packets(trial)
    closed_at, _ = episode(view)
    _, resumed_at = pause(trial, view)
    origin = _origin(view)
    def died(side: str) -> dict:
        return trial.side_report(side).get("extra", {}).get("died") or {}

    def error(side: str) -> str | None:
        # The exception's class and its errno's name ("TimeoutError (ETIMEDOUT)"): the same in
        # every language, where the C library's sentence after it is English.
        said = died(side).get("error")
        if not said:
            return None
        number = re.search(r"\[Errno (\d+)\]", said)
        name = errno.errorcode.get(int(number.group(1))) if number else None
        return said.split(":")[0] + (f" ({name})" if name else "")

    probes = probe_table(view)
    mine = view[view["dir"] == data_direction(view)]
    resets = mine[mine["f_rst"] & (mine["rel_time"] > closed_at)]
    gave_up = died(trial.sender)
    return {
        "probes": len(probes),
        "probes answered": int(probes["answer_win"].notna().sum()),
        "first probe s": float(probes["since_zero_s"].iloc[0]) if len(probes) else math.nan,
        "last probe s": float(probes["since_zero_s"].iloc[-1]) if len(probes) else math.nan,
        "dropped by the router": (trial.run.observe.get("middlebox") or {}).get("dropped"),
        "sender gave up s": gave_up["at"] - origin - closed_at if gave_up else math.nan,
        "sender's error": error(trial.sender),
        "reader resumed s": resumed_at - closed_at,
        "sender's FIN": bool((mine["f_fin"] & (mine["rel_time"] > closed_at)).any()),
        "reset s": float(resets["rel_time"].iloc[0]) - closed_at if len(resets) else math.nan,
        "reader's error": error(trial.receiver),
    }


def probes_against_schedule(trial: Trial, rto_s: float, *, rto_max_s: float = RTO_MAX_S) -> pd.DataFrame:
    """The persist timer's probes of ``trial`` beside :func:`probe_schedule`'s, the schedule cut
    where the reader resumed: one row per probe, ``probe`` (1, 2, …), ``predicted s`` and
    ``measured s`` after the window closed (None where one side has fewer probes)."""
    view = sender_packets(trial)
    (_, resumed_at), (closed_at, _) = pause(trial, view), episode(view)
    found = probe_table(view).since_zero_s.tolist()
    expected = probe_schedule(rto_s, resumed_at - closed_at, rto_max_s=rto_max_s)
    return pd.DataFrame([{"probe": k + 1, "predicted s": expected[k] if k < len(expected) else None,
                          "measured s": found[k] if k < len(found) else None}
                         for k in range(max(len(expected), len(found)))],
                        columns=["probe", "predicted s", "measured s"])


def giveup_after(rto_s: float, retries2: int, *, rto_max_s: float = RTO_MAX_S) -> float:
    """When a sender whose probes all go unanswered gives up, after the window closed: the
    persist timer sends ``retries2`` probes (``net.ipv4.tcp_retries2``), each gap doubled and
    capped at ``rto_max_s``, and aborts the connection at its next firing."""
    if rto_s <= 0:
        raise ValueError(f"rto_s must be positive, got {rto_s!r}")
    return sum(min(rto_s * 2**k, rto_max_s) for k in range(retries2 + 1))


def probe_schedule(rto_s: float, until_s: float, *, rto_max_s: float = RTO_MAX_S) -> list[float]:
    """When the persist timer sends its probes after the window closed: the first one RTO
    later, then each gap doubled (exponential backoff), each gap capped at ``rto_max_s``
    (net.ipv4.tcp_rto_max_ms); the probes before ``until_s``."""
    if rto_s <= 0:
        raise ValueError(f"rto_s must be positive, got {rto_s!r}")
    times, t, gap = [], 0.0, rto_s
    while t + gap <= until_s:
        t += gap
        times.append(t)
        gap = min(2 * gap, rto_max_s)
    return times
