"""Wireshark's TCP expert analysis on a :class:`~.packets.PacketTable`.

:func:`analyze` adds one column per Wireshark ``tcp.analysis.*`` field, computed the way
tshark 4.0 computes them with its default preferences (relative sequence numbers, sequence
analysis, window scaling and bytes in flight all on): a compiled port of
``tcp_analyze_sequence_number`` in epan/dissectors/packet-tcp.c. :func:`read_packets`
runs it by default, so most code never calls it directly.

Boolean columns (True where tshark shows the field):

==========================  ================================================================
column                      Wireshark field / meaning
==========================  ================================================================
retransmission              ``tcp.analysis.retransmission``: any kind of retransmission —
                            True for fast and spurious ones too, as in Wireshark's filter
fast_retransmission         ``tcp.analysis.fast_retransmission``: resends the data that >= 2
                            duplicate ACKs asked for, within 20 ms of the last of them
spurious_retransmission     ``tcp.analysis.spurious_retransmission``: data already ACKed
out_of_order                ``tcp.analysis.out_of_order``: older data arriving within the
                            handshake RTT (3 ms if unknown) of the newest
lost_segment                ``tcp.analysis.lost_segment``: "previous segment not captured"
acked_unseen                ``tcp.analysis.ack_lost_segment``: ACKs data never captured
dup_ack                     ``tcp.analysis.duplicate_ack``
zero_window                 ``tcp.analysis.zero_window``
zero_window_probe           ``tcp.analysis.zero_window_probe``
zero_window_probe_ack       ``tcp.analysis.zero_window_probe_ack``
window_full                 ``tcp.analysis.window_full``: fills the peer's window exactly
window_update               ``tcp.analysis.window_update``
keep_alive                  ``tcp.analysis.keep_alive``
keep_alive_ack              ``tcp.analysis.keep_alive_ack``
reused_ports                ``tcp.analysis.reused_ports``
duplicate_frame             not Wireshark's: a second copy of an IPv4 packet (same IP ID,
                            seq, ack, length and flags as one of the last 8 of its direction;
                            tcptrace's "hardware duplicate"); copies get no other flag and the
                            analysis of every other packet runs as if they were not there
==========================  ================================================================

Numeric columns:

* ``expert_flags`` (uint16): all of the above as Wireshark's ``TCP_A_*`` bits (see
  ``A_*`` in this module), handy for "anything wrong" filters;
* ``dup_ack_num`` (int32): the "#n" of a duplicate ACK, 0 otherwise;
* ``dup_ack_frame`` (int64): the frame it duplicates, 0 otherwise;
* ``acks_frame`` (int64): ``tcp.analysis.acks_frame``, the frame whose data this ACK
  acknowledges exactly, 0 otherwise;
* ``ack_rtt`` (float64 seconds): ``tcp.analysis.ack_rtt``, time since that frame; NaN when
  there is none (or, as Wireshark hides it, when it is exactly 0). After a retransmission
  it is measured from the *first* transmission, as Wireshark does;
* ``bytes_in_flight`` (int64): ``tcp.analysis.bytes_in_flight``: un-ACKed data this
  direction has sent, from the lowest un-ACKed byte to the highest byte sent, minus the
  SACK blocks (up to three) of the peer's latest packet; -1 where Wireshark shows none
  (packets without payload, or after a gap until the peer ACKs again).

Wireshark's quirks are kept, since the point is to agree with it: Linux's zero-window
probes (no data, one byte below the window) are keep-alives for Wireshark, its
"zero window probe" being a one-byte segment; and a packet whose TCP options were cut
by the snaplen shows no analysis at all (``snaplen_truncated``: Wireshark stops
dissecting at the cut, before it prints the analysis), though it counts for the
analysis of the packets after it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._expert_kernel import (  # noqa: F401  (re-exported: the bit values are public)
    A_ACK_LOST_PACKET, A_DUPLICATE_ACK, A_FAST_RETRANSMISSION, A_KEEP_ALIVE, A_KEEP_ALIVE_ACK,
    A_LOST_PACKET, A_OUT_OF_ORDER, A_RETRANSMISSION, A_REUSED_PORTS, A_SPURIOUS_RETRANSMISSION,
    A_WINDOW_FULL, A_WINDOW_UPDATE, A_ZERO_WINDOW, A_ZERO_WINDOW_PROBE, A_ZERO_WINDOW_PROBE_ACK,
    DUPLICATE_MEMORY, analyze_kernel, duplicate_kernel,
)
from .table import PacketTable

__all__ = ["analyze", "EXPERT_COLUMNS", "FLAG_COLUMNS"]

#: Boolean column -> the TCP_A_* bits that make Wireshark show that field.
FLAG_COLUMNS = {
    "retransmission": A_RETRANSMISSION | A_FAST_RETRANSMISSION | A_SPURIOUS_RETRANSMISSION,
    "fast_retransmission": A_FAST_RETRANSMISSION,
    "spurious_retransmission": A_SPURIOUS_RETRANSMISSION,
    "out_of_order": A_OUT_OF_ORDER,
    "lost_segment": A_LOST_PACKET,
    "acked_unseen": A_ACK_LOST_PACKET,
    "dup_ack": A_DUPLICATE_ACK,
    "zero_window": A_ZERO_WINDOW,
    "zero_window_probe": A_ZERO_WINDOW_PROBE,
    "zero_window_probe_ack": A_ZERO_WINDOW_PROBE_ACK,
    "window_full": A_WINDOW_FULL,
    "window_update": A_WINDOW_UPDATE,
    "keep_alive": A_KEEP_ALIVE,
    "keep_alive_ack": A_KEEP_ALIVE_ACK,
    "reused_ports": A_REUSED_PORTS,
}

EXPERT_COLUMNS = ("expert_flags", "duplicate_frame", *FLAG_COLUMNS, "dup_ack_num", "dup_ack_frame", "acks_frame",
                  "ack_rtt", "bytes_in_flight")


def _col(df: pd.DataFrame, name: str, dtype) -> np.ndarray:
    return np.ascontiguousarray(df[name].to_numpy(), dtype=dtype)


def analyze(table: PacketTable) -> PacketTable:
    """Return ``table`` with the expert columns added (replaced if already there).

    The table must hold every packet of the capture in frame order (as
    :func:`~.packets.read_packets` returns it before any ``flow`` selection): Wireshark's
    analysis of a packet depends on the packets before it in both directions.
    """
    pk = table.packets
    n = len(pk)
    nflows = len(table.flows)
    if not np.array_equal(table.flows["flow"].to_numpy(), np.arange(nflows)):
        raise ValueError("analyze() needs the whole capture: select flows after analysing")
    flow = _col(pk, "flow", np.int32)
    if n and (flow.min() < 0 or flow.max() >= nflows):
        raise ValueError("packets refer to flows missing from the flows table")
    dirn = _col(pk, "dir", np.int8)
    seq_raw = _col(pk, "seq_raw", np.uint32)
    duplicate = duplicate_kernel(flow, dirn, seq_raw, _col(pk, "ack_raw", np.uint32), _col(pk, "len", np.int32),
                                 _col(pk, "flags", np.uint16), _col(pk, "ip_id", np.int32), nflows)
    # A copy of a frame is no event of the connection: the analysis runs without the copies
    # (as Wireshark would on the capture without them), and the copies get no flags.
    copies = bool(duplicate.any())
    kept = np.flatnonzero(~duplicate) if copies else slice(None)

    def col(name, dtype):
        return np.ascontiguousarray(_col(pk, name, dtype)[kept])

    sack = [col(f"sack_{e}{j}", np.int64) for j in (1, 2, 3) for e in ("le", "re")]
    eflags = np.zeros(n, np.uint16)
    dup_num = np.zeros(n, np.int32)
    dup_frame = np.zeros(n, np.int64)
    acks_frame = np.zeros(n, np.int64)
    rtt_ns = np.zeros(n, np.int64)
    bif = np.full(n, -1, np.int64)
    fulls = (eflags, dup_num, dup_frame, acks_frame, rtt_ns, bif)
    # Without copies the kernel writes the columns in place; with them, the kept rows' part.
    outs = [np.empty(n - int(duplicate.sum()), a.dtype) for a in fulls] if copies else fulls
    analyze_kernel(col("frame", np.int64), col("time_ns", np.int64), np.ascontiguousarray(flow[kept]),
                   np.ascontiguousarray(dirn[kept]), np.ascontiguousarray(seq_raw[kept]),
                   col("ack_raw", np.uint32), col("len", np.int32), col("flags", np.uint16),
                   col("win_raw", np.uint16), col("wscale", np.int16), col("sack_count", np.int16), *sack,
                   col("snaplen_truncated", np.bool_),
                   np.ascontiguousarray(table.flows["reused_ports"].to_numpy(), dtype=np.bool_), nflows, *outs)
    if copies:
        for full, part in zip(fulls, outs):
            full[kept] = part
    ack_rtt = rtt_ns / 1e9
    ack_rtt[(acks_frame == 0) | (rtt_ns == 0)] = np.nan
    cols = {"expert_flags": eflags, "duplicate_frame": duplicate}
    for name, bits in FLAG_COLUMNS.items():
        cols[name] = (eflags & bits) != 0
    cols.update(dup_ack_num=dup_num, dup_ack_frame=dup_frame, acks_frame=acks_frame, ack_rtt=ack_rtt,
                bytes_in_flight=bif)
    keep = {c: pk[c] for c in pk.columns if c not in cols}
    packets = pd.DataFrame({**{c: s.to_numpy() for c, s in keep.items()}, **cols}, copy=False)
    return PacketTable(packets, table.flows, table.source)
