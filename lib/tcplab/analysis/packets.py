"""Read a capture file into columns: one row per TCP packet, one row per TCP connection.

    >>> table = read_packets("run.pcap")
    >>> table.packets[["frame", "rel_time", "flow", "dir", "seq", "len", "win"]]
    >>> table.flows

The file is memory-mapped and decoded by compiled code (numba) straight into NumPy
columns, which become the DataFrame without a copy; nothing is built per packet in Python.

Numbers follow Wireshark (tshark 4.0 defaults), so a row can be checked against the
same frame in Wireshark:

* ``frame`` is Wireshark's frame number: 1-based, counting every frame of the file;
* ``flow`` is ``tcp.stream``: connections numbered by first appearance; a SYN that reuses
  a connection's ports with a new initial sequence number starts a new one;
* ``seq``/``ack`` are ``tcp.seq``/``tcp.ack``, relative to each direction's initial
  sequence number (first seen seq - 1 when the SYN was not captured), widened to int64
  so they keep growing past 4 GiB instead of wrapping (``seq % 2**32`` is Wireshark's).
  Without the ACK flag, ``ack`` is the raw field, as Wireshark shows it;
* ``len`` is ``tcp.len``, taken from the IP header, so a snaplen that cut the payload
  off does not change it;
* ``win`` is ``tcp.window_size``: the advertised window scaled by the shift Wireshark has
  for that direction. Never scaled on SYNs; -1 where Wireshark's scale is "unknown"
  (handshake not captured), where Wireshark would show the unscaled field. Like
  Wireshark, a SYN's window-scale option applies to its sender's windows even when the
  SYN-ACK was not captured; ``flows.window_scaling`` is "on" only when both carried it.

Other per-packet columns: ``dir`` (0: from the side that opened the connection: the
SYN's sender, the SYN-ACK's receiver, else the first sender), ``time`` (epoch seconds),
``time_ns`` (the exact capture timestamp), ``rel_time`` (since the file's first frame),
raw ``seq_raw``/``ack_raw``/``win_raw``, ``ip_id`` (``ip.id``; -1 for IPv6), ``flags`` (the 12 TCP flag bits) with ``f_syn``,
``f_ack``, ``f_fin``, ``f_rst``, ``f_psh``; options ``mss`` (0: none), ``wscale`` (-1: none),
``ts_val``/``ts_ecr`` (-1: none), ``sack_count`` and up to four blocks
``sack_le1..4``/``sack_re1..4`` relative like ``ack`` (-1 where absent).
``snaplen_truncated`` marks packets whose TCP options were cut by the snaplen: options
after the cut are missing, and a SACK block cut in two keeps its left edge (right edge
-1, not counted in ``sack_count``), as Wireshark shows it.

Frames that are not TCP are counted in ``source.skipped`` by reason; IP fragments other
than the first are among them (Wireshark would reassemble them: TCP segments split by
IP fragmentation are rare, Linux sets DF). TCP headers quoted inside ICMP errors are
not read.

Expert columns (retransmissions, duplicate ACKs, zero windows, RTT, bytes in flight...)
are added by :func:`tcplab.analysis.expert.analyze`; ``read_packets`` calls it unless
``expert=False``.
"""

from __future__ import annotations

import mmap
import os
import socket
import warnings
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pandas as pd

from ..words import SaidByReason, SaidWhereItArose, messages, rebuilt_by_reason
from . import _decode as D
from . import _pcapio as io
from .table import FlowError, PacketTable

__all__ = ["PacketTable", "PcapError", "PcapSource", "PcapWarning", "read_packets", "PACKET_COLUMNS",
           "FLOW_COLUMNS"]


class PcapError(SaidByReason, ValueError):
    """A file that cannot be read as a TCP capture; the message names the file and why:
    ``reason`` is a key under ``pcap_error.`` in the strings files, said in the language in
    force where it arose (``--language``, a page's), with ``fields`` filled in."""

    KEYS = "pcap_error"


class PcapWarning(SaidWhereItArose, UserWarning):
    """Something in the file was dropped (a cut-off last record, say) but the rest is good:
    ``reason`` is a key under ``pcap_warning.`` (what was dropped, as ``source.warnings`` says
    it), said of the file at ``path`` in the language in force where it was issued."""

    def __init__(self, reason: str, path: str, **fields) -> None:
        self.reason, self.path, self.fields = reason, path, fields
        words = messages()
        super().__init__(words("pcap_warning.of_file", path=path, warning=words(f"pcap_warning.{reason}", **fields)))

    def _rebuilt_by(self):
        return rebuilt_by_reason, (type(self), self.reason, {"path": self.path, **self.fields})


