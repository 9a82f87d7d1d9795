"""Wireshark 4.0's TCP sequence analysis, compiled.

A port of ``tcp_analyze_sequence_number`` (epan/dissectors/packet-tcp.c) and of the parts
of ``dissect_tcp`` that feed it, run per packet in capture order. Every comparison works
on raw 32-bit sequence numbers with Wireshark's signed-distance macros, and every piece of
state starts at the value Wireshark gives it (including the zero values Wireshark uses as
"not seen yet"), so the flags agree with Wireshark's in odd cases too.

One thing is organised differently, for speed: Wireshark keeps each direction's un-ACKed
segments in a linked list and walks all of it on every packet. Here each direction keeps
them in an array sorted by the sequence number that ends them. The ACK rules only ever
remove the segments whose end lies in the 2^31 sequence numbers up to and including the
ACK, which is one contiguous run of that array, so a binary search finds it; the oldest of
the segments ending exactly at the ACK (the one Wireshark's walk meets last and takes the
RTT from) is the first of its run because equal ends keep arrival order.
"""

from __future__ import annotations

import numpy as np

from ._decode import M32, TH_ACK, TH_FIN, TH_RST, TH_SYN, TWO31, TWO32, _s32
from ._jit import njit

# Wireshark's TCP_A_* bits (packet-tcp.c), so a mask means the same thing in both.
A_RETRANSMISSION = 0x0001
A_LOST_PACKET = 0x0002
A_ACK_LOST_PACKET = 0x0004
A_KEEP_ALIVE = 0x0008
A_DUPLICATE_ACK = 0x0010
A_ZERO_WINDOW = 0x0020
A_ZERO_WINDOW_PROBE = 0x0040
A_ZERO_WINDOW_PROBE_ACK = 0x0080
A_KEEP_ALIVE_ACK = 0x0100
A_OUT_OF_ORDER = 0x0200
A_FAST_RETRANSMISSION = 0x0400
A_WINDOW_UPDATE = 0x0800
A_WINDOW_FULL = 0x1000
A_REUSED_PORTS = 0x2000
A_SPURIOUS_RETRANSMISSION = 0x4000

TCP_MAX_UNACKED_SEGMENTS = 10000  # Wireshark stops listing segments beyond this
MAX_SACK_FOR_BIF = 3  # Wireshark stores blocks 1..3 of MAX_TCP_SACK_RANGES=4 for BiF
FAST_RETRANS_NS = 20_000_000
OOO_DEFAULT_NS = 3_000_000
BIF_LIMIT = 2_000_000_000
SFR = TH_SYN | TH_FIN | TH_RST

# Per-direction state (row = 2 * flow + dir).
S_NEXTSEQ = 0
S_NEXTSEQTIME = 1
S_MAXSEQ = 2  # "max seq to be acked"
S_LASTACK = 3
S_LASTACKTIME = 4
S_LASTNONDUP = 5
S_DUPNUM = 6
S_WINDOW = 7  # last raw window; Wireshark starts it at G_MAXUINT32
S_WS = 8  # -1 unknown, -2 not used, else the shift
S_FIRSTACK = 9  # Wireshark's is_first_ack
S_LASTFLAGS = 10
S_VALIDBIF = 11
S_BASE = 12
S_BSET = 13
S_NSACK = 14
S_DELIVERED = 15
S_REF = 16  # 64-bit unwrapping reference for this direction's sequence numbers
S_HASREF = 17
S_BLOCK = 18  # start of this direction's block in the segment pool
S_LO = 19  # live segments are pool[block + lo : block + hi]
S_HI = 20
S_CAP = 21
S_MAXLEN = 22  # longest segment listed so far: bounds the scans below
NS = 23

# Per-flow state.
FS_SEEN = 0
FS_MRU_SYN = 1
FS_FIRST_RTT = 2
NFS = 3

# Segment pool columns.
P_SEQ, P_NEXT, P_TS, P_FRAME = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _gt(x, y):
    return _s32(y - x) < 0


