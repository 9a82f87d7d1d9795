"""Decoding frames into TCP columns, in one compiled pass over the frame index.

For every frame: link layer, IPv4/IPv6, TCP header and options; then the connection it
belongs to, numbered like Wireshark's ``tcp.stream``; then sequence numbers relative to
each direction's initial sequence number and the window scaled as Wireshark scales it.

Wireshark decides several of these things with state it keeps per connection (the base
sequence numbers, the window-scale state, a new stream for a SYN that reuses a
connection's ports). They are replicated here in the same order Wireshark applies them
(epan/dissectors/packet-tcp.c, ``dissect_tcp``), because the order decides the answer
in corner cases such as a SYN-ACK seen before its SYN or options cut by the snaplen.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from ._pcapio import rd16, rd32

M32 = 0xFFFFFFFF
TWO32 = 1 << 32
TWO31 = 1 << 31

TH_FIN, TH_SYN, TH_RST, TH_PUSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# Link types (LINKTYPE_* as pcap and pcapng files store them).
LT_NULL, LT_ETHERNET, LT_RAW, LT_RAW_BSD12, LT_RAW_BSD14 = 0, 1, 101, 12, 14
LT_LOOP, LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2 = 108, 113, 228, 229, 276
SUPPORTED_LINK_TYPES = frozenset(
    {LT_NULL, LT_ETHERNET, LT_RAW, LT_RAW_BSD12, LT_RAW_BSD14, LT_LOOP, LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2})

# Why a frame was left out (index into the ``skipped`` counters).
SKIP_NOT_IP, SKIP_NOT_TCP, SKIP_FRAGMENT, SKIP_SHORT, SKIP_BAD_TCP, SKIP_LINK = range(6)
N_SKIP = 6

# Per-connection state, one row per flow (stream). "+dir" fields take two columns.
F_INIT_SIDE = 0  # which canonical side (0: A, 1: B) opened the connection: dir 0
F_BASE = 1  # +dir: base sequence number (ISN, or first seq - 1 without a SYN)
F_BSET = 3  # +dir
F_WS = 5  # +dir: -1 unknown, -2 no scaling, else the shift
F_LSEQ = 7  # +dir: last unwrapped relative seq
F_HSEQ = 9  # +dir
F_LACK = 11  # +dir: last unwrapped relative ack
F_HACK = 13  # +dir
F_FIRST = 15
F_LAST = 16
F_NPKT = 17
F_BYTES = 18  # +dir
F_SYN_SEEN = 20
F_SYNACK_SEEN = 21
F_SYN_WS = 22
F_SYNACK_WS = 23
F_SYN_MSS = 24
F_SYNACK_MSS = 25
F_REUSED = 26
F_FAMILY = 27
NF = 28

# Flow key: canonical order puts the smaller (address, port) first as side A.
K_W0, K_AHI, K_ALO, K_BHI, K_BLO = 0, 1, 2, 3, 4
NK = 5

# Rows of the output blocks.
I64_FRAME, I64_TIME_NS, I64_SEQ, I64_ACK = 0, 1, 2, 3
I64_SACK_LE = 4  # 4 rows
I64_SACK_RE = 8  # 4 rows
I64_TSVAL, I64_TSECR = 12, 13
N_I64 = 14
I32_FLOW, I32_LEN, I32_WIN, I32_IP_ID = 0, 1, 2, 3
N_I32 = 4
U32_SEQ_RAW, U32_ACK_RAW = 0, 1
N_U32 = 2
U16_FLAGS, U16_WIN_RAW, U16_MSS = 0, 1, 2
N_U16 = 3
# int16 so a raw window-scale shift (up to 255) fits; ``dir`` is narrowed to int8 after.
I16_DIR, I16_WSCALE, I16_SACK_COUNT = 0, 1, 2
N_I16 = 3


@njit(cache=True, inline="always")
def _rd64be(buf, i):
    return (rd32(buf, i, False) << 32) | rd32(buf, i + 4, False)


@njit(cache=True, inline="always")
def _s32(x):
    """x modulo 2^32 as a signed 32-bit distance."""
    x &= M32
    return x - TWO32 if x >= TWO31 else x


@njit(cache=True, inline="always")
def _unwrap(prev, rel32):
    """The 64-bit value nearest ``prev`` that equals ``rel32`` modulo 2^32."""
    return prev + _s32(rel32 - prev)


#: The hash stays within 40 bits, so none of its products can overflow 64 bits.
_HASH_MASK = (1 << 40) - 1
_HASH_PRIME = 1000003


@njit(cache=True, inline="always")
def _mix(h, word):
    h = ((h * _HASH_PRIME) ^ (word & M32)) & _HASH_MASK
    return ((h * _HASH_PRIME) ^ ((word >> 32) & M32)) & _HASH_MASK


@njit(cache=True, inline="always")
def _hash(w0, w1, w2, w3, w4):
    # No multiplication here may overflow: numba marks signed products "no signed wrap",
    # and LLVM then optimised an overflowing hash differently inside a loop than in a lone
    # call, so a key hashed while growing the table was not found by the decode loop (the
    # 513th open connection split every flow). FNV-style, each 32-bit half in turn.
    h = _mix(_mix(_mix(_mix(_mix(np.int64(0), w0), w1), w2), w3), w4)
    return h ^ (h >> 21)


@njit(cache=True)
def _find_slot(keys, vals, w0, w1, w2, w3, w4):
    # One key type for every caller: decode() passes words of several integer types, the
    # table's growth the int64 it stored; the hash and the comparison must see the same.
    w0, w1, w2, w3, w4 = np.int64(w0), np.int64(w1), np.int64(w2), np.int64(w3), np.int64(w4)
    mask = vals.size - 1
    s = _hash(w0, w1, w2, w3, w4) & mask
    while vals[s] >= 0:
        if (keys[s, 0] == w0 and keys[s, 1] == w1 and keys[s, 2] == w2
                and keys[s, 3] == w3 and keys[s, 4] == w4):
            return s
        s = (s + 1) & mask
    return s


@njit(cache=True)
def _grow_table(keys, vals):
    nkeys = np.empty((keys.shape[0] * 2, NK), np.int64)
    nvals = np.full(vals.size * 2, -1, np.int64)
    for s in range(vals.size):
        if vals[s] >= 0:
            t = _find_slot(nkeys, nvals, keys[s, 0], keys[s, 1], keys[s, 2], keys[s, 3], keys[s, 4])
            for k in range(NK):
                nkeys[t, k] = keys[s, k]
            nvals[t] = vals[s]
    return nkeys, nvals


@njit(cache=True)
def _link_to_ip(buf, p, end, lt):
    """Offset of the IP header and its version (4/6), or version 0 when not IP."""
    et = np.int64(-1)
    if lt == LT_ETHERNET:
        if p + 14 > end:
            return p, -1
        et = rd16(buf, p + 12, False)
        p += 14
    elif lt == LT_SLL:
        if p + 16 > end:
            return p, -1
        et = rd16(buf, p + 14, False)
        p += 16
    elif lt == LT_SLL2:
        if p + 20 > end:
            return p, -1
        et = rd16(buf, p, False)
        p += 20
    elif lt == LT_RAW or lt == LT_RAW_BSD12 or lt == LT_RAW_BSD14:
        if p >= end:
            return p, -1
        v = np.int64(buf[p]) >> 4
        return p, (v if v == 4 or v == 6 else 0)
    elif lt == LT_IPV4:
        return p, 4
    elif lt == LT_IPV6:
        return p, 6
    elif lt == LT_NULL or lt == LT_LOOP:
        if p + 4 > end:
            return p, -1
        if lt == LT_LOOP:
            fam = rd32(buf, p, False)
        else:
            # Host byte order of the capturing machine: a family fits in 16 bits.
            fam = rd32(buf, p, True)
            if fam > 0xFFFF:
                fam = rd32(buf, p, False)
        p += 4
        if fam == 2:
            return p, 4
        if fam == 10 or fam == 24 or fam == 28 or fam == 30:
            return p, 6
        return p, 0
    else:
        return p, -2
    # 802.1Q, 802.1ad (QinQ) and the old 0x9100 tags, any depth.
    while (et == 0x8100 or et == 0x88A8 or et == 0x9100) and p + 4 <= end:
        et = rd16(buf, p + 2, False)
        p += 4
    if et == 0x0800:
        return p, 4
    if et == 0x86DD:
        return p, 6
    return p, 0


@njit(cache=True)
def decode(buf, rec_off, rec_cap, rec_len, rec_ns, rec_if, if_link,
           i64, i32, u32, u16, i16, trunc, skipped,
           keys, vals, F, FK):
    """Decode every frame; write one column entry per TCP packet.

    Returns (packets, flows, keys, vals, F, FK): the hash table and the flow arrays are
    returned because they may have been reallocated to grow.
    """
    nframes = rec_off.size
    k = 0  # TCP packets written
    nflows = 0
    nused = 0  # occupied hash slots
    for i in range(nframes):
        p = rec_off[i]
        end = p + rec_cap[i]
        wire_end = p + rec_len[i]  # where the frame ended on the wire (snaplen aside)
        if rec_if.size:
            if rec_if[i] < 0:
                skipped[SKIP_NOT_IP] += 1
                continue
            lt = if_link[rec_if[i]]
        else:
            lt = if_link[0]
        p, ipver = _link_to_ip(buf, p, end, lt)
        if ipver <= 0:
            if ipver == -2:
                skipped[SKIP_LINK] += 1
            elif ipver == -1:
                skipped[SKIP_SHORT] += 1
            else:
                skipped[SKIP_NOT_IP] += 1
            continue

        # ---- IP ----
        if ipver == 4:
            if p + 20 > end:
                skipped[SKIP_SHORT] += 1
                continue
            if (buf[p] >> 4) != 4:
                skipped[SKIP_NOT_IP] += 1
                continue
            ihl = np.int64(buf[p] & 15) * 4
            if ihl < 20:
                skipped[SKIP_NOT_IP] += 1
                continue
            if buf[p + 9] != 6:
                skipped[SKIP_NOT_TCP] += 1
                continue
            if rd16(buf, p + 6, False) & 0x1FFF:
                skipped[SKIP_FRAGMENT] += 1
                continue
            tot = rd16(buf, p + 2, False)
            if tot == 0:
                # Zero total length: a TSO/GSO packet taken before segmentation, as
                # Wireshark assumes; the frame's length on the wire gives its size.
                tot = wire_end - p
            if tot < ihl:
                skipped[SKIP_NOT_IP] += 1
                continue
            # A length past the end of the frame is bogus; Wireshark keeps the frame's.
            tot = min(tot, wire_end - p)
            family = 4
            ip_id = rd16(buf, p + 4, False)
            s_hi = np.int64(0)
            s_lo = rd32(buf, p + 12, False)
            d_hi = np.int64(0)
            d_lo = rd32(buf, p + 16, False)
            t = p + ihl
            plen = tot - ihl
        else:
            if p + 40 > end:
                skipped[SKIP_SHORT] += 1
                continue
            if (buf[p] >> 4) != 6:
                skipped[SKIP_NOT_IP] += 1
                continue
            plen = rd16(buf, p + 4, False)
            nh = np.int64(buf[p + 6])
            family = 6
            ip_id = np.int64(-1)  # IPv6 has no identification outside a fragment header
            s_hi = _rd64be(buf, p + 8)
            s_lo = _rd64be(buf, p + 16)
            d_hi = _rd64be(buf, p + 24)
            d_lo = _rd64be(buf, p + 32)
            t = p + 40
            if plen == 0 and nh == 0:
                plen = wire_end - t  # a jumbogram (its real length is in an option)
            plen = min(plen, wire_end - t)
            verdict = 0
            hl = np.int64(0)
            for _ in range(16):
                if nh == 6:
                    break
                if nh == 0 or nh == 43 or nh == 60 or nh == 135 or nh == 139 or nh == 140:
                    if t + 2 > end:
                        verdict = SKIP_SHORT + 1
                        break
                    hl = (np.int64(buf[t + 1]) + 1) * 8
                elif nh == 44:
                    if t + 8 > end:
                        verdict = SKIP_SHORT + 1
                        break
                    if rd16(buf, t + 2, False) & 0xFFF8:
                        verdict = SKIP_FRAGMENT + 1
                        break
                    hl = np.int64(8)
                elif nh == 51:
                    if t + 2 > end:
                        verdict = SKIP_SHORT + 1
                        break
                    hl = (np.int64(buf[t + 1]) + 2) * 4
                else:
                    verdict = SKIP_NOT_TCP + 1
                    break
                nh = np.int64(buf[t])
                t += hl
                plen -= hl
            if verdict == 0 and nh != 6:
                verdict = SKIP_NOT_TCP + 1
            if verdict:
                skipped[verdict - 1] += 1
                continue

        # ---- TCP fixed header ----
        if t + 20 > end:
            skipped[SKIP_SHORT] += 1
            continue
        hlen = (np.int64(buf[t + 12]) >> 4) * 4
        seglen = plen - hlen
        if hlen < 20 or seglen < 0:
            skipped[SKIP_BAD_TCP] += 1
            continue
        sport = rd16(buf, t, False)
        dport = rd16(buf, t + 2, False)
        seq = rd32(buf, t + 4, False)
        ack = rd32(buf, t + 8, False)
        flags = rd16(buf, t + 12, False) & 0x0FFF
        win = rd16(buf, t + 14, False)
        syn = (flags & TH_SYN) != 0
        has_ack = (flags & TH_ACK) != 0

        # ---- options (may be cut by the snaplen) ----
        mss = np.int64(0)
        ws = np.int64(-1)
        tsval = np.int64(-1)
        tsecr = np.int64(-1)
        nsack = 0
        sack_partial = np.int64(-1)
        sle0 = sle1 = sle2 = sle3 = np.int64(0)
        sre0 = sre1 = sre2 = sre3 = np.int64(0)
        cut = False
        o = t + 20
        oend = t + hlen
        while o < oend:
            if o >= end:
                cut = True
                break
            kind = buf[o]
            if kind == 0:
                break
            if kind == 1:
                o += 1
                continue
            if o + 1 >= oend:
                break  # length byte past the header: malformed
            if o + 1 >= end:
                cut = True
                break
            olen = np.int64(buf[o + 1])
            if olen < 2 or o + olen > oend:
                break  # malformed: Wireshark stops reading options here
            if kind == 5:
                q = o + 2
                rem = olen - 2
                while rem >= 8:
                    if q + 8 > end:
                        if q + 4 <= end and nsack < 4:
                            # Left edge captured, right edge cut off: keep what was seen.
                            sack_partial = rd32(buf, q, False)
                        break
                    le_ = rd32(buf, q, False)
                    re_ = rd32(buf, q + 4, False)
                    if nsack == 0:
                        sle0 = le_
                        sre0 = re_
                    elif nsack == 1:
                        sle1 = le_
                        sre1 = re_
                    elif nsack == 2:
                        sle2 = le_
                        sre2 = re_
                    elif nsack == 3:
                        sle3 = le_
                        sre3 = re_
                    nsack += 1
                    q += 8
                    rem -= 8
            if o + olen > end:
                cut = True
                break
            if kind == 2 and olen == 4:
                mss = rd16(buf, o + 2, False)
            elif kind == 3 and olen == 3:
                ws = np.int64(buf[o + 2])
            elif kind == 8 and olen == 10:
                tsval = rd32(buf, o + 2, False)
                tsecr = rd32(buf, o + 6, False)
            o += olen

        # ---- connection (tcp.stream) ----
        src_first = (s_hi < d_hi or (s_hi == d_hi and (s_lo < d_lo or (s_lo == d_lo and sport <= dport))))
        if src_first:
            side = 0
            w0 = (np.int64(family) << 32) | (sport << 16) | dport
            a_hi, a_lo, b_hi, b_lo = s_hi, s_lo, d_hi, d_lo
        else:
            side = 1
            w0 = (np.int64(family) << 32) | (dport << 16) | sport
            a_hi, a_lo, b_hi, b_lo = d_hi, d_lo, s_hi, s_lo
        slot = _find_slot(keys, vals, w0, a_hi, a_lo, b_hi, b_lo)
        new_flow = vals[slot] < 0
        f = np.int64(-1)
        if not new_flow:
            f = vals[slot]
            d = 0 if side == F[f, F_INIT_SIDE] else 1
            # A SYN whose ISN differs from the one this connection started with opens a
            # new connection on the same ports (Wireshark: "TCP Port numbers reused").
            if syn and not has_ack and F[f, F_BSET + d] and seq != F[f, F_BASE + d]:
                new_flow = True
        if new_flow:
            if nflows >= F.shape[0]:
                F2 = np.empty((F.shape[0] * 2, NF), np.int64)
                F2[:nflows] = F[:nflows]
                F = F2
                FK2 = np.empty((FK.shape[0] * 2, NK + 2), np.int64)
                FK2[:nflows] = FK[:nflows]
                FK = FK2
            reused = f >= 0
            f = nflows
            nflows += 1
            F[f, :] = 0
            # The opener is the SYN's sender, the SYN-ACK's receiver, else the first sender.
            F[f, F_INIT_SIDE] = (1 - side) if (syn and has_ack) else side
            F[f, F_WS] = -1
            F[f, F_WS + 1] = -1
            F[f, F_SYN_WS] = -1
            F[f, F_SYNACK_WS] = -1
            F[f, F_FIRST] = rec_ns[i]
            F[f, F_REUSED] = 1 if reused else 0
            F[f, F_FAMILY] = family
            FK[f, 0] = a_hi
            FK[f, 1] = a_lo
            FK[f, 2] = b_hi
            FK[f, 3] = b_lo
            FK[f, 4] = (w0 >> 16) & 0xFFFF
            FK[f, 5] = w0 & 0xFFFF
            FK[f, 6] = family
            if vals[slot] < 0:
                nused += 1
                keys[slot, 0] = w0
                keys[slot, 1] = a_hi
                keys[slot, 2] = a_lo
                keys[slot, 3] = b_hi
                keys[slot, 4] = b_lo
            vals[slot] = f
            if nused * 2 > vals.size:
                keys, vals = _grow_table(keys, vals)
        d = 0 if side == F[f, F_INIT_SIDE] else 1
        r = 1 - d

        # A SYN-ACK with another ISN than before: Wireshark rebases that direction.
        if syn and has_ack and F[f, F_BSET + d] and seq != F[f, F_BASE + d]:
            F[f, F_BASE + d] = seq
        if not F[f, F_BSET + d]:
            F[f, F_BASE + d] = seq if syn else (seq - 1) & M32
            F[f, F_BSET + d] = 1
        if not F[f, F_BSET + r] and has_ack:
            F[f, F_BASE + r] = (ack - 1) & M32
            F[f, F_BSET + r] = 1

        rel_seq = (seq - F[f, F_BASE + d]) & M32
        if F[f, F_HSEQ + d]:
            xseq = _unwrap(F[f, F_LSEQ + d], rel_seq)
        else:
            xseq = _s32(rel_seq)
            F[f, F_HSEQ + d] = 1
        F[f, F_LSEQ + d] = xseq
        if has_ack:
            rel_ack = (ack - F[f, F_BASE + r]) & M32
            if F[f, F_HACK + d]:
                xack = _unwrap(F[f, F_LACK + d], rel_ack)
            elif F[f, F_HSEQ + r]:
                xack = _unwrap(F[f, F_LSEQ + r], rel_ack)
            else:
                xack = _s32(rel_ack)
            F[f, F_HACK + d] = 1
            F[f, F_LACK + d] = xack
        else:
            # Wireshark shows the raw field when the ACK flag is off.
            xack = ack

        # Window as Wireshark shows it: SYNs never scaled; unknown scale -> -1 here.
        if syn:
            swin = win
        else:
            wsd = F[f, F_WS + d]
            if wsd >= 0:
                swin = win << wsd
            elif wsd == -2:
                swin = win
            else:
                swin = np.int64(-1)

        # SACK edges relative to the acknowledged direction, unwrapped near the ack.
        if nsack:
            if has_ack:
                ref = xack
                rref = ack
            else:
                ref = np.int64(0)
                rref = F[f, F_BASE + r]
            i64[I64_SACK_LE + 0, k] = ref + _s32(sle0 - rref)
            i64[I64_SACK_RE + 0, k] = ref + _s32(sre0 - rref)
            if nsack > 1:
                i64[I64_SACK_LE + 1, k] = ref + _s32(sle1 - rref)
                i64[I64_SACK_RE + 1, k] = ref + _s32(sre1 - rref)
            if nsack > 2:
                i64[I64_SACK_LE + 2, k] = ref + _s32(sle2 - rref)
                i64[I64_SACK_RE + 2, k] = ref + _s32(sre2 - rref)
            if nsack > 3:
                i64[I64_SACK_LE + 3, k] = ref + _s32(sle3 - rref)
                i64[I64_SACK_RE + 3, k] = ref + _s32(sre3 - rref)
        for j in range(min(nsack, 4), 4):
            i64[I64_SACK_LE + j, k] = -1
            i64[I64_SACK_RE + j, k] = -1
        if sack_partial >= 0:
            if has_ack:
                i64[I64_SACK_LE + nsack, k] = xack + _s32(sack_partial - ack)
            else:
                i64[I64_SACK_LE + nsack, k] = _s32(sack_partial - F[f, F_BASE + r])

        # Window-scale state after this packet's options (Wireshark applies the option,
        # then checks the handshake; an exception on cut options skips the check).
        if ws >= 0:
            F[f, F_WS + d] = min(ws, 14)
        if syn and not cut:
            if F[f, F_WS + d] == -1:
                F[f, F_WS + d] = -2
                F[f, F_WS + r] = -2
            elif has_ack and F[f, F_WS + r] == -2:
                F[f, F_WS + d] = -2

        if syn and not has_ack:
            F[f, F_SYN_SEEN] = 1
            F[f, F_SYN_WS] = ws
            F[f, F_SYN_MSS] = mss
        elif syn:
            F[f, F_SYNACK_SEEN] = 1
            F[f, F_SYNACK_WS] = ws
            F[f, F_SYNACK_MSS] = mss
        F[f, F_LAST] = rec_ns[i]
        F[f, F_NPKT] += 1
        F[f, F_BYTES + d] += seglen

        i64[I64_FRAME, k] = i + 1
        i64[I64_TIME_NS, k] = rec_ns[i]
        i64[I64_SEQ, k] = xseq
        i64[I64_ACK, k] = xack
        i64[I64_TSVAL, k] = tsval
        i64[I64_TSECR, k] = tsecr
        i32[I32_FLOW, k] = f
        i32[I32_LEN, k] = seglen
        i32[I32_WIN, k] = swin
        i32[I32_IP_ID, k] = ip_id
        u32[U32_SEQ_RAW, k] = seq
        u32[U32_ACK_RAW, k] = ack
        u16[U16_FLAGS, k] = flags
        u16[U16_WIN_RAW, k] = win
        u16[U16_MSS, k] = mss
        i16[I16_DIR, k] = d
        i16[I16_WSCALE, k] = ws
        i16[I16_SACK_COUNT, k] = nsack
        trunc[k] = cut
        k += 1
    return k, nflows, keys, vals, F, FK
