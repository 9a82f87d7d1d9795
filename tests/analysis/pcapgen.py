"""Building synthetic captures for the tests: TCP conversations scripted packet by packet,
written as pcap or pcapng in any of the link types the reader supports.

IP and TCP headers come from dpkt (which also computes the checksums); the link-layer
headers and the file formats are written here, so the tests can produce every variant
(byte orders, nanosecond stamps, several pcapng interfaces) independently of the reader.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# ---------------------------------------------------------------- TCP options


def opt_mss(value: int) -> bytes:
    return struct.pack("!BBH", 2, 4, value)


def opt_ws(shift: int) -> bytes:
    return struct.pack("!BBB", 3, 3, shift)


def opt_sack_perm() -> bytes:
    return b"\x04\x02"


def opt_ts(val: int, ecr: int) -> bytes:
    return struct.pack("!BBII", 8, 10, val, ecr)


def opt_sack(blocks) -> bytes:
    return struct.pack("!BB", 5, 2 + 8 * len(blocks)) + b"".join(
        struct.pack("!II", le & 0xFFFFFFFF, re & 0xFFFFFFFF) for le, re in blocks)


def nops(n: int) -> bytes:
    return b"\x01" * n


def pad4(opts: bytes) -> bytes:
    return opts + b"\x00" * (-len(opts) % 4)


# ---------------------------------------------------------------- IP packets


def tcp_segment(sport, dport, seq, ack, flags, win, opts=b"", payload=b"") -> dpkt.tcp.TCP:
    opts = pad4(opts)
    seg = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF, flags=flags,
                       win=win, opts=opts, data=payload)
    seg.off = (20 + len(opts)) // 4
    return seg


def _with_l4_checksum(src: bytes, dst: bytes, proto: int, body: bytes) -> bytes:
    """Fill in a TCP checksum over the pseudo-header, so tools that check it agree."""
    if proto != 6 or len(body) < 20:
        return body
    body = body[:16] + b"\x00\x00" + body[18:]
    pseudo = src + dst + struct.pack("!HH", proto, len(body)) if len(src) == 4 else \
        src + dst + struct.pack("!IxxxB", len(body), proto)
    return body[:16] + struct.pack("!H", dpkt.in_cksum(pseudo + body)) + body[18:]


def ipv4(src: str, dst: str, payload, proto: int = 6, *, frag_offset: int = 0, more_fragments: bool = False,
         ident: int = 1, total_length: int | None = None) -> bytes:
    body = bytes(payload)
    if not frag_offset:
        body = _with_l4_checksum(socket.inet_aton(src), socket.inet_aton(dst), proto, body)
    flags_frag = (0x2000 if more_fragments else 0) | (frag_offset // 8)
    if not more_fragments and not frag_offset:
        flags_frag |= 0x4000  # DF, as Linux sets it
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body) if total_length is None else total_length, ident,
                      flags_frag, 64, proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    csum = dpkt.in_cksum(hdr)
    return hdr[:10] + struct.pack("!H", csum) + hdr[12:] + body


def ipv6(src: str, dst: str, payload, nxt: int = 6, ext: bytes = b"") -> bytes:
    s, d = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
    body = ext + _with_l4_checksum(s, d, 6, bytes(payload))
    hdr = struct.pack("!IHBB", 0x60000000, len(body), nxt, 64)
    return hdr + s + d + body


def udp4(src, dst, sport=5353, dport=5353, payload=b"hello") -> bytes:
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    u.ulen = 8 + len(payload)
    return ipv4(src, dst, u, proto=17)


# ---------------------------------------------------------------- link layers

ETH_IP4, ETH_IP6, ETH_ARP = 0x0800, 0x86DD, 0x0806


def ethertype_of(l3: bytes) -> int:
    return ETH_IP6 if l3[0] >> 4 == 6 else ETH_IP4


def ethernet(l3: bytes, vlans=(), tpid=0x8100, ethertype=None) -> bytes:
    et = ethertype if ethertype is not None else ethertype_of(l3)
    tags = b""
    for i, vid in enumerate(vlans):
        # Outer tags of a QinQ stack use 802.1ad's TPID, the innermost 802.1Q's.
        this_tpid = tpid if i < len(vlans) - 1 else 0x8100
        tags += struct.pack("!HH", this_tpid, vid)
    frame = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    body = frame + tags + struct.pack("!H", et) + l3
    return body + b"\x00" * max(0, 60 - len(body))  # Ethernet minimum frame: padding


def sll(l3: bytes, pkttype: int = 0) -> bytes:
    return struct.pack("!HHH8sH", pkttype, 1, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00", ethertype_of(l3)) + l3


def sll2(l3: bytes, ifindex: int = 1, pkttype: int = 0) -> bytes:
    return struct.pack("!HHIHBB8s", ethertype_of(l3), 0, ifindex, 1, pkttype, 6,
                       b"\x02\x00\x00\x00\x00\x01\x00\x00") + l3


def bsd_null(l3: bytes, little_endian: bool = True) -> bytes:
    family = 2 if l3[0] >> 4 == 4 else 30
    return struct.pack("<I" if little_endian else ">I", family) + l3


def openbsd_loop(l3: bytes) -> bytes:
    return struct.pack(">I", 2 if l3[0] >> 4 == 4 else 24) + l3


LINK = {  # name -> (LINKTYPE number, encapsulation)
    "ethernet": (1, ethernet),
    "vlan": (1, lambda l3: ethernet(l3, vlans=(100,))),
    "qinq": (1, lambda l3: ethernet(l3, vlans=(200, 100), tpid=0x88A8)),
    "sll": (113, sll),
    "sll2": (276, sll2),
    "raw": (101, lambda l3: l3),
    "raw12": (12, lambda l3: l3),
    "raw14": (14, lambda l3: l3),
    "ipv4": (228, lambda l3: l3),
    "ipv6": (229, lambda l3: l3),
    "null": (0, bsd_null),
    "null_be": (0, lambda l3: bsd_null(l3, little_endian=False)),
    "loop": (108, openbsd_loop),
}


# ---------------------------------------------------------------- file writers


def write_pcap(path, frames, linktype: int = 1, *, nanos: bool = False, big_endian: bool = False,
               snaplen: int = 262144) -> None:
    """``frames``: (time in seconds, or an int of ns, bytes) in order."""
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    with open(path, "wb") as fh:
        fh.write(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        for t, data in frames:
            sec, frac = _split_time(t, 1_000_000_000 if nanos else 1_000_000)
            cap = data[:snaplen]
            fh.write(struct.pack(e + "IIII", sec, frac, len(cap), len(data)))
            fh.write(cap)


def merge_pcaps(paths, out) -> None:
    """Merge classic little-endian microsecond pcaps of one link type into ``out`` in time
    order, keeping each record's captured and original lengths (as ``mergecap`` does; a
    writer that sets both to the captured length makes a snaplen-cut segment look short)."""
    records, header = [], None
    for path in paths:
        data = Path(path).read_bytes()
        magic, *_, linktype = struct.unpack("<IHHiIII", data[:24])
        if magic != 0xA1B2C3D4 or (header is not None and linktype != header[-1]):
            raise ValueError(f"{path}: not a little-endian µs pcap of link type {header and header[-1]}")
        header = header or struct.unpack("<IHHiIII", data[:24])
        at = 24
        while at < len(data):
            sec, usec, caplen, _ = struct.unpack("<IIII", data[at:at + 16])
            records.append(((sec, usec), data[at:at + 16 + caplen]))
            at += 16 + caplen
    with open(out, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", *header[:5], 262144, header[-1]))
        fh.writelines(record for _, record in sorted(records, key=lambda r: r[0]))


def _split_time(t, per_second: int):
    if isinstance(t, int):  # nanoseconds
        sec, ns = divmod(t, 1_000_000_000)
        return sec, ns * per_second // 1_000_000_000
    sec = int(t)
    return sec, round((t - sec) * per_second)


@dataclass
class Interface:
    linktype: int
    tsresol: int | None = None  # raw if_tsresol byte; None: default microseconds
    snaplen: int = 0
    tsoffset: int | None = None


def _opt(code: int, value: bytes, e: str) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _block(btype: int, body: bytes, e: str) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def write_pcapng(path, interfaces, packets, *, big_endian: bool = False, extra_blocks=()) -> None:
    """``packets``: (interface index, ticks in that interface's resolution, bytes), or
    ("spb", None, bytes) for a Simple Packet Block. ``extra_blocks``: (position, type, body)
    blocks the reader must skip, inserted before packet ``position``."""
    e = ">" if big_endian else "<"
    out = [_block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1), e)]
    for itf in interfaces:
        opts = b""
        if itf.tsresol is not None:
            opts += _opt(9, bytes([itf.tsresol]), e)
        if itf.tsoffset is not None:
            opts += _opt(14, struct.pack(e + "q", itf.tsoffset), e)
        if opts:
            opts += struct.pack(e + "HH", 0, 0)
        out.append(_block(1, struct.pack(e + "HHI", itf.linktype, 0, itf.snaplen) + opts, e))
    extras = {}
    for pos, btype, body in extra_blocks:
        extras.setdefault(pos, []).append(_block(btype, body, e))
    for i, (ifid, ticks, data) in enumerate(packets):
        out.extend(extras.get(i, []))
        if ifid == "spb":
            out.append(_block(3, struct.pack(e + "I", len(data)) + data, e))
        else:
            out.append(_block(6, struct.pack(e + "IIIII", ifid, ticks >> 32, ticks & 0xFFFFFFFF, len(data),
                                             len(data)) + data, e))
    with open(path, "wb") as fh:
        fh.write(b"".join(out))


# ---------------------------------------------------------------- scripted conversations


@dataclass
class Conn:
    """One TCP connection; ``send`` returns an IP packet and keeps sequence numbers.

    Direction 0 is the client. By default a packet carries the next sequence number of its
    direction and acknowledges everything the other direction has sent.
    """

    client: tuple = ("10.0.0.1", 40000)
    server: tuple = ("10.0.0.2", 80)
    isn: tuple = (1000, 5000)
    v6: bool = False
    nxt: list = field(default_factory=list)
    ext: bytes = b""  # IPv6 extension headers placed before TCP
    ext_first: int = 6  # next-header value naming the first extension header
    ident: list = field(default_factory=lambda: [1, 1])  # next IPv4 ID per direction, as Linux counts

    def __post_init__(self):
        self.nxt = [self.isn[0], self.isn[1]]

    def send(self, d: int, flags: int = ACK, length: int = 0, *, seq=None, ack=None, win: int = 1000,
             opts: bytes = b"", advance: bool = True) -> bytes:
        src, dst = (self.client, self.server) if d == 0 else (self.server, self.client)
        s = self.nxt[d] if seq is None else seq
        a = self.nxt[1 - d] if ack is None else ack
        if not flags & ACK and ack is None:
            a = 0
        seg = tcp_segment(src[1], dst[1], s, a, flags, win, opts, b"\x00" * length)
        end = s + length + (1 if flags & (SYN | FIN) else 0)
        if advance and end - self.nxt[d] > 0:
            self.nxt[d] = end
        if self.v6:
            if self.ext:
                return ipv6(src[0], dst[0], seg, nxt=self.ext_first, ext=self.ext)
            return ipv6(src[0], dst[0], seg)
        ident, self.ident[d] = self.ident[d], self.ident[d] % 0xFFFF + 1
        return ipv4(src[0], dst[0], seg, ident=ident)

    def handshake(self, t: float, rtt: float = 0.01, ws=(7, 7), mss=(1460, 1460), win=(64240, 65160),
                  ack_win: int = 502):
        """SYN, SYN-ACK, ACK: three (time, packet) pairs."""
        o0 = opt_mss(mss[0]) + (opt_ws(ws[0]) if ws[0] is not None else b"")
        o1 = opt_mss(mss[1]) + (opt_ws(ws[1]) if ws[1] is not None else b"")
        return [(t, self.send(0, SYN, win=win[0], opts=o0)),
                (t + rtt / 2, self.send(1, SYN | ACK, win=win[1], opts=o1)),
                (t + rtt, self.send(0, ACK, win=ack_win))]


# ---------------------------------------------------------------- random conversations


def random_capture(seed: int, flows: int = 3, packets: int = 1500, v6_share: float = 0.3):
    """A capture of several interleaved connections doing everything the expert analysis
    looks at, at random: loss before and after the capture point, retransmissions of old
    and recent data, reordering, duplicate and SACK-carrying ACKs, ACKs of unseen data,
    zero windows and probes, window updates, keep-alives, retransmitted SYNs, port reuse,
    FIN/RST, missing handshakes, and time gaps around the 3 ms / 20 ms thresholds.

    Nothing here needs to be valid TCP: it only has to exercise the analysis, whose
    answers the tests take from tshark. Returns (time in ns, IP packet) pairs in order.
    """
    import random

    rnd = random.Random(seed)
    t = 1_700_000_000 * 1_000_000_000 + rnd.randrange(10**9)
    gaps = [0, 1_000, 200_000, 1_000_000, 2_900_000, 3_100_000, 10_000_000, 19_000_000, 21_000_000,
            50_000_000, 300_000_000]
    conns = []
    for i in range(flows):
        v6 = rnd.random() < v6_share
        cli = (f"fd00::{i + 1}" if v6 else f"10.0.{i}.1", 30000 + rnd.randrange(3) + i * 10)
        srv = (f"fd00::ff{i}" if v6 else f"10.0.{i}.2", 80 if rnd.random() < 0.5 else 443)
        isn = (rnd.choice([rnd.randrange(2**32), 2**32 - rnd.randrange(1, 5000), rnd.randrange(1, 100)]),
               rnd.randrange(2**32))
        conns.append({"c": Conn(client=cli, server=srv, isn=isn, v6=v6), "started": False,
                      "win": [rnd.choice([65535, 502, 8192]), rnd.choice([65535, 1024, 300])],
                      "sent": [[], []], "zero": [False, False], "ts": [rnd.randrange(2**32), rnd.randrange(2**32)]})
    out = []

    def emit(pkt, visible=True):
        nonlocal t
        t += rnd.choice(gaps) if rnd.random() < 0.7 else rnd.randrange(5_000_000)
        if visible:
            out.append((t, pkt))

    while len(out) < packets:
        st = rnd.choice(conns)
        c = st["c"]
        if not st["started"]:
            st["started"] = True
            if rnd.random() < 0.8:
                ws = (rnd.choice([None, 0, 7, 14]), rnd.choice([None, 0, 2, 7]))
                o0 = opt_mss(1460) + (opt_ws(ws[0]) if ws[0] is not None else b"") + opt_sack_perm()
                o1 = opt_mss(1400) + (opt_ws(ws[1]) if ws[1] is not None else b"") + opt_sack_perm()
                emit(c.send(0, SYN, win=64240, opts=o0), rnd.random() < 0.95)
                if rnd.random() < 0.2:
                    emit(c.send(0, SYN, win=64240, opts=o0, seq=c.isn[0]))  # SYN retransmission
                emit(c.send(1, SYN | ACK, win=65160, opts=o1), rnd.random() < 0.95)
                emit(c.send(0, ACK, win=st["win"][0]))
            continue
        d = rnd.randrange(2)
        r = rnd.random()
        opts = b""
        if rnd.random() < 0.3:
            st["ts"][d] += rnd.randrange(3)
            opts = nops(2) + opt_ts(st["ts"][d], st["ts"][1 - d])
        win = 0 if st["zero"][d] else st["win"][d]
        if r < 0.40:  # new data, maybe lost before the capture point
            length = rnd.choice([1, 100, 536, 1448, 1448, 1448, rnd.randrange(1, 3000)])
            st["sent"][d].append((c.nxt[d], length))
            emit(c.send(d, ACK | (PSH if rnd.random() < 0.3 else 0), length, win=win, opts=opts),
                 rnd.random() > 0.08)
        elif r < 0.50 and st["sent"][d]:  # retransmit something sent before
            seq, length = rnd.choice(st["sent"][d][-8:])
            emit(c.send(d, ACK, length, seq=seq, win=win, opts=opts))
        elif r < 0.75:  # ACK: cumulative, duplicate, partial, or beyond what was seen
            kind = rnd.random()
            other = st["sent"][1 - d]
            if kind < 0.5 or not other:
                ack = c.nxt[1 - d]
            elif kind < 0.8:
                ack = rnd.choice(other[-6:])[0]
            else:
                ack = c.nxt[1 - d] + rnd.choice([1, 1000])
            if other and rnd.random() < 0.3:
                blocks = []
                for _ in range(rnd.randrange(1, 5)):
                    s0, l0 = rnd.choice(other[-10:])
                    blocks.append((s0, s0 + l0))
                # With timestamps there is room for three blocks, without for four.
                opts = opts + nops(2) + opt_sack(blocks[:3 if opts else 4])
            emit(c.send(d, ACK, ack=ack, win=win, opts=opts[:40]))
        elif r < 0.80:  # the window closes or opens
            st["zero"][d] = not st["zero"][d] if rnd.random() < 0.7 else st["zero"][d]
            if not st["zero"][d] and rnd.random() < 0.5:
                st["win"][d] = rnd.choice([65535, 4096, 502, 1])
            emit(c.send(d, ACK, win=0 if st["zero"][d] else st["win"][d], opts=opts))
        elif r < 0.85:  # zero-window probe or keep-alive, and maybe their answer
            if rnd.random() < 0.5:
                emit(c.send(d, ACK, 1, win=win, opts=opts, advance=False))
            else:
                emit(c.send(d, ACK, rnd.choice([0, 1]), seq=c.nxt[d] - 1, win=win, opts=opts, advance=False))
            if rnd.random() < 0.7:
                emit(c.send(1 - d, ACK, win=0 if st["zero"][1 - d] else st["win"][1 - d]))
        elif r < 0.88:  # out of order: the newest segment again, after a newer one
            if st["sent"][d]:
                seq, length = st["sent"][d][-1]
                st["sent"][d].append((c.nxt[d], 100))
                emit(c.send(d, ACK, 100, win=win))
                emit(c.send(d, ACK, length, seq=seq, win=win))
        elif r < 0.90:  # FIN, sometimes retransmitted
            emit(c.send(d, FIN | ACK, win=win))
            if rnd.random() < 0.3:
                emit(c.send(d, FIN | ACK, seq=c.nxt[d] - 1, win=win))
        elif r < 0.91:  # RST, maybe with a stale sequence number
            emit(c.send(d, RST | ACK, seq=c.nxt[d] - rnd.choice([0, 0, 500]), win=0, advance=False))
        elif r < 0.92:  # the same ports again with a new ISN: Wireshark starts a new stream
            c.isn = (rnd.randrange(2**32), rnd.randrange(2**32))
            c.nxt = list(c.isn)
            st["sent"] = [[], []]
            st["zero"] = [False, False]
            st["started"] = False
        else:  # window update / plain ACK with a new window
            st["win"][d] = rnd.choice([65535, 32768, 1000, 2])
            emit(c.send(d, ACK, win=st["win"][d], opts=opts))
    return out


# ---------------------------------------------------------------- scripted transfers (diagnosis tests)


@dataclass
class Transfer:
    """A one-way transfer, client -> server, scripted round trip by round trip as a capture
    next to the sender sees it: the segments of a round go out back to back, their ACKs
    (one per segment) come back one round trip later, carrying the receiver's window.

        tr = Transfer(rtt=0.02)
        tr.rounds([20_000] * 30, rwnd=200_000)   # 30 round trips of 20 KB in flight
        write_pcap(path, tr.frames, linktype=101)
    """

    rtt: float = 0.02
    mss: int = 1448
    wscale: int | None = 7  # the receiver's (and the sender's) window scale; None: no option
    t: float = 1_700_000_000.0
    spacing: float = 20e-6  # time between back-to-back segments
    port: int = 40000  # the client's port: transfers with different ports are different flows
    frames: list = field(default_factory=list)

    def __post_init__(self):
        self.conn = Conn(client=("10.0.0.1", self.port), server=("10.0.0.2", 5001))
        ws = (self.wscale, self.wscale)
        packets = [raw for _, raw in self.conn.handshake(self.t, self.rtt, ws=ws, mss=(self.mss, self.mss),
                                                          win=(64240, 65160), ack_win=self._raw(64240))]
        # Next to the client: the SYN-ACK comes back a full round trip after the SYN.
        self.frames += list(zip((self.t, self.t + self.rtt, self.t + self.rtt + 1e-5), packets))
        self.t += self.rtt + 0.001

    def _raw(self, window: int) -> int:
        return min(window >> (self.wscale or 0), 65535)

    def _emit(self, d, **kw):
        self.frames.append((self.t, self.conn.send(d, **kw)))

    def round(self, window: int, *, rwnd: int = 1 << 20, rtt: float | None = None, lose: int | None = None,
              size: int | None = None, ack_delay: float = 0.0) -> None:
        """Send ``window`` bytes in MSS segments (or one segment of ``size``), then take their
        ACKs after ``rtt`` (+ ``ack_delay``). ``lose``: index of a segment the receiver never
        gets: later segments draw duplicate ACKs with SACK, then a fast retransmission."""
        rtt = self.rtt if rtt is None else rtt
        c = self.conn
        sizes = [size] if size is not None else [self.mss] * (window // self.mss) + (
            [window % self.mss] if window % self.mss else [])
        start, sent = self.t, []
        for n in sizes:
            sent.append((c.nxt[0], n))
            self._emit(0, flags=ACK | PSH, length=n, win=self._raw(64240))
            self.t += self.spacing
        self.t = start + rtt + ack_delay
        win = self._raw(rwnd)
        if lose is None:
            for seq, n in sent:
                self._emit(1, ack=seq + n, win=win)
                self.t += self.spacing
            return
        hole, hole_len = sent[lose]
        for seq, n in sent[:lose]:
            self._emit(1, ack=seq + n, win=win)
            self.t += self.spacing
        for seq, n in sent[lose + 1:]:
            self._emit(1, ack=hole, win=win, opts=nops(2) + opt_sack([(hole + hole_len, seq + n)]))
            self.t += self.spacing
        self._emit(0, flags=ACK, length=hole_len, seq=hole, win=self._raw(64240))  # fast retransmission
        self.t += rtt
        self._emit(1, ack=c.nxt[0], win=win)
        self.t += self.spacing

    def rounds(self, windows, **kw) -> None:
        for window in windows:
            self.round(window, **kw)

    def exchange(self, message: int, reply: int = 100, *, think: float = 0.0) -> None:
        """A request/response turn: one ``message`` from the client, then (one round trip and
        ``think`` later) the server's ``reply``, which carries the ACK; the client answers at once."""
        self._emit(0, flags=ACK | PSH, length=message, win=self._raw(64240))
        self.t += self.rtt + think
        self._emit(1, flags=ACK | PSH, length=reply, win=self._raw(1 << 20))
        self.t += 1e-4

    def idle(self, seconds: float) -> None:
        """The application gives TCP nothing for a while (everything sent is ACKed)."""
        self.t += seconds

    def zero_window(self, window: int, closed_s: float, probe_every: float = 0.2) -> None:
        """A round whose last ACK closes the window; Linux-style probes (empty, one byte
        below the window) until the receiver reopens it with a window update."""
        self.round(window, rwnd=window)
        self.frames[-1] = (self.frames[-1][0], self.conn.send(1, win=0, seq=self.conn.nxt[1], advance=False))
        start = self.t
        probes = round(closed_s / probe_every) - 1  # the last one would meet the update
        for k in range(1, probes + 1):
            self.t = start + k * probe_every
            self._emit(0, seq=self.conn.nxt[0] - 1, win=self._raw(64240), advance=False)
            self.t += self.rtt / 2
            self._emit(1, win=0)
        self.t = start + closed_s
        self._emit(1, win=self._raw(window))
        self.t += 0.0005

    def clocked(self, window: int, segments: int, *, rwnd: int = 1 << 20) -> None:
        """Steady ACK clocking with ``window`` bytes in flight: after a first burst, each
        ACK (one round trip after its segment) lets exactly one new segment out."""
        c = self.conn
        outstanding = []  # (time sent, end seq)
        for _ in range(window // self.mss):
            self._emit(0, flags=ACK | PSH, length=self.mss, win=self._raw(64240))
            outstanding.append((self.t, c.nxt[0]))
            self.t += self.spacing
        for i in range(segments + len(outstanding)):
            sent_at, end = outstanding.pop(0)
            self.t = max(self.t, sent_at + self.rtt)
            self._emit(1, ack=end, win=self._raw(rwnd))
            if i < segments:
                self.t += 1e-6
                self._emit(0, flags=ACK | PSH, length=self.mss, win=self._raw(64240))
                outstanding.append((self.t, c.nxt[0]))
            self.t += 1e-6


# ---------------------------------------------------------------- many interleaved flows (tcplab diagnose --all)

#: The kinds of connection :func:`many_flows` mixes, and how often each comes (weights).
FLOW_KINDS = {"request-response": 6, "bulk": 2, "loss": 2, "zero-window": 1, "tiny": 2, "idle": 2}


def flow_template(kind: str, variant: int = 0) -> list[tuple[float, bytes]]:
    """One scripted connection of ``kind`` (see :data:`FLOW_KINDS`), seen at the client:
    (seconds from its first packet, IP packet) pairs; ``variant`` varies its round trip and
    sizes. Client 10.0.0.1:40000, server 10.0.0.2:5001: :func:`many_flows` moves copies."""
    rtt = (0.002, 0.01, 0.03, 0.08)[variant % 4]
    tr = Transfer(rtt=rtt, t=0.0)
    n = 3 + variant % 3
    if kind == "request-response":  # small messages taking turns with think time
        for _ in range(n):
            tr.exchange(300 + 100 * variant, 2000, think=0.02)
    elif kind == "bulk":  # round trips pinned by the receiver's window, past slow start
        tr.rounds([2 * tr.mss] * (6 + n), rwnd=2 * tr.mss)
    elif kind == "loss":  # a segment lost in the middle round
        tr.round(6 * tr.mss)
        tr.round(6 * tr.mss, lose=2)
        tr.round(6 * tr.mss)
    elif kind == "zero-window":  # the reader stops: the window closes for a second, probes, update
        tr.round(4 * tr.mss, rwnd=16 * tr.mss)
        tr.zero_window(4 * tr.mss, 1.0 + 0.2 * variant)
        tr.round(2 * tr.mss)
    elif kind == "tiny":  # one request, one answer
        tr.exchange(100, 200)
    elif kind == "idle":  # the application pauses between bursts
        for _ in range(n):
            tr.round(2 * tr.mss)
            tr.idle(0.2)
    else:
        raise ValueError(f"no flow kind {kind!r}: one of {', '.join(FLOW_KINDS)}")
    return [(t, raw) for t, raw in tr.frames]


def _fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _moved(raw: bytes, client_ip: bytes, port: int, outbound: bool) -> bytes:
    """``raw`` (an IPv4/TCP packet of a template) with the client's address and port replaced,
    both checksums updated incrementally (RFC 1624), so checkers still find them right."""
    b = bytearray(raw)
    ip_at, port_at = (12, 20) if outbound else (16, 22)
    old = struct.unpack_from("!HHH", b, ip_at)[:2] + struct.unpack_from("!H", b, port_at)
    new = struct.unpack("!HH", client_ip) + (port,)
    b[ip_at:ip_at + 4] = client_ip
    struct.pack_into("!H", b, port_at, port)
    ip_sum = ~struct.unpack_from("!H", b, 10)[0] & 0xFFFF
    tcp_sum = ~struct.unpack_from("!H", b, 36)[0] & 0xFFFF
    for o, n in zip(old[:2], new[:2]):  # the address is in the IP header and the pseudo-header
        ip_sum += (~o & 0xFFFF) + n
        tcp_sum += (~o & 0xFFFF) + n
    tcp_sum += (~old[2] & 0xFFFF) + new[2]
    struct.pack_into("!H", b, 10, ~_fold(ip_sum) & 0xFFFF)
    struct.pack_into("!H", b, 36, ~_fold(tcp_sum) & 0xFFFF)
    return bytes(b)


def many_flows(path, flows: int, *, seed: int = 0, rate: float = 1000.0, snaplen: int = 96) -> dict:
    """A raw-IP pcap of ``flows`` connections of the kinds in :data:`FLOW_KINDS` (drawn by their
    weights; about 20 packets each), starting at random at ``rate`` per second so hundreds are
    open at once, their packets interleaved in time order. Each is a copy of a scripted
    template moved to its own client address and port; payload beyond ``snaplen`` bytes is not
    stored (as ``tcpdump -s``), which keeps a million packets near 100 MB. Returns packets,
    flows and the kind of each flow (flow k is the k-th to start)."""
    import random

    import numpy as np

    rnd = random.Random(seed)
    templates = {(kind, v): flow_template(kind, v) for kind in FLOW_KINDS for v in range(4)}
    kinds = rnd.choices(list(FLOW_KINDS), weights=list(FLOW_KINDS.values()), k=flows)
    keys = [(kind, rnd.randrange(4)) for kind in kinds]
    starts = sorted(rnd.uniform(0, flows / rate) for _ in range(flows))
    # (time in µs, flow, packet of its template) for every packet, then time order.
    times, owner, index = [], [], []
    for k, (key, start) in enumerate(zip(keys, starts)):
        tpl = templates[key]
        times.append(np.round((start + np.array([t for t, _ in tpl])) * 1e6).astype(np.int64))
        owner.append(np.full(len(tpl), k, np.int64))
        index.append(np.arange(len(tpl)))
    t_all, o_all, i_all = np.concatenate(times), np.concatenate(owner), np.concatenate(index)
    order = np.argsort(t_all, kind="stable")
    base_us = 1_700_000_000 * 1_000_000
    ips = {}
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 101))
        out = []
        for t, k, i in zip(t_all[order].tolist(), o_all[order].tolist(), i_all[order].tolist()):
            raw = templates[keys[k]][i][1]
            ip = ips.get(k // 60000) or ips.setdefault(k // 60000, socket.inet_aton(f"10.1.{k // 60000}.1"))
            moved = _moved(raw, ip, 1024 + k % 60000, outbound=raw[12:16] == b"\x0a\x00\x00\x01")
            ts = base_us + t
            out.append(struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, min(len(moved), snaplen), len(moved))
                       + moved[:snaplen])
            if len(out) >= 65536:
                fh.write(b"".join(out))
                out.clear()
        fh.write(b"".join(out))
    return {"packets": int(len(t_all)), "flows": flows, "kinds": kinds}