@njit(cache=True, inline="always")
def _lt(x, y):
    return _s32(x - y) < 0


@njit(cache=True, inline="always")
def _le(x, y):
    return _s32(x - y) <= 0


@njit(cache=True)
def _upper_bound(pool, a, b, key):
    """First index in [a, b) whose segment ends after ``key``."""
    while a < b:
        m = (a + b) >> 1
        if pool[m, P_NEXT] <= key:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True)
def _lower_bound(pool, a, b, key):
    while a < b:
        m = (a + b) >> 1
        if pool[m, P_NEXT] < key:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True)
def _insert(S, pool, used, fd, seq_u, next_u, ts, frame):
    """List a segment; returns the pool and its used size (the pool may have grown)."""
    cap = S[fd, S_CAP]
    lo = S[fd, S_LO]
    hi = S[fd, S_HI]
    blk = S[fd, S_BLOCK]
    if hi == cap:
        if lo > 0 and hi - lo <= cap // 2:
            pool[blk:blk + hi - lo] = pool[blk + lo:blk + hi].copy()
        else:
            # Grow by doubling (amortised O(1)); the old block is abandoned.
            ncap = 16 if cap == 0 else cap * 2
            if used + ncap > pool.shape[0]:
                npool = np.empty((max(pool.shape[0] * 2, used + ncap), 4), np.int64)
                npool[:used] = pool[:used]
                pool = npool
            pool[used:used + hi - lo] = pool[blk + lo:blk + hi]
            blk = used
            used += ncap
            cap = ncap
            S[fd, S_BLOCK] = blk
            S[fd, S_CAP] = cap
        hi -= lo
        lo = 0
    a = blk + lo
    b = blk + hi
    if b > a and pool[b - 1, P_NEXT] > next_u:
        # Out of order (a retransmission, mostly): open a gap on the shorter side.
        pos = _upper_bound(pool, a, b, next_u)
        if lo > 0 and pos - a < b - pos:
            for j in range(a - 1, pos - 1):
                pool[j, :] = pool[j + 1, :]
            pos -= 1
            lo -= 1
        else:
            for j in range(b, pos, -1):
                pool[j, :] = pool[j - 1, :]
            hi += 1
    else:
        pos = b
        hi += 1
    pool[pos, P_SEQ] = seq_u
    pool[pos, P_NEXT] = next_u
    pool[pos, P_TS] = ts
    pool[pos, P_FRAME] = frame
    S[fd, S_LO] = lo
    S[fd, S_HI] = hi
    if next_u - seq_u > S[fd, S_MAXLEN]:
        S[fd, S_MAXLEN] = next_u - seq_u
    return pool, used


@njit(cache=True)
def _ack_segments(S, pool, rd, ack):
    """Apply an ACK to the other direction's list; returns (acked frame, its time) or (0, 0).

    Wireshark: a segment ending exactly at the ACK is acknowledged (the oldest such one
    gives the RTT), one the ACK falls inside is trimmed, one ending in the 2^31 sequence
    numbers before the ACK is dropped; the rest stay.
    """
    blk = S[rd, S_BLOCK]
    a = blk + S[rd, S_LO]
    b = blk + S[rd, S_HI]
    if b == a:
        return np.int64(0), np.int64(0)
    ref = S[rd, S_REF]
    ack_u = ref + _s32(ack - ref)
    if not (pool[a, P_NEXT] > ack_u - TWO32 and pool[b - 1, P_NEXT] < ack_u + TWO31):
        return _ack_segments_slow(S, pool, rd, ack, a, b)
    # Now every segment's distance to the ACK maps to one 32-bit distance, and the
    # dropped ones are exactly those ending in [ack - 2^31, ack]: one run of the array.
    i0 = _lower_bound(pool, a, b, ack_u - TWO31)
    i1 = _upper_bound(pool, i0, b, ack_u)
    frame = np.int64(0)
    ts = np.int64(0)
    if i1 > i0:
        if pool[i1 - 1, P_NEXT] == ack_u:
            j = _lower_bound(pool, i0, i1, ack_u)
            frame = pool[j, P_FRAME]
            ts = pool[j, P_TS]
        gone = i1 - i0
        if i0 == a:
            S[rd, S_LO] += gone
            i0 = i1
        else:
            pool[i0:b - gone] = pool[i1:b].copy()
            S[rd, S_HI] -= gone
            b -= gone
    # Segments the ACK falls inside start at i0 now; only those within the longest
    # segment's length of the ACK can contain it.
    limit = ack_u + S[rd, S_MAXLEN]
    j = i0
    while j < b and pool[j, P_NEXT] <= limit:
        if pool[j, P_SEQ] < ack_u and ack_u - pool[j, P_SEQ] <= TWO31:
            pool[j, P_SEQ] = ack_u
        j += 1
    return frame, ts