#: Columns of ``PacketTable.packets`` from the decoder (expert columns come on top).
PACKET_COLUMNS = (
    "frame", "time", "time_ns", "rel_time", "flow", "dir", "seq", "ack", "seq_raw", "ack_raw", "len",
    "flags", "f_syn", "f_ack", "f_fin", "f_rst", "f_psh", "win_raw", "win", "ip_id", "mss",
    "wscale", "sack_count", "sack_le1", "sack_re1", "sack_le2", "sack_re2", "sack_le3", "sack_re3",
    "sack_le4", "sack_re4", "ts_val", "ts_ecr", "snaplen_truncated",
)

FLOW_COLUMNS = (
    "flow", "ip_version", "client", "client_port", "server", "server_port", "handshake",
    "wscale_client", "wscale_server", "window_scaling", "mss_client", "mss_server",
    "packets", "bytes_c2s", "bytes_s2c", "first", "last", "reused_ports",
)

_SKIP_REASONS = ("not IP", "not TCP", "IP fragment", "cut short", "malformed TCP", "unsupported link type")

_LINK_NAMES = {
    D.LT_NULL: "BSD loopback", D.LT_ETHERNET: "Ethernet", D.LT_RAW: "raw IP", D.LT_RAW_BSD12: "raw IP",
    D.LT_RAW_BSD14: "raw IP", D.LT_LOOP: "OpenBSD loopback", D.LT_SLL: "Linux cooked (SLL)",
    D.LT_IPV4: "raw IPv4", D.LT_IPV6: "raw IPv6", D.LT_SLL2: "Linux cooked v2 (SLL2)",
}


@dataclass(frozen=True)
class PcapSource:
    """Where a table came from and what was left out."""

    path: str
    format: str  # "pcap" or "pcapng"
    link_types: tuple[int, ...]  # LINKTYPE_* numbers, one per interface
    frames: int  # every frame in the file, TCP or not
    packets: int  # TCP packets decoded (rows before any ``flow`` selection)
    skipped: int  # frames that are not decodable TCP
    skipped_by_reason: dict = field(default_factory=dict)
    complete: bool = True  # False when the file ended inside a record
    warnings: tuple[str, ...] = ()

    @property
    def link_type(self) -> int:
        return self.link_types[0] if self.link_types else -1

    @property
    def link_name(self) -> str:
        return ", ".join(dict.fromkeys(_LINK_NAMES.get(t, f"LINKTYPE {t}") for t in self.link_types))


