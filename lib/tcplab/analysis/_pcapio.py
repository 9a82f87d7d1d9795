"""Walking pcap and pcapng files: where each frame's bytes start, how many were captured,
when, and on which interface.

Both walkers run twice over a memory-mapped file: once to count frames (so the per-frame
arrays can be allocated at their final size, with no growing or copying) and once to fill
them. Counting only reads record headers, so it costs little next to decoding.

The walkers never raise: they return a status so the caller can name the file and the
byte offset in a one-line error, and keep what came before a cut-off last record.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

# Walk status.
OK = 0
TRUNCATED = 1  # the file ends inside a record: a capture that was cut off
CORRUPT = 2  # a record or block header that cannot be right
UNKNOWN_INTERFACE = 3  # a pcapng packet names an interface no IDB described
TOO_MANY_INTERFACES = 4

# Wireshark refuses pcap records longer than this (WTAP_MAX_PACKET_SIZE_STANDARD) unless
# the file's snaplen says more; beyond it a length field is garbage, not a big packet.
MAX_PCAP_RECORD = 262144
# pcapng blocks: Wireshark's limit on a block's total length.
MAX_PCAPNG_BLOCK = 16 * 1024 * 1024
MAX_INTERFACES = 4096

PCAPNG_SHB = 0x0A0D0D0A


@njit(cache=True, inline="always")
def rd16(buf, i, le):
    if le:
        return np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8)
    return (np.int64(buf[i]) << 8) | np.int64(buf[i + 1])


@njit(cache=True, inline="always")
def rd32(buf, i, le):
    if le:
        return (np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8)
                | (np.int64(buf[i + 2]) << 16) | (np.int64(buf[i + 3]) << 24))
    return ((np.int64(buf[i]) << 24) | (np.int64(buf[i + 1]) << 16)
            | (np.int64(buf[i + 2]) << 8) | np.int64(buf[i + 3]))


@njit(cache=True)
def pcap_walk(buf, start, le, nanos, maxrec, fill, rec_off, rec_cap, rec_len, rec_ns):
    """Walk classic pcap records from ``start``. Returns (frames, end offset, status)."""
    size = buf.size
    pos = np.int64(start)
    n = 0
    status = OK
    mult = np.int64(1) if nanos else np.int64(1000)
    while pos < size:
        if pos + 16 > size:
            status = TRUNCATED
            break
        incl = rd32(buf, pos + 8, le)
        if incl > maxrec:
            status = CORRUPT
            break
        if pos + 16 + incl > size:
            status = TRUNCATED
            break
        if fill:
            rec_ns[n] = rd32(buf, pos, le) * np.int64(1_000_000_000) + rd32(buf, pos + 4, le) * mult
            rec_off[n] = pos + 16
            rec_cap[n] = incl
            rec_len[n] = min(max(incl, rd32(buf, pos + 12, le)), 0x7FFFFFFF)
        n += 1
        pos += 16 + incl
    return n, pos, status


@njit(cache=True)
def ticks_to_ns(ticks, exponent, base2, offset_s):
    """A pcapng timestamp in units of 10^-exponent (or 2^-exponent) seconds, as epoch ns."""
    if base2:
        if exponent <= 33:
            whole = ticks >> exponent
            part = ticks & ((np.int64(1) << exponent) - 1)
            ns = whole * np.int64(1_000_000_000) + ((part * np.int64(1_000_000_000)) >> exponent)
        else:
            ns = np.int64(ticks / 2.0 ** exponent * 1e9)
    elif exponent == 9:
        ns = ticks
    elif exponent < 9:
        ns = ticks * np.int64(10) ** (9 - exponent)
    else:
        ns = ticks // np.int64(10) ** min(exponent - 9, 18)
    return ns + offset_s * np.int64(1_000_000_000)


@njit(cache=True)
def pcapng_walk(buf, fill, rec_off, rec_cap, rec_len, rec_ns, rec_if,
                if_link, if_exp, if_base2, if_offset, if_snap):
    """Walk pcapng blocks. Returns (frames, interfaces, end offset, status).

    Interfaces are numbered per section; ``rec_if`` holds a file-wide number
    (interfaces of earlier sections + the local number) into the ``if_*`` arrays.
    """
    size = buf.size
    pos = np.int64(0)
    n = 0
    nif = 0
    section_first_if = 0
    le = True
    status = OK
    while pos < size:
        if pos + 12 > size:
            status = TRUNCATED
            break
        is_shb = (buf[pos] == 0x0A and buf[pos + 1] == 0x0D and buf[pos + 2] == 0x0D
                  and buf[pos + 3] == 0x0A)
        if is_shb:
            if buf[pos + 8] == 0x4D and buf[pos + 9] == 0x3C and buf[pos + 10] == 0x2B and buf[pos + 11] == 0x1A:
                le = True
            elif buf[pos + 8] == 0x1A and buf[pos + 9] == 0x2B and buf[pos + 10] == 0x3C and buf[pos + 11] == 0x4D:
                le = False
            else:
                status = CORRUPT
                break
            btype = np.int64(PCAPNG_SHB)
            section_first_if = nif
        else:
            btype = rd32(buf, pos, le)
        stated = rd32(buf, pos + 4, le)
        # Some writers leave the padding out of the length; Wireshark rounds it up.
        blen = (stated + 3) & ~np.int64(3)
        if blen < 12 or blen > MAX_PCAPNG_BLOCK:
            status = CORRUPT
            break
        if pos + blen > size:
            status = TRUNCATED
            break
        if stated == blen and rd32(buf, pos + blen - 4, le) != blen:
            status = CORRUPT
            break
        body = pos + 8
        body_end = pos + blen - 4
        if btype == 1:  # Interface Description Block
            if body + 8 > body_end:
                status = CORRUPT
                break
            if nif >= if_link.size:
                status = TOO_MANY_INTERFACES
                break
            if_link[nif] = rd16(buf, body, le)
            if_snap[nif] = rd32(buf, body + 4, le)
            if_exp[nif] = 6
            if_base2[nif] = 0
            if_offset[nif] = 0
            o = body + 8
            while o + 4 <= body_end:
                code = rd16(buf, o, le)
                olen = rd16(buf, o + 2, le)
                if code == 0 or o + 4 + olen > body_end:
                    break
                if code == 9 and olen >= 1:  # if_tsresol
                    v = np.int64(buf[o + 4])
                    if_base2[nif] = 1 if v & 0x80 else 0
                    if_exp[nif] = v & 0x7F
                elif code == 14 and olen == 8:  # if_tsoffset, signed seconds
                    if le:
                        hi = rd32(buf, o + 8, le)
                        lo = rd32(buf, o + 4, le)
                    else:
                        hi = rd32(buf, o + 4, le)
                        lo = rd32(buf, o + 8, le)
                    if_offset[nif] = (hi << 32) | lo
                o += 4 + ((olen + 3) // 4) * 4
            nif += 1
        elif btype == 6 or btype == 2:  # Enhanced Packet Block, obsolete Packet Block
            if body + 20 > body_end:
                status = CORRUPT
                break
            if btype == 6:
                ifid = rd32(buf, body, le)
            else:
                ifid = rd16(buf, body, le)
            cap = rd32(buf, body + 12, le)
            if body + 20 + cap > body_end:
                status = CORRUPT
                break
            gid = section_first_if + ifid
            if gid >= nif:
                status = UNKNOWN_INTERFACE
                break
            if fill:
                ticks = (rd32(buf, body + 4, le) << 32) | rd32(buf, body + 8, le)
                rec_ns[n] = ticks_to_ns(ticks, if_exp[gid], if_base2[gid], if_offset[gid])
                rec_off[n] = body + 20
                rec_cap[n] = cap
                rec_len[n] = min(max(cap, rd32(buf, body + 16, le)), 0x7FFFFFFF)
                rec_if[n] = gid
            n += 1
        elif btype == 3:  # Simple Packet Block: interface 0, no timestamp
            gid = section_first_if
            if gid >= nif or body + 4 > body_end:
                status = UNKNOWN_INTERFACE if gid >= nif else CORRUPT
                break
            orig = rd32(buf, body, le)
            cap = min(orig, body_end - body - 4)
            if if_snap[gid] > 0:
                cap = min(cap, if_snap[gid])
            if fill:
                rec_ns[n] = 0
                rec_off[n] = body + 4
                rec_cap[n] = cap
                rec_len[n] = min(max(cap, orig), 0x7FFFFFFF)
                rec_if[n] = gid
            n += 1
        elif (btype == 0x0BAD or btype == 0x40000BAD or btype == 9 or btype == 0x204
              or btype == 0x216 or btype == 0x221):
            # Custom, systemd-journal and sysdig blocks are frames in Wireshark (they take
            # a frame number) but never TCP: interface -1 marks them.
            if fill:
                rec_ns[n] = 0
                rec_off[n] = body
                rec_cap[n] = 0
                rec_len[n] = 0
                rec_if[n] = -1
            n += 1
        pos += blen
    return n, nif, pos, status