@njit(cache=True)
def _ack_segments_slow(S, pool, rd, ack, a, b):
    """Wireshark's walk, for lists spread over more than 2^31 sequence numbers (they
    happen only in broken or forged traffic, where the fast path's shortcut fails)."""
    frame = np.int64(0)
    ts = np.int64(0)
    w = a
    for j in range(a, b):
        nx = pool[j, P_NEXT] & M32
        sq = pool[j, P_SEQ] & M32
        keep = False
        if ack == nx:
            if frame == 0 or pool[j, P_FRAME] < frame:
                frame = pool[j, P_FRAME]
                ts = pool[j, P_TS]
        elif _gt(ack, sq) and _le(ack, nx):
            pool[j, P_SEQ] += _s32(ack - sq)
            keep = True
        elif _gt(nx, ack):
            keep = True
        if keep:
            if w != j:
                pool[w, :] = pool[j, :]
            w += 1
    S[rd, S_HI] -= b - w
    return frame, ts


@njit(cache=True)
def _span(S, pool, fd, base):
    """Wireshark's bytes-in-flight span: highest end minus lowest start, both taken
    relative to the direction's base sequence number as unsigned 32-bit values."""
    blk = S[fd, S_BLOCK]
    a = blk + S[fd, S_LO]
    b = blk + S[fd, S_HI]
    last_u = pool[b - 1, P_NEXT]
    first_u = pool[a, P_SEQ]
    limit = first_u + S[fd, S_MAXLEN]
    j = a + 1
    while j < b and pool[j, P_NEXT] < limit:
        if pool[j, P_SEQ] < first_u:
            first_u = pool[j, P_SEQ]
            limit = first_u + S[fd, S_MAXLEN]
        j += 1
    rel_first = (first_u - base) & M32
    rel_last = rel_first + (last_u - first_u)
    if rel_last < TWO32:
        return (rel_last - rel_first) & M32
    # The list straddles base + 2^32 (more than 4 GiB sent): do it Wireshark's way.
    lo = np.int64(M32)
    hi = np.int64(0)
    for j in range(a, b):
        s = (pool[j, P_SEQ] - base) & M32
        e = (pool[j, P_NEXT] - base) & M32
        if s < lo:
            lo = s
        if e > hi:
            hi = e
    return (hi - lo) & M32


