"""The per-flow metrics of :mod:`.metrics` and the round-trip states of :mod:`.diagnose`,
compiled: one pass over each flow's packets, for one flow or for every flow of a capture.

A pandas pass per flow costs tens of milliseconds, almost all of it pandas' own overhead;
a busy server's capture holds tens of thousands of flows. Here each flow is a slice of a
flow-sorted index into the packet columns, and everything the diagnosis reads (summary
numbers, the limit of each round trip, request/response turns, gap statistics) lands in one
row of two output arrays. The one-flow path (:func:`flow_series`) runs the same code and also
returns the flow's series, from which :mod:`.metrics` builds its DataFrames.

The numbers must be the ones the pandas version gave, so the pandas and NumPy primitives it
used are reproduced as they compute, not as they are documented: ``searchsorted`` with
NumPy's reuse of the previous key's bounds (it matters on a flow whose clock ran backwards),
quantiles with NumPy's linear method and its two-sided interpolation, medians as the mean of
the middle pair, and float sums in NumPy's pairwise order (``Series.sum``, ``sum(axis=1)``).
"""

from __future__ import annotations

import math

import numpy as np

from ._decode import TH_ACK, TH_SYN
from ._expert_kernel import (
    A_ACK_LOST_PACKET, A_DUPLICATE_ACK, A_FAST_RETRANSMISSION, A_KEEP_ALIVE, A_LOST_PACKET, A_RETRANSMISSION,
    A_SPURIOUS_RETRANSMISSION, A_WINDOW_FULL, A_WINDOW_UPDATE, A_ZERO_WINDOW, A_ZERO_WINDOW_PROBE,
)
from ._jit import njit

#: A delayed ACK on Linux waits at least 40 ms (TCP_DELACK_MIN); 30 ms of extra wait
#: beyond the path's round trip counts as one.
DELAYED_ACK_MIN_S = 0.030
#: A sender silent for less than this is not idle, whatever the round trip (scheduler noise).
MIN_GAP_S = 0.005
#: A request/response flow has at least this many exchanges.
MIN_EXCHANGES = 3
#: A pause of the sender: no new data for this many segments' time at the goodput, and for
#: ``MIN_PAUSE_S`` at least (TCP's own pacing spaces segments by about one).
PAUSE_SEGMENTS, MIN_PAUSE_S = 4, 0.001
#: Data this soon after an ACK was let out by it. Measured on the corpus's 8 KB send buffers
#: (cubic and bbr, host 6.18, delay line): every pause ended 0.02-0.08 ms after an ACK.
ACK_WAKE_S = 0.0005
#: ... or within this share of the pause before it: a slower stack answers later (tcptrace's dsack
#: trace: 2.4-3.5 ms after the ACK, after pauses of 58-460 ms).
PAUSE_WAKE_SHARE = 0.1
#: Fewer pauses than this say nothing of who ended them.
MIN_PAUSES = 8
A_ANY_RETRANSMISSION = A_RETRANSMISSION | A_FAST_RETRANSMISSION | A_SPURIOUS_RETRANSMISSION

#: Integer results per flow (a row of ``out_i``), by column.
INT_FIELDS = (
    "data_dir", "vantage", "payload_bytes", "reverse_bytes", "mss", "wscale", "rwnd_unknown_scale", "data_packets",
    "retransmissions", "fast_retransmissions", "spurious_retransmissions", "retransmitted_bytes", "resent_segments",
    "resent_bytes", "timeouts", "dup_acks", "sack_packets", "sack_blocks", "zero_window_packets", "window_full",
    "window_updates", "persist_probes", "unanswered_resends", "acked_bytes", "delayed_ack_count", "captured_bytes",
    "lost_segments", "acked_unseen", "truncated_packets", "time_reversals",
    # for the diagnosis: timestamp RTT samples, request/response pairs seen (-1: the flow's data
    # is one-sided), turns (-1: not a flow of turns), gaps per reason, rounds per state and the
    # order in which each state first appears (pandas' value_counts breaks ties by it)
    "ts_samples", "exchanges", "turns",
    "gaps_ack_wait", "gaps_application", "gaps_nagle", "gaps_peer_wait", "gaps_receiver_window", "gaps_timeout",
    "gaps_zero_window",
    "rounds_sender_side", "rounds_receiver_window", "rounds_application", "rounds_nagle", "rounds_loss",
    "rounds_zero_window",
    "first_sender_side", "first_receiver_window", "first_application", "first_nagle", "first_loss",
    "first_zero_window",
)
#: Float results per flow (a row of ``out_f``), by column.
FLOAT_FIELDS = (
    "duration_s", "transfer_s", "goodput_bps", "bin_s", "rtt_s", "handshake_rtt_s", "handshake_server_share",
    "rtt_min_s", "rtt_median_s", "rtt_p90_s", "ts_rtt_median_s", "rwnd_median_bytes", "rwnd_max_bytes",
    "inflight_plateau_bytes", "inflight_mean_bytes", "inflight_max_bytes", "inflight_p90_bytes", "loss_fraction",
    "resent_fraction", "zero_window_s", "idle_s", "unanswered_s",
    # for the diagnosis
    "inflight_growth", "turn_bytes_median", "turn_wait_median", "app_gap_s", "app_gap_median_s", "nagle_gap_s",
    "nagle_gap_median_s", "undelayed_rtt_s",
    "gap_s_ack_wait", "gap_s_application", "gap_s_nagle", "gap_s_peer_wait", "gap_s_receiver_window",
    "gap_s_timeout", "gap_s_zero_window",
    # what a capture next to the receiver shows of the path, and what one next to the sender shows
    # of its application (see _arrival_rate, _self_woken)
    "arrival_rate_bps", "self_woken_share",
)
NI, NF = len(INT_FIELDS), len(FLOAT_FIELDS)

# Column numbers, spelled out: numba reads module globals as compile-time constants.
(I_DD, I_VANTAGE, I_PAYLOAD, I_REVERSE, I_MSS, I_WSCALE, I_UNKNOWN_SCALE, I_DATA_PACKETS, I_RETX, I_FAST,
 I_SPURIOUS, I_RETX_BYTES, I_RESENT, I_RESENT_BYTES, I_TIMEOUTS, I_DUP_ACKS, I_SACK_PACKETS, I_SACK_BLOCKS,
 I_ZW_PACKETS, I_WINDOW_FULL, I_WINDOW_UPDATES, I_PERSIST, I_UNANSWERED, I_ACKED, I_DELAYED, I_CAPTURED, I_LOST,
 I_UNSEEN, I_TRUNCATED, I_REVERSALS, I_TS_SAMPLES, I_EXCHANGES, I_TURNS) = range(33)