# ---------------------------------------------------------------- one transfer seen from both ends


@dataclass
class TwoSided:
    """A one-way transfer, client -> server, scripted once and written as both ends capture it:
    every packet leaves one end and reaches the other ``delay`` later (plus its wait behind a
    bottleneck of ``rate`` bit/s, data only). The server acknowledges each segment as it arrives,
    with its advertised window and a timestamp (ms) that the client echoes from then on; the
    client sends each round's segments back to back when the ACKs of the round before reach it.

        two = TwoSided(delay=0.01, rate=20e6)
        two.rounds([30 * 1448] * 40, rwnd=1 << 20)
        two.write(tmp_path)   # -> (sender.pcap, receiver.pcap)
    """

    delay: float = 0.01  # one way, each direction
    rate: float | None = None  # the bottleneck toward the server (None: none)
    mss: int = 1448
    wscale: int | None = 7
    t: float = 1_700_000_000.0
    spacing: float = 10e-6  # the sender's back-to-back segments
    queue_extra: float = 0.0  # added to every data segment's trip (a standing queue ahead)
    sent: list = field(default_factory=list)  # (time at the sender, time at the receiver, IP packet)

    def __post_init__(self):
        self.conn = Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 5001))
        self.link_free = 0.0  # when the bottleneck has sent everything queued so far
        self.ts_seen = 0  # the server's latest timestamp the client has (it echoes this)
        ws = (self.wscale, self.wscale)
        o0 = opt_mss(self.mss) + (opt_ws(ws[0]) if ws[0] is not None else b"") + nops(2) + opt_ts(1, 0)
        o1 = opt_mss(self.mss) + (opt_ws(ws[1]) if ws[1] is not None else b"") + nops(2) + opt_ts(self._tick(), 1)
        self._out(0, self.t, self.conn.send(0, SYN, win=64240, opts=o0))
        self._out(1, self.t + self.delay, self.conn.send(1, SYN | ACK, win=65160, opts=o1))
        self.ts_seen = self._tick(self.t + self.delay)
        self._out(0, self.t + 2 * self.delay, self.conn.send(0, ACK, win=self._raw(64240), opts=self._ts0()))
        self.t += 2 * self.delay + 0.001

    def _tick(self, when: float | None = None) -> int:
        return int(((self.t if when is None else when) - 1_699_999_999.0) * 1000)

    def _raw(self, window: int) -> int:
        return min(window >> (self.wscale or 0), 65535)

    def _ts0(self) -> bytes:
        return nops(2) + opt_ts(self._tick(), self.ts_seen)

    def _data(self, when: float, length: int, *, seq: int | None = None, lost: bool = False) -> float:
        """A data segment sent at ``when``; returns its arrival at the server (``lost``: it
        never arrives, and only the sender's capture holds it)."""
        raw = self.conn.send(0, ACK | PSH, length, seq=seq, win=self._raw(64240),
                             opts=nops(2) + opt_ts(self._tick(when), self.ts_seen))
        arrive = when + self.delay + self.queue_extra
        if self.rate:
            arrive = max(arrive, self.link_free) + 8 * (length + 52) / self.rate
            self.link_free = arrive
        self._out(0, when, raw, arrive=None if lost else arrive)
        return arrive

    def _out(self, d: int, when: float, raw: bytes, *, arrive: float | None = -1.0) -> None:
        """A packet that leaves end ``d`` at ``when`` and reaches the other end at ``arrive``
        (default: ``delay`` later; None: never)."""
        at = when + self.delay if arrive == -1.0 else arrive
        self.sent.append((when, at, raw) if d == 0 else (at, when, raw))

    def _ack(self, arrive: float, ack: int, rwnd: int, echo: float, sack=None) -> float:
        """The server's ACK of a segment that arrived at ``arrive``; returns when it reaches the client."""
        opts = nops(2) + opt_ts(self._tick(arrive), self._tick(echo))
        if sack:
            opts += nops(2) + opt_sack([sack])
        self._out(1, arrive + 1e-5, self.conn.send(1, ack=ack, win=self._raw(rwnd), opts=opts, advance=False))
        self.ts_seen = self._tick(arrive)
        return arrive + 1e-5 + self.delay

    def round(self, window: int, *, rwnd: int = 1 << 20, lose: int | None = None) -> None:
        """``window`` bytes in MSS segments out back to back; the server ACKs each as it arrives
        (a lost one, ``lose``, draws duplicate ACKs with SACK and is resent when they reach the
        client); the next round starts when the last ACK reaches the client."""
        c = self.conn
        sizes = [self.mss] * (window // self.mss) + ([window % self.mss] if window % self.mss else [])
        sent, now = [], self.t
        for k, n in enumerate(sizes):
            seq = c.nxt[0]
            sent.append((self._data(now, n, lost=k == lose), seq, n, now))
            now += self.spacing
        last = now
        for k, (arrive, seq, n, when) in enumerate(sent):
            if k == lose:
                continue
            if lose is None or k < lose:
                last = self._ack(arrive, seq + n, rwnd, when)
            else:
                hole = sent[lose]
                last = self._ack(arrive, hole[1], rwnd, when, sack=(hole[1] + hole[2], seq + n))
        if lose is not None:  # the resend goes out when the duplicate ACKs reach the client
            _, seq, n, _ = sent[lose]
            arrive = self._data(last + 1e-5, n, seq=seq)
            last = self._ack(arrive, c.nxt[0], rwnd, last + 1e-5)
        self.t = last + 1e-5

    def rounds(self, windows, **kw) -> None:
        for window in windows:
            self.round(window, **kw)

    def clocked(self, window: int, segments: int, *, rwnd: int = 1 << 20) -> None:
        """ACK clocking with ``window`` bytes in flight: a first burst, then each ACK reaching
        the client lets one new segment out; behind the bottleneck (``rate``), a window above
        the path's BDP keeps a standing queue of the rest."""
        c = self.conn
        pending, now = [], self.t
        for _ in range(window // self.mss):
            pending.append((self._data(now, self.mss), c.nxt[0], now))
            now += self.spacing
        last, more = now, segments
        while pending:
            arrive, end, when = pending.pop(0)
            last = self._ack(arrive, end, rwnd, when)
            if more:
                more -= 1
                send = last + 1e-6
                pending.append((self._data(send, self.mss), c.nxt[0], send))
        self.t = last + 1e-5

    def write(self, folder) -> tuple[Path, Path]:
        """The sender's capture and the receiver's, raw IP, each in its own time order."""
        paths = (Path(folder) / "sender.pcap", Path(folder) / "receiver.pcap")
        for side, path in enumerate(paths):
            write_pcap(path, sorted(((p[side], p[2]) for p in self.sent if p[side] is not None), key=lambda x: x[0]),
                       linktype=101)
        return paths