@njit(cache=True)
def analyze_kernel(frame, tns, flow, dirn, seq_raw, ack_raw, seglen, flags, win_raw,
                   wscale, sack_count, sle1, sre1, sle2, sre2, sle3, sre3, trunc,
                   flow_reused, nflows,
                   eflags, dup_num, dup_frame, acks_frame, rtt_ns, bif):
    n = frame.size
    S = np.zeros((2 * nflows, NS), np.int64)
    for x in range(2 * nflows):
        S[x, S_WINDOW] = M32
        S[x, S_WS] = -1
        S[x, S_VALIDBIF] = 1
    FS = np.zeros((nflows, NFS), np.int64)
    pool = np.empty((1 << 14, 4), np.int64)  # grows by doubling in _insert
    used = np.int64(0)

    for i in range(n):
        f = np.int64(flow[i])
        d = np.int64(dirn[i])
        fd = 2 * f + d
        rd = 2 * f + 1 - d
        seq = np.int64(seq_raw[i])
        ack = np.int64(ack_raw[i])
        L = np.int64(seglen[i])
        fl = np.int64(flags[i])
        win = np.int64(win_raw[i])
        now = tns[i]
        syn = (fl & TH_SYN) != 0
        has_ack = (fl & TH_ACK) != 0
        ta = np.int64(0)

        # ---- dissect_tcp, before the analysis ----
        if FS[f, FS_SEEN] == 0:
            FS[f, FS_SEEN] = 1
            if flow_reused[f]:
                ta |= A_REUSED_PORTS
        if syn and not has_ack:
            # Same ISN as before (another ISN opened a new flow): a retransmitted SYN.
            # Wireshark winds nextseq back so the flow is not thrown off by an RST that
            # answered the first SYN.
            if S[fd, S_BSET] and seq == S[fd, S_BASE]:
                S[fd, S_NEXTSEQ] = S[fd, S_MAXSEQ]
        elif syn:
            if S[fd, S_BSET] and seq != S[fd, S_BASE]:
                S[fd, S_BASE] = seq
                ta |= A_REUSED_PORTS
        S[fd, S_NSACK] = 0
        if not S[fd, S_BSET]:
            S[fd, S_BASE] = seq if syn else (seq - 1) & M32
            S[fd, S_BSET] = 1
        if not S[rd, S_BSET] and has_ack:
            S[rd, S_BASE] = (ack - 1) & M32
            S[rd, S_BSET] = 1
        if not S[fd, S_HASREF]:
            S[fd, S_REF] = seq
            S[fd, S_HASREF] = 1
        seq_u = S[fd, S_REF] + _s32(seq - S[fd, S_REF])
        S[fd, S_REF] = seq_u

        # ---- tcp_analyze_sequence_number ----
        if has_ack:
            S[rd, S_VALIDBIF] = 1
        nextseq = S[fd, S_NEXTSEQ]
        dnum = np.int64(0)
        dframe = np.int64(0)
        finished_fwd = False
        if L == 1 and seq == nextseq and S[rd, S_WINDOW] == 0:
            ta |= A_ZERO_WINDOW_PROBE
            finished_fwd = True
        if not finished_fwd:
            if win == 0 and (fl & SFR) == 0:
                ta |= A_ZERO_WINDOW
            if nextseq and _gt(seq, nextseq) and (fl & TH_RST) == 0:
                ta |= A_LOST_PACKET
                S[fd, S_VALIDBIF] = 0
            if L <= 1 and seq == ((nextseq - 1) & M32) and (fl & SFR) == 0:
                ta |= A_KEEP_ALIVE
            same = (L == 0 and seq == nextseq and ack == S[fd, S_LASTACK] and (fl & SFR) == 0)
            if same and win != 0 and win != S[fd, S_WINDOW]:
                ta |= A_WINDOW_UPDATE
            if L > 0 and S[rd, S_WS] != -1 and (fl & SFR) == 0:
                if S[rd, S_FIRSTACK] or S[rd, S_WS] == -2:
                    shift = np.int64(0)
                else:
                    shift = S[rd, S_WS]
                edge = (S[rd, S_LASTACK] + ((S[rd, S_WINDOW] << shift) & M32)) & M32
                if ((seq + L) & M32) == edge:
                    ta |= A_WINDOW_FULL
            if same and win != 0 and win == S[fd, S_WINDOW] and (S[rd, S_LASTFLAGS] & A_KEEP_ALIVE):
                ta |= A_KEEP_ALIVE_ACK
                finished_fwd = True
            elif same and win == 0 and S[fd, S_WINDOW] == 0 and (S[rd, S_LASTFLAGS] & A_ZERO_WINDOW_PROBE):
                ta |= A_ZERO_WINDOW_PROBE_ACK
                finished_fwd = True
            elif same and win != 0 and win == S[fd, S_WINDOW]:
                if S[fd, S_DUPNUM] == -1:
                    S[fd, S_DUPNUM] = 1
                else:
                    S[fd, S_DUPNUM] += 1
                ta |= A_DUPLICATE_ACK
                dnum = S[fd, S_DUPNUM]
                dframe = S[fd, S_LASTNONDUP]
        # finished_fwd:
        if ack != S[fd, S_LASTACK]:
            S[fd, S_LASTNONDUP] = frame[i]
            S[fd, S_DUPNUM] = 0

        if S[rd, S_MAXSEQ] and _gt(ack, S[rd, S_MAXSEQ]) and has_ack:
            if _lt(S[rd, S_MAXSEQ], S[rd, S_NEXTSEQ]):
                S[rd, S_MAXSEQ] = S[rd, S_NEXTSEQ]
                ta |= A_ACK_LOST_PACKET
            else:
                if S[rd, S_DUPNUM] == 0:
                    ta |= A_ACK_LOST_PACKET
                S[rd, S_DUPNUM] = -1

        if L > 0 or (fl & (TH_SYN | TH_FIN)):
            if not (ta & A_KEEP_ALIVE):
                not_advanced = nextseq != 0 and _lt(seq, nextseq)
                if L > 1 and ((nextseq - 1) & M32) == seq:
                    not_advanced = False
                if L > 0 and S[rd, S_LASTACK] and _le((seq + L) & M32, S[rd, S_LASTACK]):
                    ta |= A_SPURIOUS_RETRANSMISSION
                else:
                    t = now - S[rd, S_LASTACKTIME]
                    # dupacknum is unsigned in Wireshark: its -1 ("ACKed unseen") passes >= 2.
                    if (not_advanced and (S[rd, S_DUPNUM] & M32) >= 2 and S[rd, S_LASTACK] == seq
                            and 0 <= t < FAST_RETRANS_NS):
                        ta |= A_FAST_RETRANSMISSION
                    else:
                        t = now - S[fd, S_NEXTSEQTIME]
                        thres = FS[f, FS_FIRST_RTT]
                        if thres == 0:
                            thres = OOO_DEFAULT_NS
                        extra = 1 if (fl & (TH_SYN | TH_FIN)) else 0
                        if (not_advanced and np.uint64(t) < np.uint64(thres)
                                and nextseq != ((seq + L + extra) & M32)):
                            ta |= A_OUT_OF_ORDER
                        elif not_advanced:
                            ta |= A_RETRANSMISSION

        # finished_checking_retransmission_type:
        nseq = (seq + L) & M32
        if (L or (fl & (TH_SYN | TH_FIN))) and S[fd, S_HI] - S[fd, S_LO] < TCP_MAX_UNACKED_SEGMENTS:
            if fl & (TH_SYN | TH_FIN):
                nseq = (nseq + 1) & M32
            pool, used = _insert(S, pool, used, fd, seq_u, seq_u + _s32(nseq - seq), now, frame[i])
        if _gt(nseq, nextseq) or nextseq == 0:
            if not (ta & A_ZERO_WINDOW_PROBE):
                S[fd, S_NEXTSEQ] = nseq
                S[fd, S_NEXTSEQTIME] = now
        if seq == S[fd, S_MAXSEQ] or S[fd, S_MAXSEQ] == 0:
            if not (ta & A_ZERO_WINDOW_PROBE):
                S[fd, S_MAXSEQ] = S[fd, S_NEXTSEQ]
        S[fd, S_WINDOW] = win
        S[fd, S_LASTACK] = ack
        S[fd, S_LASTACKTIME] = now
        S[fd, S_LASTFLAGS] = ta

        afr, ats = _ack_segments(S, pool, rd, ack)

        b = np.int64(-1)
        if L != 0 and S[fd, S_HI] > S[fd, S_LO] and S[fd, S_VALIDBIF]:
            in_flight = _span(S, pool, fd, S[fd, S_BASE])
            if S[rd, S_NSACK] > 0:
                in_flight = (in_flight - S[rd, S_DELIVERED]) & M32
            if 0 < in_flight < BIF_LIMIT:
                if fl & (TH_SYN | TH_FIN):
                    in_flight -= 1
                if in_flight != 0:
                    b = in_flight

        # ---- dissect_tcp, after the analysis ----
        if syn:
            if not has_ack:
                FS[f, FS_MRU_SYN] = now
            S[fd, S_FIRSTACK] = 1
        if (fl & (TH_SYN | TH_ACK)) == TH_ACK:
            if FS[f, FS_MRU_SYN] != 0 and FS[f, FS_FIRST_RTT] == 0:
                FS[f, FS_FIRST_RTT] = now - FS[f, FS_MRU_SYN]
            S[fd, S_FIRSTACK] = 0
        w = np.int64(wscale[i])
        if w >= 0:
            S[fd, S_WS] = min(w, 14)
        nsk = min(np.int64(sack_count[i]), MAX_SACK_FOR_BIF)
        if nsk > 0:
            delivered = (sre1[i] - sle1[i]) & M32
            if nsk > 1:
                delivered += (sre2[i] - sle2[i]) & M32
            if nsk > 2:
                delivered += (sre3[i] - sle3[i]) & M32
            S[fd, S_NSACK] = nsk
            S[fd, S_DELIVERED] = delivered & M32
        if syn and not trunc[i]:
            if S[fd, S_WS] == -1:
                S[fd, S_WS] = -2
                S[rd, S_WS] = -2
            elif has_ack and S[rd, S_WS] == -2:
                S[fd, S_WS] = -2

        if trunc[i]:
            # Wireshark prints the analysis after the options; options cut by the snaplen
            # end the dissection first, so it shows nothing for this packet (the state
            # above still counts for the next ones).
            ta = 0
            dnum = 0
            dframe = 0
            afr = 0
            b = -1
        eflags[i] = ta
        dup_num[i] = dnum
        dup_frame[i] = dframe
        acks_frame[i] = afr
        rtt_ns[i] = (now - ats) if afr else 0
        bif[i] = b