I_GAPS = 33  # + gap reason code
I_ROUNDS = 40  # + state code - 1
I_FIRST = 46  # + state code - 1
(F_DURATION, F_TRANSFER, F_GOODPUT, F_BIN, F_RTT, F_HS_RTT, F_HS_SHARE, F_RTT_MIN, F_RTT_MEDIAN, F_RTT_P90,
 F_TS_RTT_MEDIAN, F_RWND_MEDIAN, F_RWND_MAX, F_PLATEAU, F_INFLIGHT_MEAN, F_INFLIGHT_MAX, F_INFLIGHT_P90,
 F_LOSS_FRACTION, F_RESENT_FRACTION, F_ZW_S, F_IDLE, F_UNANSWERED, F_INFLIGHT_GROWTH, F_TURN_BYTES, F_TURN_WAIT,
 F_APP_GAP_S, F_APP_GAP_MEDIAN, F_NAGLE_GAP_S, F_NAGLE_GAP_MEDIAN, F_UNDELAYED) = range(30)
F_GAP_S = 30  # + gap reason code
F_ARRIVAL, F_SELF_WOKEN = 37, 38
assert I_FIRST + 6 == NI and F_SELF_WOKEN + 1 == NF

#: Gap reasons, coded in alphabetical order (the order pandas' groupby gives them).
GAP_REASONS = ("ack-wait", "application", "nagle-delayed-ack", "peer-wait", "receiver-window",
               "retransmission-timeout", "zero-window")
R_ACK_WAIT, R_APPLICATION, R_NAGLE, R_PEER_WAIT, R_RECEIVER_WINDOW, R_TIMEOUT, R_ZERO_WINDOW = range(7)
#: Round-trip states (0: nothing happened in that round trip).
S_NONE, S_SENDER, S_RWND, S_APP, S_NAGLE, S_LOSS, S_ZERO = range(7)
#: Vantage points, as codes.
VANTAGES = ("unknown", "sender", "receiver", "middle")
#: Bits of the per-packet mask :func:`flow_series` returns: the rows each series is made of.
(M_INFLIGHT, M_RWND, M_RTT, M_RETX, M_RESENT, M_DUPACK, M_DELAYED) = (1, 2, 4, 8, 16, 32, 64)


# ---------------------------------------------------------------- NumPy's and pandas' arithmetic