_PCAP_MAGIC = {
    b"\xd4\xc3\xb2\xa1": (True, False),
    b"\xa1\xb2\xc3\xd4": (False, False),
    b"\x4d\x3c\xb2\xa1": (True, True),
    b"\xa1\xb2\x3c\x4d": (False, True),
}
_PCAP_MODIFIED = (b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34")
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def read_packets(path, *, flow: int | Iterable[int] | None = None, expert: bool = True) -> PacketTable:
    """Decode every TCP packet of a pcap or pcapng file.

    ``flow`` keeps only the given flow number(s) (``tcp.stream``); the analysis still sees
    the whole file first, so the kept rows are the same as without the selection.
    ``expert=False`` skips the Wireshark expert analysis (see :mod:`.expert`).

    Raises :class:`PcapError` for a file that is missing, empty, not a capture, damaged
    before its end, or has no TCP packet. A file that ends inside its last record (a
    capture cut off mid-write) is read up to that record, with a :class:`PcapWarning`;
    ``source.complete`` is then False and ``source.warnings`` says what was dropped.
    """
    path = os.fspath(path)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise PcapError("cannot_open", path=path, why=exc.strerror or exc) from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise PcapError("empty", path=path)
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise PcapError("cannot_map", path=path, why=exc) from None
    error = None
    try:
        packets, flows, source, notes = _read(path, np.frombuffer(mm, dtype=np.uint8), size)
    except PcapError as exc:
        # A fresh exception without the traceback, whose frames still see the mapping.
        error = PcapError(exc.reason, **exc.fields)
    finally:
        try:
            mm.close()
        except BufferError:
            pass  # an unexpected error's traceback still holds it; unmapped when freed
    if error is not None:
        raise error
    for reason, fields in notes:
        warnings.warn(PcapWarning(reason, path, **fields), stacklevel=2)
    table = PacketTable(packets, flows, source)
    if expert:
        from .expert import analyze

        table = analyze(table)
    if flow is not None:
        table = select_flows(table, flow)
    return table


def select_flows(table: PacketTable, flow: int | Iterable[int]) -> PacketTable:
    wanted = np.atleast_1d(np.asarray(list(flow) if not np.isscalar(flow) else [flow], dtype=np.int64))
    unknown = sorted(set(wanted.tolist()) - set(range(len(table.flows))))
    if unknown:
        raise FlowError("no_flow", path=table.source.path, flow=unknown[0], flows=f"0..{len(table.flows) - 1}")
    keep = np.isin(table.packets["flow"].to_numpy(), wanted)
    packets = table.packets.loc[keep].reset_index(drop=True)
    flows = table.flows.loc[table.flows["flow"].isin(wanted)].reset_index(drop=True)
    return PacketTable(packets, flows, table.source)


def _read(path: str, buf: np.ndarray, size: int):
    head = bytes(buf[:4])
    notes: list[tuple[str, dict]] = []  # what was dropped: a pcap_warning reason and its fields
    if head == _PCAPNG_MAGIC:
        fmt = "pcapng"
        rec_off, rec_cap, rec_len, rec_ns, rec_if, if_link, status, end = _walk_pcapng(path, buf)
    elif head in _PCAP_MAGIC:
        fmt = "pcap"
        rec_off, rec_cap, rec_len, rec_ns, rec_if, if_link, status, end = _walk_pcap(path, buf, size,
                                                                             *_PCAP_MAGIC[head])
    elif head in _PCAP_MODIFIED:
        raise PcapError("modified_pcap", path=path)
    else:
        raise PcapError("not_pcap", path=path, start=repr(bytes(buf[:8])))
    nframes = rec_off.size
    complete = True
    if status == io.TRUNCATED:
        complete = False
        notes.append(("cut_off", {"end": end, "frames": nframes}))
    elif status != io.OK:
        reason = {io.CORRUPT: "corrupt_record", io.UNKNOWN_INTERFACE: "unknown_interface",
                  io.TOO_MANY_INTERFACES: "too_many_interfaces"}[status]
        raise PcapError(reason, path=path, end=end, frames=nframes, limit=io.MAX_INTERFACES)
    if nframes == 0:
        raise PcapError("no_frames" if complete else "no_frames_cut_off", path=path)

    n = nframes
    i64 = np.empty((D.N_I64, n), np.int64)
    i32 = np.empty((D.N_I32, n), np.int32)
    u32 = np.empty((D.N_U32, n), np.uint32)
    u16 = np.empty((D.N_U16, n), np.uint16)
    i16 = np.empty((D.N_I16, n), np.int16)
    trunc = np.empty(n, np.bool_)
    skipped = np.zeros(D.N_SKIP, np.int64)
    cap = 1 << 10
    keys = np.empty((cap, D.NK), np.int64)
    vals = np.full(cap, -1, np.int64)
    F = np.empty((256, D.NF), np.int64)
    FK = np.empty((256, D.NK + 2), np.int64)
    k, nflows, keys, vals, F, FK = D.decode(buf, rec_off, rec_cap, rec_len, rec_ns, rec_if, if_link,
                                            i64, i32, u32, u16, i16, trunc, skipped, keys, vals, F, FK)
    first_ns = int(rec_ns[0])
    del rec_off, rec_cap, rec_len, rec_ns, rec_if, keys, vals
    link_types = tuple(int(x) for x in if_link)
    by_reason = {name: int(c) for name, c in zip(_SKIP_REASONS, skipped) if c}
    if k == 0:
        unsupported = [t for t in link_types if t not in D.SUPPORTED_LINK_TYPES]
        words = messages()
        extra = words("pcap_error.unsupported_link_types", types=unsupported) if unsupported else ""
        reasons = words("pcap_error.separator").join(
            words("pcap_error.skipped", count=c, reason=words(f"pcap_skip.{name}")) for name, c in by_reason.items())
        raise PcapError("no_tcp", path=path, frames=nframes, reasons=reasons, extra=extra)

    if k < n // 2:
        # Mostly non-TCP: don't keep the unused tail of every column alive.
        i64, i32, u32, u16, i16, trunc = (a[..., :k].copy() for a in (i64, i32, u32, u16, i16, trunc))
    packets = _packet_frame(k, i64, i32, u32, u16, i16, trunc, first_ns)
    flows = _flow_frame(F[:nflows], FK[:nflows])
    source = PcapSource(path=path, format=fmt, link_types=link_types, frames=nframes, packets=k,
                        skipped=nframes - k, skipped_by_reason=by_reason, complete=complete,
                        warnings=tuple(messages()(f"pcap_warning.{reason}", **fields) for reason, fields in notes))
    return packets, flows, source, notes


def _walk_pcap(path, buf, size, le, nanos):
    if size < 24:
        raise PcapError("truncated_header", path=path, size=size)
    snaplen = int(np.frombuffer(bytes(buf[16:20]), "<u4" if le else ">u4")[0])
    linktype = int(np.frombuffer(bytes(buf[20:24]), "<u4" if le else ">u4")[0]) & 0xFFFF
    maxrec = max(io.MAX_PCAP_RECORD, min(snaplen, io.MAX_PCAPNG_BLOCK))
    empty64 = np.empty(0, np.int64)
    empty32 = np.empty(0, np.int32)
    n, _, _ = io.pcap_walk(buf, 24, le, nanos, maxrec, False, empty64, empty32, empty32, empty64)
    rec_off = np.empty(n, np.int64)
    rec_cap = np.empty(n, np.int32)
    rec_len = np.empty(n, np.int32)
    rec_ns = np.empty(n, np.int64)
    n2, end, status = io.pcap_walk(buf, 24, le, nanos, maxrec, True, rec_off, rec_cap, rec_len, rec_ns)
    assert n2 == n
    return rec_off, rec_cap, rec_len, rec_ns, empty32, np.array([linktype], np.int32), status, end


def _walk_pcapng(path, buf):
    ifs = [np.empty(io.MAX_INTERFACES, np.int64) for _ in range(5)]
    empty64 = np.empty(0, np.int64)
    empty32 = np.empty(0, np.int32)
    n, nif, _, _ = io.pcapng_walk(buf, False, empty64, empty32, empty32, empty64, empty32, *ifs)
    rec_off = np.empty(n, np.int64)
    rec_cap = np.empty(n, np.int32)
    rec_len = np.empty(n, np.int32)
    rec_ns = np.empty(n, np.int64)
    rec_if = np.empty(n, np.int32)
    n2, nif, end, status = io.pcapng_walk(buf, True, rec_off, rec_cap, rec_len, rec_ns, rec_if, *ifs)
    assert n2 == n
    if nif == 0 and n == 0 and status == io.OK:
        raise PcapError("pcapng_empty", path=path)
    if_link = ifs[0][:max(nif, 1)].astype(np.int32)
    return rec_off, rec_cap, rec_len, rec_ns, rec_if, if_link, status, end


def _packet_frame(k, i64, i32, u32, u16, i16, trunc, first_ns) -> pd.DataFrame:
    time_ns = i64[D.I64_TIME_NS, :k]
    flags = u16[D.U16_FLAGS, :k]
    cols = {
        "frame": i64[D.I64_FRAME, :k],
        "time": time_ns / 1e9,
        "time_ns": time_ns,
        "rel_time": (time_ns - first_ns) / 1e9,
        "flow": i32[D.I32_FLOW, :k],
        "dir": i16[D.I16_DIR, :k].astype(np.int8),
        "seq": i64[D.I64_SEQ, :k],
        "ack": i64[D.I64_ACK, :k],
        "seq_raw": u32[D.U32_SEQ_RAW, :k],
        "ack_raw": u32[D.U32_ACK_RAW, :k],
        "len": i32[D.I32_LEN, :k],
        "flags": flags,
        "f_syn": (flags & D.TH_SYN) != 0,
        "f_ack": (flags & D.TH_ACK) != 0,
        "f_fin": (flags & D.TH_FIN) != 0,
        "f_rst": (flags & D.TH_RST) != 0,
        "f_psh": (flags & D.TH_PUSH) != 0,
        "win_raw": u16[D.U16_WIN_RAW, :k],
        "win": i32[D.I32_WIN, :k],
        "ip_id": i32[D.I32_IP_ID, :k],
        "mss": u16[D.U16_MSS, :k],
        "wscale": i16[D.I16_WSCALE, :k],
        "sack_count": i16[D.I16_SACK_COUNT, :k],
    }
    for j in range(4):
        cols[f"sack_le{j + 1}"] = i64[D.I64_SACK_LE + j, :k]
        cols[f"sack_re{j + 1}"] = i64[D.I64_SACK_RE + j, :k]
    cols["ts_val"] = i64[D.I64_TSVAL, :k]
    cols["ts_ecr"] = i64[D.I64_TSECR, :k]
    cols["snaplen_truncated"] = trunc[:k]
    return pd.DataFrame({name: cols[name] for name in PACKET_COLUMNS}, copy=False)


def _address(family: int, hi: int, lo: int) -> str:
    if family == 4:
        return socket.inet_ntop(socket.AF_INET, int(lo & 0xFFFFFFFF).to_bytes(4, "big"))
    raw = (int(hi) & (2**64 - 1)).to_bytes(8, "big") + (int(lo) & (2**64 - 1)).to_bytes(8, "big")
    return socket.inet_ntop(socket.AF_INET6, raw)


def _flow_frame(F: np.ndarray, FK: np.ndarray) -> pd.DataFrame:
    """One row per flow, column by column: a busy server's capture holds tens of thousands of
    flows, and a Python row each cost a third of a second per 50,000. Addresses are spelled
    once per distinct address (a server's is in every row)."""
    n = F.shape[0]
    fam = FK[:, 6]
    ends = []
    for hi, lo in ((0, 1), (2, 3)):  # the canonical sides A and B
        keys = np.stack([fam, FK[:, hi], FK[:, lo]], axis=1) if n else np.zeros((0, 3), np.int64)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        names = np.array([_address(int(f), h, l) for f, h, l in uniq.tolist()] or [""], dtype=object)
        ends.append(names[inverse.reshape(-1)] if n else names[:0])
    a_first = F[:, D.F_INIT_SIDE] == 0
    client = np.where(a_first, ends[0], ends[1])
    server = np.where(a_first, ends[1], ends[0])
    client_port = np.where(a_first, FK[:, 4], FK[:, 5])
    server_port = np.where(a_first, FK[:, 5], FK[:, 4])
    syn, synack = F[:, D.F_SYN_SEEN] != 0, F[:, D.F_SYNACK_SEEN] != 0
    ws_c = np.where(syn, F[:, D.F_SYN_WS], -1)
    ws_s = np.where(synack, F[:, D.F_SYNACK_WS], -1)
    off = (F[:, D.F_WS] == -2) | (F[:, D.F_WS + 1] == -2)
    on = syn & synack & (ws_c >= 0) & (ws_s >= 0)
    scaling = np.where(off, "off", np.where(on, "on", "unknown")).astype(object)
    columns = {
        "flow": np.arange(n), "ip_version": fam, "client": client, "client_port": client_port, "server": server,
        "server_port": server_port, "handshake": syn & synack, "wscale_client": ws_c, "wscale_server": ws_s,
        "window_scaling": scaling, "mss_client": np.where(syn, F[:, D.F_SYN_MSS], 0),
        "mss_server": np.where(synack, F[:, D.F_SYNACK_MSS], 0), "packets": F[:, D.F_NPKT],
        "bytes_c2s": F[:, D.F_BYTES], "bytes_s2c": F[:, D.F_BYTES + 1], "first": F[:, D.F_FIRST] / 1e9,
        "last": F[:, D.F_LAST] / 1e9, "reused_ports": F[:, D.F_REUSED] != 0,
    }
    flows = pd.DataFrame({name: columns[name] for name in FLOW_COLUMNS})
    return flows.astype({"flow": np.int32, "ip_version": np.int8, "client_port": np.int32, "server_port": np.int32,
                         "wscale_client": np.int16, "wscale_server": np.int16, "mss_client": np.int32,
                         "mss_server": np.int32, "packets": np.int64, "bytes_c2s": np.int64,
                         "bytes_s2c": np.int64, "first": np.float64, "last": np.float64,
                         "handshake": bool, "reused_ports": bool})