#: Segments each direction remembers for the duplicate-frame check (tcptrace's number).
DUPLICATE_MEMORY = 8


@njit(cache=True)
def duplicate_kernel(flow, dirn, seq_raw, ack_raw, seglen, flags, ip_id, nflows):
    """True where a packet repeats one of the last DUPLICATE_MEMORY of its direction: the
    same IPv4 identification, sequence and acknowledgement numbers, length and flags. A
    sender gives every packet a new IP ID, a resend included, so only a second copy of the
    same packet matches: port mirroring that copies a frame twice, or a capture taken at
    two points of one path (tcptrace's "hardware duplicates", which match ID and sequence
    number only). Zero IDs (SYN-ACKs of many stacks) and zero sequence numbers never
    match; IPv6 (ID -1) has nothing to match on. A copy is not remembered itself."""
    n = flow.size
    out = np.zeros(n, np.bool_)
    ring = np.zeros((2 * nflows, DUPLICATE_MEMORY, 5), np.int64)
    ring_at = np.zeros(2 * nflows, np.int64)
    for i in range(n):
        ident = np.int64(ip_id[i])
        seq = np.int64(seq_raw[i])
        if ident <= 0 or seq == 0:
            continue
        ack, ln, fl = np.int64(ack_raw[i]), np.int64(seglen[i]), np.int64(flags[i])
        d = 2 * np.int64(flow[i]) + np.int64(dirn[i])
        seen = False
        for j in range(DUPLICATE_MEMORY):
            r = ring[d, j]
            if r[0] == seq and r[1] == ident and r[2] == ack and r[3] == ln and r[4] == fl:
                seen = True
                break
        if seen:
            out[i] = True
            continue
        at = ring_at[d]
        ring[d, at, 0] = seq
        ring[d, at, 1] = ident
        ring[d, at, 2] = ack
        ring[d, at, 3] = ln
        ring[d, at, 4] = fl
        ring_at[d] = (at + 1) % DUPLICATE_MEMORY
    return out