@njit(cache=True)
def _search(arr, key, right):
    """``np.searchsorted(arr, key)`` for one key: a plain binary search."""
    lo, hi = 0, arr.size
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if arr[mid] <= key if right else arr[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _search_many(arr, keys, right):
    """``np.searchsorted(arr, keys)``, reusing the previous key's bounds as NumPy does (the
    same answers on sorted ``arr``; on unsorted ``arr`` this is what NumPy answers)."""
    out = np.empty(keys.size, np.int64)
    n = arr.size
    lo, hi = 0, n
    if keys.size == 0:
        return out
    last = keys[0]
    for k in range(keys.size):
        key = keys[k]
        if (last <= key) if right else (last < key):
            hi = n
        else:
            lo = 0
            hi = hi + 1 if hi < n else n
        last = key
        while lo < hi:
            mid = lo + ((hi - lo) >> 1)
            if arr[mid] <= key if right else arr[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        out[k] = lo
    return out


@njit(cache=True)
def _quantile(values, q):
    """``Series.quantile(q)`` (NumPy's linear method) of a NaN-free array; NaN when empty."""
    n = values.size
    if n == 0:
        return math.nan
    v = np.sort(values)
    virtual = (n - 1) * q
    prev = math.floor(virtual)
    if virtual >= n - 1:
        i = j = n - 1
        gamma = virtual + 1.0  # NumPy sets the index to -1 before taking the fraction
    else:
        i = int(prev)
        j = i + 1
        gamma = virtual - prev
    diff = v[j] - v[i]
    if gamma >= 0.5:
        return float(v[j] - diff * (1 - gamma))
    return float(v[i] + diff * gamma)


@njit(cache=True)
def _median(values):
    """``Series.median()`` of a NaN-free array: the mean of the middle pair; NaN when empty."""
    n = values.size
    if n == 0:
        return math.nan
    v = np.sort(values)
    if n % 2:
        return float(v[n // 2])
    return (float(v[n // 2 - 1]) + float(v[n // 2])) / 2


@njit(cache=True)
def _block(a, lo, n):
    """NumPy's pairwise sum of at most 128 values: eight running sums, then the rest in turn."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r = a[lo:lo + 8].copy()
    i = 8
    while i < n - (n % 8):
        for k in range(8):
            r[k] += a[lo + i + k]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise(a, lo, n):
    """NumPy's pairwise summation of ``a[lo:lo + n]`` (what ``Series.sum`` adds up): halves (cut
    at a multiple of 8) summed apart down to blocks of 128. Without recursion, which numba's
    cache cannot link: the halves are walked depth first, left before right."""
    if n <= 128:
        return _block(a, lo, n)
    node_lo = np.empty(128, np.int64)
    node_n = np.empty(128, np.int64)
    node_done = np.zeros(128, np.bool_)
    values = np.empty(128)
    nodes = 1
    nvalues = 0
    node_lo[0], node_n[0] = lo, n
    while nodes:
        nodes -= 1
        l, m, done = node_lo[nodes], node_n[nodes], node_done[nodes]
        if m <= 128:
            values[nvalues] = _block(a, l, m)
            nvalues += 1
        elif done:  # both halves summed: the right one on top
            nvalues -= 1
            values[nvalues - 1] = values[nvalues - 1] + values[nvalues]
        else:
            half = m // 2
            half -= half % 8
            node_lo[nodes], node_n[nodes], node_done[nodes] = l, m, True
            node_lo[nodes + 1], node_n[nodes + 1], node_done[nodes + 1] = l + half, m - half, False
            node_lo[nodes + 2], node_n[nodes + 2], node_done[nodes + 2] = l, half, False
            nodes += 3
    return values[0]


@njit(cache=True)
def _sum(a):
    return _pairwise(a, 0, a.size)


@njit(cache=True)
def _cummax(a):
    out = a.copy()
    for i in range(1, a.size):
        if out[i - 1] > out[i]:
            out[i] = out[i - 1]
    return out


@njit(cache=True)
def _overlap(start, end, s, e, out):
    """Add to ``out`` the time each bin [start, end) shares with the intervals [s, e), summed
    over the intervals in NumPy's pairwise order, as ``np.clip(...).sum(axis=1)`` did."""
    m = s.size
    if m == 0:
        return
    row = np.empty(m)
    for k in range(start.size):
        for j in range(m):
            x = min(e[j], end[k]) - max(s[j], start[k])
            row[j] = x if x > 0 else 0.0
        out[k] += _pairwise(row, 0, m)


# ---------------------------------------------------------------- one flow


@njit(cache=True)
def _flow(idx, rel_time, dirn, seq, ack, length, tcp_flags, expert, win, win_raw, ts_val, ts_ecr, time_ns, ack_rtt,
          bif, truncated, sack_count, bytes_c2s, bytes_s2c, mss_client, mss_server, bin_request, oi, of):
    """Fill ``oi``/``of`` (one row each) for the flow whose packets are ``idx`` (positions in
    the columns, in capture order, duplicate frames left out); return its series."""
    n = idx.size
    t = rel_time[idx]
    dr = dirn[idx]
    sq = seq[idx]
    ak = ack[idx]
    ln = length[idx].astype(np.int64)
    fl = tcp_flags[idx]
    ex = expert[idx]
    syn = (fl & TH_SYN) != 0
    has_ack = (fl & TH_ACK) != 0
    nan = math.nan

    # --- which way the data went
    s0 = 0
    s1 = 0
    for i in range(n):
        if dr[i] == 0:
            s0 += ln[i]
        else:
            s1 += ln[i]
    dd = 0 if s0 >= s1 else 1
    snd = np.nonzero(dr == dd)[0]
    rcv = np.nonzero(dr != dd)[0]
    data = snd[ln[snd] > 0]
    acks = rcv[has_ack[rcv]]
    nd = data.size
    oi[I_DD] = dd

    # --- handshake, vantage
    t_syn = nan
    t_synack = nan
    have_syn = False
    have_synack = False
    for i in range(n):
        if syn[i] and not has_ack[i] and dr[i] == 0:
            t_syn = t[i]
            have_syn = True
        if not have_synack and syn[i] and has_ack[i] and dr[i] == 1:
            t_synack = t[i]
            have_synack = True
    hs = nan
    share = nan
    if have_syn and have_synack:
        for i in range(n):
            if dr[i] == 0 and not syn[i] and t[i] >= t_synack:
                if t_synack >= t_syn:
                    hs = t[i] - t_syn
                    share = (t_synack - t_syn) / hs if hs > 0 else nan
                break
    vantage = 0
    if math.isfinite(share):
        near = 0 if share > 0.8 else 1 if share < 0.2 else 2  # client, server, middle
        vantage = 3 if near == 2 else (1 if near == dd else 2)
    of[F_HS_RTT] = hs
    of[F_HS_SHARE] = share
    oi[I_VANTAGE] = vantage

    # --- volume, goodput
    keep_probe = ((ex[data] & (A_KEEP_ALIVE | A_ZERO_WINDOW_PROBE)) != 0)
    data_t = t[data]
    data_end = sq[data] + ln[data]
    resend = np.zeros(nd, np.bool_)
    highest = -1 << 62
    for k in range(nd):
        if k > 0 and data_end[k] <= highest:
            resend[k] = not keep_probe[k]
        if k == 0 or data_end[k] > highest:
            highest = data_end[k]
    oi[I_REVERSE] = bytes_s2c if dd == 0 else bytes_c2s
    of[F_DURATION] = t[n - 1] - t[0]
    unanswered_s = 0.0
    resends_after = 0
    payload = 0
    acked_bytes = 0
    first_seq = 0
    if nd == 0:
        t0 = t1 = t[0]
        transfer = 0.0
        goodput = 0.0
    else:
        first_seq = sq[data].min()
        last_end = data_end.max()
        payload = last_end - first_seq
        t0 = data_t[0]
        t1 = data_t[nd - 1]
        for k in range(rcv.size):
            i = rcv[k]
            if has_ack[i] and ak[i] >= last_end:
                t1 = t[i]
                break
        transfer = max(t1 - t0, 0.0)
        # How long the sender kept resending after the peer's last packet, and how many
        # segments: none unless two resends follow it and the flow ends on one.
        since = t[rcv[rcv.size - 1]] if rcv.size else -math.inf
        last = -1
        for k in range(nd):
            if not keep_probe[k]:
                last = k
                if data_t[k] > since and resend[k]:
                    resends_after += 1
        if not (resends_after < 2 or last < 0 or not resend[last]):
            unanswered_s = data_t[last] - max(since, data_t[0])
        else:
            resends_after = 0
        if acks.size:
            acked_bytes = min(max(ak[acks].max() - first_seq, 0), payload)
        goodput = 8 * payload / transfer if transfer > 0 else nan
        if resends_after and not acked_bytes:
            goodput = 0.0  # resent into silence and never acknowledged: nothing is known delivered
    of[F_TRANSFER] = transfer
    of[F_GOODPUT] = goodput
    of[F_UNANSWERED] = unanswered_s
    oi[I_PAYLOAD] = payload
    oi[I_DATA_PACKETS] = nd
    oi[I_UNANSWERED] = resends_after
    oi[I_ACKED] = acked_bytes

    # --- loss recovery: from the duplicate ACKs (or the resend) that announced a loss to
    # the first ACK beyond the resent data, whose RTT sample is then dropped (Karn)
    retx = data[(ex[data] & A_ANY_RETRANSMISSION) != 0]
    rt = t[retx]
    ack_t = t[acks]
    ack_cum = _cummax(ak[acks])
    first = np.maximum(_search_many(ack_t, rt, True), _search_many(ack_cum, sq[retx], True))
    karn = np.zeros(n, np.bool_)
    rec_end = rt.copy()
    for k in range(rt.size):
        if first[k] < ack_t.size:
            rec_end[k] = ack_t[first[k]]
            karn[acks[first[k]]] = True
    dup_t = t[acks[(ex[acks] & A_DUPLICATE_ACK) != 0]]
    window = hs if math.isfinite(hs) else 0.0
    lo = _search_many(dup_t, rt - window - MIN_GAP_S, False)
    hi = _search_many(dup_t, rt, True)
    rec_start = rt.copy()
    for k in range(rt.size):
        if hi[k] > lo[k]:
            rec_start[k] = dup_t[min(lo[k], max(dup_t.size - 1, 0))]

    # --- round trips: ACK samples (not of the SYN-ACK, not ambiguous, above zero), timestamps
    mask = np.zeros(n, np.uint8)
    art = ack_rtt[idx]
    samples = np.empty(rcv.size)
    ns = 0
    for k in range(rcv.size):
        i = rcv[k]
        if art[i] > 0 and not syn[i] and not karn[i]:
            samples[ns] = art[i]
            ns += 1
            mask[i] |= M_RTT
    samples = samples[:ns]
    ts_time, ts_rtt = _ts_echo(data, rcv, t, ts_val[idx], ts_ecr[idx])
    rtt_min = samples.min() if ns else nan
    if math.isfinite(hs) and hs > 0:
        rtt = hs  # the handshake when captured (right at any vantage point)
    elif ns:
        rtt = _quantile(samples, 0.05)  # else the fastest data round trips: right next to the sender
    else:
        rtt = ts_rtt.min() if ts_rtt.size else nan
    # Next to the receiver an ACK follows its data at once: the round trips are those of its
    # own timestamps, echoed by the sender's next data (the whole path both ways, its queues too).
    rx_time = np.empty(0)
    rx_rtt = np.empty(0)
    ack_min = rtt_min  # the fastest ACK: next to the receiver, its own answer without delay
    if vantage == 2:  # its ACKs' own "round trips" are its ACK delay: not the path's
        rx_time, rx_rtt = _ts_echo(rcv, data, t, ts_val[idx], ts_ecr[idx])
        order_rx = np.argsort(rx_time, kind="mergesort")
        rx_time, rx_rtt = rx_time[order_rx], rx_rtt[order_rx]
        samples = rx_rtt
        # The fastest round trip: the handshake's where it is faster (before any queue built).
        rtt_min = min(samples.min(), hs) if samples.size and hs == hs else (samples.min() if samples.size else hs)
    of[F_RTT] = rtt
    of[F_RTT_MIN] = rtt_min
    of[F_RTT_MEDIAN] = _median(samples)
    of[F_RTT_P90] = _quantile(samples, 0.9)
    of[F_TS_RTT_MEDIAN] = _median(ts_rtt)
    oi[I_TS_SAMPLES] = ts_rtt.size

    # --- the receiver's windows
    mss = mss_server if dd == 0 else mss_client
    if mss <= 0:
        mss = ln[data].max() if nd else 0
    oi[I_MSS] = mss
    # Segments in MSS units from the handshake: a TSO/GSO super-segment (captured at the sender
    # before the NIC cuts it) or a GRO-coalesced one (at the receiver) counts as the segments it holds.
    oi[I_DATA_PACKETS] = _segments(ln[data], mss)
    body = rcv[~syn[rcv]]
    rw_t = t[body]
    rw_raw = win_raw[idx][body]
    w = win[idx][body]
    rw_b = np.empty(body.size)
    unknown = False
    known = 0
    for k in range(body.size):
        mask[body[k]] |= M_RWND
        if w[k] < 0:
            rw_b[k] = nan
            unknown = True
        else:
            rw_b[k] = w[k]
            known += 1
    oi[I_UNKNOWN_SCALE] = unknown
    rw_known = rw_b[~np.isnan(rw_b)]
    of[F_RWND_MEDIAN] = _median(rw_known)
    of[F_RWND_MAX] = rw_known.max() if known else nan

    # --- time bins: about one round trip each, at most ~500
    span = max(t1 - t0, 1e-6)
    if bin_request == bin_request:
        bin_s = bin_request
    else:
        bin_s = rtt if math.isfinite(rtt) and rtt > 0 else span / 100
        bin_s = max(bin_s, span / 500, 1e-3)
    of[F_BIN] = bin_s
    nedges = int(math.ceil(span / bin_s)) + 1
    if nedges < 2:
        nedges = 2
    edges = np.empty(nedges)
    for k in range(nedges):
        edges[k] = t0 + bin_s * k
    nb = nedges - 1
    sent = np.zeros(nb, np.int64)
    for k in range(nd):
        v = data_t[k]
        if v >= edges[0] and v <= edges[nb]:  # np.histogram: the last bin is closed
            b = min(_search(edges, v, True) - 1, nb - 1)
            sent[b] += ln[data[k]]
    # Delivered: how far the cumulative ACK moved in each bin.
    at = _search_many(ack_t, edges, True) - 1
    delivered = np.empty(nb, np.int64)
    prev = 0
    for k in range(nedges):
        j = at[k]
        cur = (ack_cum[min(max(j, 0), ack_cum.size - 1)] if j >= 0 else ack_cum[0]) if ack_cum.size else 0
        if k:
            delivered[k - 1] = cur - prev
        prev = cur

    # --- bytes in flight: as Wireshark counts them where the capture sits, except next to the
    # receiver, where they are estimated (_receiver_flight); and whether each reaches the window
    inflight = data[bif[idx][data] >= 0]
    in_t = t[inflight]
    in_b = bif[idx][inflight]
    for k in range(inflight.size):
        mask[inflight[k]] |= M_INFLIGHT
    turn_t, turn_b = in_t, in_b  # turns are judged on what this capture saw in flight
    if vantage == 2:
        in_t, in_b, at_edge = _receiver_flight(data, resend, t, data_end, body, ak, rw_t, rw_b, mss, rx_time,
                                               rx_rtt, rtt)
    else:
        at_edge = _at_window(in_t, in_b, rw_t, rw_b, mss)
    plateau = nan
    if in_b.size:  # next to the receiver, the estimate may have none where Wireshark had some
        b = _search_many(edges, in_t, True) - 1  # np.digitize
        top = np.full(nedges + 1, -1, np.int64)  # bins -1 .. nedges - 1
        seen = np.zeros(nedges + 1, np.bool_)
        for k in range(in_b.size):
            if not seen[b[k] + 1] or in_b[k] > top[b[k] + 1]:
                top[b[k] + 1] = in_b[k]
            seen[b[k] + 1] = True
        per_bin = top[seen]
        keys = np.nonzero(seen)[0] - 1
        # Leave out the ramp (round trips before in-flight first reaches 80% of its usual
        # peak); the plateau is then the typical in-flight at a send.
        peak = _quantile(per_bin, 0.9)
        ramp_end = keys[0]
        for k in range(per_bin.size):
            if per_bin[k] >= 0.8 * peak:
                ramp_end = keys[k]
                break
        plateau = _median(in_b[b >= ramp_end])
    of[F_PLATEAU] = plateau
    of[F_INFLIGHT_MEAN] = goodput * rtt / 8
    of[F_INFLIGHT_MAX] = float(in_b.max()) if in_b.size else nan
    of[F_INFLIGHT_P90] = _quantile(in_b, 0.9)
    # Bytes in flight (90th percentile) in the last quarter of the transfer over the second
    # (the first holds slow start), quarters as np.array_split cuts them.
    growth = nan
    if in_b.size >= 8:
        q, r = divmod(in_b.size, 4)
        bounds = np.empty(5, np.int64)
        bounds[0] = 0
        for k in range(4):
            bounds[k + 1] = bounds[k] + q + (1 if k < r else 0)
        early = _quantile(in_b[bounds[1]:bounds[2]], 0.9)
        if early > 0:
            growth = _quantile(in_b[bounds[3]:bounds[4]], 0.9) / early
    of[F_INFLIGHT_GROWTH] = growth

    # --- losses, ACK events
    resent = data[resend]
    resent_t = t[resent]
    resent_bytes = ln[resent].sum()
    for k in range(resent.size):
        mask[resent[k]] |= M_RESENT
    for k in range(retx.size):
        mask[retx[k]] |= M_RETX
    retx_bytes = ln[retx].sum()
    oi[I_RESENT] = _segments(ln[resent], mss)
    oi[I_RESENT_BYTES] = resent_bytes
    of[F_RESENT_FRACTION] = resent_bytes / payload if payload else 0.0
    oi[I_RETX] = _segments(ln[retx], mss)
    oi[I_RETX_BYTES] = retx_bytes
    of[F_LOSS_FRACTION] = retx_bytes / payload if payload else 0.0
    oi[I_FAST] = ((ex[data] & A_FAST_RETRANSMISSION) != 0).sum()
    oi[I_SPURIOUS] = ((ex[data] & A_SPURIOUS_RETRANSMISSION) != 0).sum()
    sacks = sack_count[idx]
    sack_packets = 0
    sack_blocks = 0
    dup_acks = 0
    zw_packets = 0
    updates = 0
    dup_times = np.empty(rcv.size)
    for k in range(rcv.size):
        i = rcv[k]
        if ex[i] & A_DUPLICATE_ACK:
            dup_times[dup_acks] = t[i]
            dup_acks += 1
            mask[i] |= M_DUPACK
        if ex[i] & A_ZERO_WINDOW:
            zw_packets += 1
        if ex[i] & A_WINDOW_UPDATE:
            updates += 1
        if sacks[i] > 0:
            sack_packets += 1
            sack_blocks += sacks[i]
    dup_times = dup_times[:dup_acks]
    oi[I_DUP_ACKS] = dup_acks
    oi[I_SACK_PACKETS] = sack_packets
    oi[I_SACK_BLOCKS] = sack_blocks
    oi[I_ZW_PACKETS] = zw_packets
    oi[I_WINDOW_UPDATES] = updates
    oi[I_WINDOW_FULL] = ((ex[snd] & A_WINDOW_FULL) != 0).sum()
    # Linux probes a zero window with an empty segment below the window: Wireshark's keep-alive.
    oi[I_PERSIST] = ((ex[snd] & (A_KEEP_ALIVE | A_ZERO_WINDOW_PROBE)) != 0).sum()

    # --- zero-window episodes: from the first closed window to the next open one
    zw_start = np.empty(body.size + 1)
    zw_end = np.empty(body.size + 1)
    nz = 0
    open_at = nan
    for k in range(body.size):
        closed = rw_raw[k] == 0
        if closed and open_at != open_at:
            open_at = rw_t[k]
        elif not closed and open_at == open_at:
            zw_start[nz] = open_at
            zw_end[nz] = rw_t[k]
            nz += 1
            open_at = nan
    if open_at == open_at:
        zw_start[nz] = open_at
        zw_end[nz] = t[n - 1]
        nz += 1
    zw_start = zw_start[:nz]
    zw_end = zw_end[:nz]
    of[F_ZW_S] = _sum(zw_end - zw_start)

    # --- idle gaps of the sender while data remains, each with the reason the packets suggest
    undelayed = nan  # a round trip without ACK delay: the handshake's or the fastest data ACK
    for x in (ack_min, hs):
        if math.isfinite(x) and not (undelayed <= x):
            undelayed = x
    if undelayed != undelayed:
        undelayed = 0.0
    of[F_UNDELAYED] = undelayed
    # Away from the sender, an ACK seen here reaches the sender, and what it sends in answer
    # comes back here, this much later (the handshake tells where the capture sat).
    lag = hs * (share if dd == 1 else 1 - share) if math.isfinite(share) and math.isfinite(hs) else 0.0
    gap_start, gap_end, gap_out, gap_reason = _gaps(data, acks, t, sq, ln, ex, bif[idx], art, t1, rtt, mss, lag,
                                                   ack_t, ak, rw_t, rw_raw, rw_b, undelayed)
    if vantage == 2:
        # Next to the receiver the sender's silences look like waits for ACKs (its own ACKs
        # leave at once): one that began with the flight at the window was the window's.
        for g in range(gap_reason.size):
            if gap_reason[g] == R_ACK_WAIT or gap_reason[g] == R_APPLICATION:
                j = _search(in_t, gap_start[g], True) - 1
                if j >= 0 and at_edge[j]:
                    gap_reason[g] = R_RECEIVER_WINDOW
    gap_dur = gap_end - gap_start
    of[F_IDLE] = _sum(gap_dur)
    for r in range(7):
        oi[I_GAPS + r] = 0
        of[F_GAP_S + r] = 0.0
    comp = np.zeros(7)
    # Seconds per reason, compensated (Kahan) sums in time order. (pandas' groupby, which this
    # replaced, sums in an order of its own: the last bit may differ from what it gave.)
    for k in range(gap_reason.size):
        r = gap_reason[k]
        oi[I_GAPS + r] += 1
        y = gap_dur[k] - comp[r]
        s = of[F_GAP_S + r] + y
        comp[r] = s - of[F_GAP_S + r] - y
        of[F_GAP_S + r] = s
    oi[I_TIMEOUTS] = oi[I_GAPS + R_TIMEOUT]
    app = (gap_reason == R_APPLICATION) | (gap_reason == R_PEER_WAIT)
    of[F_APP_GAP_S] = _sum(gap_dur[app])
    of[F_APP_GAP_MEDIAN] = _median(gap_dur[app])
    nagle = gap_reason == R_NAGLE
    of[F_NAGLE_GAP_S] = _sum(gap_dur[nagle])
    of[F_NAGLE_GAP_MEDIAN] = _median(gap_dur[nagle])

    # --- delayed ACKs
    delayed = 0
    for k in range(rcv.size):
        i = rcv[k]
        if art[i] == art[i] and not syn[i] and art[i] - undelayed >= DELAYED_ACK_MIN_S:
            delayed += 1
            mask[i] |= M_DELAYED
    oi[I_DELAYED] = delayed

    # --- request / response: runs of one side's new data, each client run followed by a server run
    req = _requests(t, dr, ln, ex)
    oi[I_EXCHANGES] = req[0].size if req[6] else -1
    turns, turn_bytes, turn_wait = _turns(req, dd, rtt, turn_t, turn_b, mss)
    oi[I_TURNS] = turns
    of[F_TURN_BYTES] = turn_bytes
    of[F_TURN_WAIT] = turn_wait

    # --- the capture itself
    captured = 0
    if nd:
        # Distinct payload bytes: segments by sequence number, each counting only what lies
        # beyond the furthest byte of the segments before it.
        order = np.argsort(sq[data], kind="mergesort")
        s_start = sq[data][order]
        s_end = s_start + ln[data][order]
        reach = s_start[0]
        for k in range(nd):
            x = s_end[k] - max(s_start[k], reach)
            if x > 0:
                captured += x
            reach = s_end[k] if k == 0 else max(reach, s_end[k])
    oi[I_CAPTURED] = captured
    oi[I_LOST] = ((ex & A_LOST_PACKET) != 0).sum()
    oi[I_UNSEEN] = ((ex & A_ACK_LOST_PACKET) != 0).sum()
    oi[I_TRUNCATED] = truncated[idx].sum()
    tns = time_ns[idx]
    reversals = 0
    for i in range(1, n):
        if tns[i] < tns[i - 1]:
            reversals += 1
    oi[I_REVERSALS] = reversals

    # --- the limit each round trip shows
    of[F_ARRIVAL] = _arrival_rate(data, resend, t, ln)
    of[F_SELF_WOKEN] = _self_woken(acks, data, resend, t, goodput, mss, transfer, lag)
    states = _round_states(edges, bin_s, sent, delivered, in_t, at_edge, gap_start, gap_end,
                           gap_reason, t[retx], resent_t, dup_times, rec_start, rec_end, zw_start, zw_end)
    for c in range(6):
        oi[I_ROUNDS + c] = 0
        oi[I_FIRST + c] = -1
    rank = 0
    for k in range(nb):
        c = states[k]
        if c != S_NONE:
            if oi[I_ROUNDS + c - 1] == 0:
                oi[I_FIRST + c - 1] = rank
                rank += 1
            oi[I_ROUNDS + c - 1] += 1
    return (mask, edges, sent, delivered, states, gap_start, gap_end, gap_out, gap_reason, zw_start, zw_end,
            rec_start, rec_end, ts_time, ts_rtt, req, in_t, in_b)


@njit(cache=True)
def _segments(lengths, mss):
    """How many MSS-sized segments ``lengths`` of payload make (each at least one)."""
    total = 0
    for n in lengths:
        total += max((n + mss - 1) // mss, 1) if mss > 0 else 1
    return total


@njit(cache=True)
def _ts_echo(data, rcv, t, tsv, tse):
    """Round trips from timestamps: a receiver packet echoing a value, since the sender first
    sent it; in the order of the values (as pandas' join on the sorted groups gives them)."""
    sent_v = tsv[data]
    sent_t = t[data]
    keep = sent_v >= 0
    sent_v, sent_t = sent_v[keep], sent_t[keep]
    echo_v = tse[rcv]
    echo_t = t[rcv]
    keep = echo_v >= 0
    echo_v, echo_t = echo_v[keep], echo_t[keep]
    a = np.argsort(sent_v, kind="mergesort")
    b = np.argsort(echo_v, kind="mergesort")
    out_t = np.empty(min(a.size, b.size))
    out_r = np.empty(out_t.size)
    m = 0
    i = j = 0
    while i < a.size and j < b.size:
        va, vb = sent_v[a[i]], echo_v[b[j]]
        if va < vb:
            i += 1
            continue
        if vb < va:
            j += 1
            continue
        first_sent = sent_t[a[i]]
        while i < a.size and sent_v[a[i]] == va:
            first_sent = min(first_sent, sent_t[a[i]])
            i += 1
        first_echo = echo_t[b[j]]
        while j < b.size and echo_v[b[j]] == vb:
            first_echo = min(first_echo, echo_t[b[j]])
            j += 1
        if first_echo >= first_sent:
            out_t[m] = first_echo
            out_r[m] = first_echo - first_sent
            m += 1
    return out_t[:m], out_r[:m]


@njit(cache=True)
def _gaps(data, acks, t, sq, ln, ex, bif, art, t1, rtt, mss, lag, ack_t, ak, rw_t, rw_raw, rw_b, undelayed):
    """Silences of the sender within the transfer (data sent after every byte was
    acknowledged, and the wait before the first, are not part of it): start, end, bytes
    outstanding and reason code of each."""
    d = data[t[data] <= t1]
    td = t[d]
    threshold = max(rtt / 2 if math.isfinite(rtt) else 0.0, MIN_GAP_S)
    m = td.size
    g_start = np.empty(max(m - 1, 0))
    g_end = np.empty(max(m - 1, 0))
    g_out = np.empty(max(m - 1, 0), np.int64)
    g_reason = np.empty(max(m - 1, 0), np.int64)
    if m < 2:
        return g_start, g_end, g_out, g_reason
    high = _cummax(sq[d] + ln[d])
    ack_v = _cummax(ak[acks])
    if mss <= 0:
        mss = 1460
    ng = 0
    for i in range(m - 1):
        if not td[i + 1] - td[i] > threshold:
            continue
        start, end = td[i], td[i + 1]
        j = _search(ack_t, end, True) - 1  # the last ACK before the sender woke up
        acked = ack_v[j] if j >= 0 else 0
        last_ack_t = ack_t[j] if j >= 0 else -math.inf
        outstanding = high[i] - acked
        k_start = _search(rw_t, start, True) - 1
        k_end = _search(rw_t, end, True) - 1
        window_closed = False
        if k_end >= 0:
            for k in range(max(k_start, 0), k_end + 1):
                if rw_raw[k] == 0:
                    window_closed = True
                    break
        rwnd_start = rw_b[k_start] if k_start >= 0 else math.nan
        # A fast retransmission answers duplicate ACKs: the silence before it is a wait for ACKs.
        nxt = ex[d[i + 1]]
        next_is_retx = (nxt & A_ANY_RETRANSMISSION) != 0 and not (nxt & A_FAST_RETRANSMISSION) != 0
        # Nagle holds data back while a small segment is the only thing un-ACKed.
        small = ln[d[i]] < mss and 0 <= bif[d[i]] <= mss
        woke_on_ack = end - last_ack_t < threshold + lag
        if window_closed:
            reason = R_ZERO_WINDOW
        elif next_is_retx:
            reason = R_TIMEOUT
        elif outstanding <= 0 and woke_on_ack and small and j >= 0 and math.isfinite(art[acks[j]]) \
                and art[acks[j]] - undelayed >= DELAYED_ACK_MIN_S:
            reason = R_NAGLE
        elif outstanding <= 0 and not woke_on_ack:
            reason = R_APPLICATION
        elif outstanding <= 0 and ln[acks[j]] > 0:
            # Woken by the peer's data, not by an ACK of its own: a request/response turn.
            reason = R_PEER_WAIT
        elif math.isfinite(rwnd_start) and high[i] - (
                ack_v[max(_search(ack_t, start, True) - 1, 0)] if ack_v.size else 0) >= rwnd_start - mss:
            reason = R_RECEIVER_WINDOW
        else:
            reason = R_ACK_WAIT
        g_start[ng] = start
        g_end[ng] = end
        g_out[ng] = outstanding
        g_reason[ng] = reason
        ng += 1
    return g_start[:ng], g_end[:ng], g_out[:ng], g_reason[:ng]


@njit(cache=True)
def _requests(t, dr, ln, ex):
    """Request/response pairs: (request start, end, bytes, response start, end, bytes, and
    whether both sides sent new data at all)."""
    fresh = np.nonzero((ln > 0) & ((ex & A_ANY_RETRANSMISSION) == 0))[0]
    m = fresh.size
    r_dir = np.empty(m, np.int64)
    r_start = np.empty(m)
    r_end = np.empty(m)
    r_bytes = np.empty(m, np.int64)
    nr = 0
    both = False
    for k in range(m):
        i = fresh[k]
        if k and dr[i] != dr[fresh[0]]:
            both = True
        if nr and r_dir[nr - 1] == dr[i]:
            r_end[nr - 1] = t[i]
            r_bytes[nr - 1] += ln[i]
        else:
            r_dir[nr] = dr[i]
            r_start[nr] = t[i]
            r_end[nr] = t[i]
            r_bytes[nr] = ln[i]
            nr += 1
    npairs = 0
    for k in range(nr - 1):
        if r_dir[k] == 0:
            npairs += 1
    q_start = np.empty(npairs)
    q_end = np.empty(npairs)
    q_bytes = np.empty(npairs, np.int64)
    p_start = np.empty(npairs)
    p_end = np.empty(npairs)
    p_bytes = np.empty(npairs, np.int64)
    if both:
        p = 0
        for k in range(nr - 1):
            if r_dir[k] == 0:  # the next run is the other side's: its response
                q_start[p], q_end[p], q_bytes[p] = r_start[k], r_end[k], r_bytes[k]
                p_start[p], p_end[p], p_bytes[p] = r_start[k + 1], r_end[k + 1], r_bytes[k + 1]
                p += 1
    else:
        q_start, q_end, q_bytes = q_start[:0], q_end[:0], q_bytes[:0]
        p_start, p_end, p_bytes = p_start[:0], p_end[:0], p_bytes[:0]
    return q_start, q_end, q_bytes, p_start, p_end, p_bytes, both


@njit(cache=True)
def _turns(req, dd, rtt, in_t, in_b, mss):
    """The sender's messages when the flow takes turns with its peer, each message out within
    a round trip and started with nothing else of the sender's in flight (so the wait for the
    peer, not TCP, sets the pace): (how many, median bytes, median wait between them), or
    (-1, NaN, NaN). Data clocked out by ACKs while the peer also talks (application
    acknowledgements beside one-way bulk) takes no turns."""
    if req[0].size < MIN_EXCHANGES or not (math.isfinite(rtt) and rtt > 0):
        return -1, math.nan, math.nan
    if dd == 0:
        start, end, size = req[0], req[1], req[2]
    else:
        start, end, size = req[3], req[4], req[5]
    if _median(end - start) > rtt:
        return -1, math.nan, math.nan
    at = _search_many(in_t, start, False)
    seen = 0
    quiet = 0
    for k in range(start.size):
        if at[k] < in_t.size and in_t[at[k]] == start[k]:
            seen += 1
            if in_b[at[k]] <= (mss if mss > 0 else 1460):
                quiet += 1
    if seen and quiet / seen < 0.5:
        return -1, math.nan, math.nan
    return start.size, _median(size), _median(start[1:] - end[:-1])


@njit(cache=True)
def _at_window(in_t, in_b, rw_t, rw_b, mss):
    """Whether each in-flight sample reaches the receiver's advertised window (within 2 MSS):
    against the window last advertised at or before it (of windows advertised at the same
    instant, the last captured; pandas' unstable sort took any)."""
    edge = np.zeros(in_t.size, np.bool_)
    known = np.nonzero(~np.isnan(rw_b))[0]
    if in_t.size and known.size:
        order = known[np.argsort(rw_t[known], kind="mergesort")]
        wt = rw_t[order]
        wb = rw_b[order]
        room = 2 * (mss if mss > 0 else 1460)
        for k in range(in_t.size):
            j = _search(wt, in_t[k], True) - 1
            if j >= 0 and in_b[k] >= wb[j] - room:
                edge[k] = True
    return edge


@njit(cache=True)
def _receiver_flight(data, resend, t, data_end, body, ak, rw_t, rw_b, mss, rx_time, rx_rtt, rtt):
    """Bytes in flight as a receiver can tell them: at each arrival of new data, the bytes the
    sender had out beyond what the receiver had acknowledged one round trip before (the ACK the
    sender was answering), and whether they reach the window that ACK advertised (within 2 MSS).
    The round trip is the receiver's latest timestamp sample (the path as it is then, queues
    included), else the handshake's; never the receiver's own ACK clock, which is instant here."""
    n = data.size
    out_t = np.empty(n)
    out_b = np.empty(n, np.int64)
    edge = np.zeros(n, np.bool_)
    if body.size == 0:
        return out_t[:0], out_b[:0], edge[:0]
    acked = _cummax(ak[body])
    room = 2 * (mss if mss > 0 else 1460)
    m = 0
    high = -1 << 62
    for k in range(n):
        if data_end[k] > high:
            high = data_end[k]
        if resend[k]:
            continue
        now = t[data[k]]
        r = rtt
        j = _search(rx_time, now, True) - 1
        if j >= 0:
            r = rx_rtt[j]
        if not (r == r and r > 0):
            continue
        w = _search(rw_t, now - r, True) - 1  # the receiver's last word the sender had heard
        if w < 0 or rw_b[w] != rw_b[w]:
            continue
        out_t[m] = now
        out_b[m] = max(high - acked[w], 0)
        edge[m] = out_b[m] >= rw_b[w] - room
        m += 1
    return out_t[:m], out_b[:m], edge[:m]


@njit(cache=True)
def _arrival_rate(data, resend, t, ln):
    """The rate new data arrives at back to back: the median, over consecutive new segments, of a
    segment's bytes over the time since the one before. Next to the receiver, behind a bottleneck,
    the bottleneck's rate (a coalesced segment arrives as late as its parts would have); NaN
    with fewer than 8 such pairs."""
    rates = np.empty(data.size)
    m = 0
    prev = -1.0
    for k in range(data.size):
        if resend[k]:
            continue
        now = t[data[k]]
        if prev >= 0 and now > prev:
            rates[m] = 8.0 * ln[data[k]] / (now - prev)
            m += 1
        prev = now
    return _median(rates[:m]) if m >= 8 else math.nan


@njit(cache=True)
def _self_woken(acks, data, resend, t, goodput, mss, transfer, lag):
    """The share of the transfer the sender spent in pauses it ended by itself, not within
    ``ACK_WAKE_S`` of an ACK (a pause: no new data for ``PAUSE_SEGMENTS`` segments' time at the
    goodput, and ``MIN_PAUSE_S`` at least). A sender held by a window (its buffer, its congestion
    window, the receiver's) resumes when an ACK opens it; an application writing at its own pace
    resumes when it writes, and such pauses fill most of its transfer. (TCP's own pacing ends
    pauses by a timer too, in a phase: bbr's drain after startup spaced segments 5 ms apart for
    50 ms of a 1.7 s transfer at 10 Mbit/s; a resend within the pause is loss recovery's timer.)
    Only next to the sender does the ACK arrive just before the data it lets out: ``lag`` (the
    handshake's say of how far the capture sat from it) widens the wait that counts; NaN with
    fewer than ``MIN_PAUSES`` pauses."""
    if data.size < 2 or acks.size == 0 or not (goodput == goodput and goodput > 0 and transfer > 0):
        return math.nan
    ack_t = t[acks]
    pause = max(PAUSE_SEGMENTS * 8.0 * (mss if mss > 0 else 1460) / goodput, MIN_PAUSE_S)
    pauses = 0
    woken = 0.0
    prev = -1.0
    recovering = False  # a resend within the pause: the loss's timers, not the application, woke it
    for k in range(data.size):
        if resend[k]:
            recovering = True
            continue
        now = t[data[k]]
        if prev >= 0 and now - prev > pause:
            pauses += 1
            j = _search(ack_t, now, True) - 1
            answered = max(ACK_WAKE_S + 2 * lag, PAUSE_WAKE_SHARE * (now - prev))
            if not recovering and (j < 0 or now - ack_t[j] > answered):
                woken += now - prev
        prev = now
        recovering = False
    return woken / transfer if pauses >= MIN_PAUSES else math.nan


@njit(cache=True)
def _round_states(edges, bin_s, sent, delivered, in_t, at_edge, gap_start, gap_end, gap_reason,
                  retx_t, resent_t, dup_t, rec_start, rec_end, zw_start, zw_end):
    """The limit each time bin (about one round trip) of the transfer shows, as a state code;
    each rule overrides the ones before it."""
    nb = sent.size
    start = edges[:nb].copy()
    end = start + bin_s
    state = np.zeros(nb, np.int64)
    for k in range(nb):
        if sent[k] > 0 or delivered[k] > 0:
            state[k] = S_SENDER
    # Bins where bytes in flight reach the receiver's advertised window (_at_window, _receiver_flight).
    for k in range(in_t.size):
        if at_edge[k]:
            b = _search(start, in_t[k], True) - 1
            if 0 <= b < nb:
                state[b] = S_RWND
    half = 0.5 * bin_s
    for reason, code in ((R_RECEIVER_WINDOW, S_RWND), (R_ACK_WAIT, S_SENDER), (R_APPLICATION, S_APP),
                         (R_PEER_WAIT, S_APP), (R_NAGLE, S_NAGLE)):
        pick = gap_reason == reason
        if pick.any():
            shared = np.zeros(nb)
            _overlap(start, end, gap_start[pick], gap_end[pick], shared)
            for k in range(nb):
                if shared[k] >= half:
                    state[k] = code
    timeout = gap_reason == R_TIMEOUT
    hit = np.zeros(nb, np.bool_)
    for times in (retx_t, resent_t, dup_t, gap_start[timeout]):
        for k in range(times.size):
            b = _search(start, times[k], True) - 1
            if 0 <= b < nb:
                hit[b] = True
    # Recovery, and the round trip after it, sent with the window just cut.
    recovering = np.zeros(nb)
    _overlap(start, end, rec_start, rec_end + bin_s, recovering)
    more = np.zeros(nb)
    _overlap(start, end, gap_start[timeout], gap_end[timeout], more)
    closed = np.zeros(nb)
    _overlap(start, end, zw_start, zw_end, closed)
    for k in range(nb):
        if hit[k] or recovering[k] + more[k] >= half:
            state[k] = S_LOSS
        if closed[k] > 0:
            state[k] = S_ZERO
    return state


# ---------------------------------------------------------------- entry points


@njit(cache=True)
def _kept(idx, copies):
    """A flow's packets less its duplicate frames (every number is computed as if they were
    not in the file), and how many there were."""
    keep = ~copies[idx]
    return idx[keep], idx.size - keep.sum()


@njit(cache=True)
def all_flows(order, first, last, copies, rel_time, dirn, seq, ack, length, tcp_flags, expert, win, win_raw, ts_val,
              ts_ecr, time_ns, ack_rtt, bif, truncated, sack_count, bytes_c2s, bytes_s2c, mss_client, mss_server,
              out_i, out_f, duplicates):
    """Every flow k: its packets are ``order[first[k]:last[k]]`` (``copies`` marks duplicate
    frames); its results go to row k of ``out_i``, ``out_f`` and ``duplicates``, and its series
    are dropped."""
    for k in range(first.size):
        idx, duplicates[k] = _kept(order[first[k]:last[k]], copies)
        _flow(idx, rel_time, dirn, seq, ack, length, tcp_flags, expert, win, win_raw, ts_val, ts_ecr, time_ns, ack_rtt,
              bif, truncated, sack_count, bytes_c2s[k], bytes_s2c[k], mss_client[k], mss_server[k], math.nan,
              out_i[k], out_f[k])


@njit(cache=True)
def flow_series(idx, copies, rel_time, dirn, seq, ack, length, tcp_flags, expert, win, win_raw, ts_val, ts_ecr,
                time_ns, ack_rtt, bif, truncated, sack_count, bytes_c2s, bytes_s2c, mss_client, mss_server,
                bin_request, out_i, out_f):
    """One flow (its packets ``idx``, ``copies`` marking duplicate frames): its results into
    ``out_i``/``out_f``, and (the packets kept, how many copies, its series)."""
    kept, duplicates = _kept(idx, copies)
    return kept, duplicates, _flow(kept, rel_time, dirn, seq, ack, length, tcp_flags, expert, win, win_raw, ts_val,
                                   ts_ecr, time_ns, ack_rtt, bif, truncated, sack_count, bytes_c2s, bytes_s2c,
                                   mss_client, mss_server, bin_request, out_i, out_f)
