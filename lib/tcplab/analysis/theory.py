"""What TCP on Linux should achieve: the small formulas the diagnosis holds measurements against.

Units everywhere: sizes in bytes, times in seconds, rates in bit/s. Each function names the
rule it follows (RFC, man page, or kernel source file and function) so a prediction can be
traced to its source. Inputs are checked first: a value outside the accepted range raises
:class:`~tcplab.units.ParameterError` naming the parameter.

The kernel constants below are those of Linux 6.x on x86_64 (``include/net/tcp.h``,
``include/net/sock.h``); the socket-buffer floors depend on ``sizeof(struct sk_buff)`` and
are checked against the running kernel by the tests.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

from ..units import ParameterError

__all__ = [
    "ETHERNET_HEADER", "IPV4_HEADER", "TCP_HEADER", "TCP_TIMESTAMP_OPTION", "TCP_INIT_CWND", "CUBIC_BETA",
    "TCP_DELACK_MIN", "TCP_DELACK_MAX", "TCP_ATO_MIN", "TCP_RMEM_TO_WIN_SCALE", "TCP_DEFAULT_SCALING_RATIO",
    "SOCK_MIN_SNDBUF", "SOCK_MIN_RCVBUF", "INT_MAX",
    "bdp", "window_limited_throughput", "effective_sndbuf", "effective_rcvbuf", "window_from_space",
    "window_from_space_scaling_ratio", "window_from_space_on", "uses_scaling_ratio", "kernel_version",
    "SCALING_RATIO_SINCE", "rwnd_limited_throughput", "initial_window", "mss_for_mtu", "line_ceiling",
    "max_goodput", "transfer_time", "mathis_throughput", "NagleVerdict", "nagle_stall",
]

ETHERNET_HEADER = 14  # what a Linux qdisc (and tcpdump) counts per frame: no preamble, FCS or gap
IPV4_HEADER = 20
TCP_HEADER = 20
TCP_TIMESTAMP_OPTION = 12  # 10-byte option + 2 NOPs, as Linux aligns it (RFC 7323)

#: Initial congestion window in segments (include/net/tcp.h TCP_INIT_CWND; RFC 6928).
TCP_INIT_CWND = 10
#: cubic's multiplicative decrease: at a loss ssthresh = cwnd × 717/1024 (``beta`` in
#: net/ipv4/tcp_cubic.c, since 2.6.19; RFC 9438 says 0.7).
CUBIC_BETA = 717 / 1024
#: Minimum delayed-ACK timeout, HZ/25 (include/net/tcp.h TCP_DELACK_MIN); also TCP_ATO_MIN.
TCP_DELACK_MIN = 0.040
TCP_ATO_MIN = 0.040
#: Cap of the delayed-ACK timeout in ping-pong mode, HZ/5 (include/net/tcp.h TCP_DELACK_MAX).
TCP_DELACK_MAX = 0.200
#: tcp_win_from_space() since Linux 6.6: window = space * scaling_ratio >> 8 (include/linux/tcp.h).
TCP_RMEM_TO_WIN_SCALE = 8
#: 50 % until a real skb len/truesize ratio is learned (commit 697a6c8cec03, "tcp: increase the
#: default TCP scaling ratio"; 6.6 to 6.10 started at 1200/SKB_TRUESIZE(4096), about 25 %).
TCP_DEFAULT_SCALING_RATIO = 1 << (TCP_RMEM_TO_WIN_SCALE - 1)
#: include/net/sock.h: TCP_SKB_MIN_TRUESIZE = 2048 + SKB_DATA_ALIGN(sizeof(struct sk_buff)),
#: 2048 + 256 on x86_64; SOCK_MIN_SNDBUF is twice that, SOCK_MIN_RCVBUF once.
SOCK_MIN_RCVBUF = 2048 + 256
SOCK_MIN_SNDBUF = 2 * SOCK_MIN_RCVBUF
INT_MAX = 2**31 - 1


# ------------------------------------------------------------------ input checks


def _number(name: str, value, accepted: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ParameterError(name, value, accepted, "not a finite number")
    return float(value)


def _positive(name: str, value, unit: str):
    accepted = f"a number above 0 ({unit})"
    number = _number(name, value, accepted)
    if number <= 0:
        raise ParameterError(name, value, accepted, "out of range")
    return number


def _non_negative(name: str, value, unit: str):
    accepted = f"a number at least 0 ({unit})"
    number = _number(name, value, accepted)
    if number < 0:
        raise ParameterError(name, value, accepted, "out of range")
    return number


def _whole(name: str, value, low: int, high: int, what: str) -> int:
    accepted = f"a whole number from {low} to {high} ({what})"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(name, value, accepted, "not a whole number")
    if not low <= value <= high:
        raise ParameterError(name, value, accepted, "out of range")
    return int(value)


# ------------------------------------------------------------------ pipes and windows


def bdp(rate_bps: float, rtt_s: float) -> float:
    """Bandwidth-delay product in bytes: what must be in flight to keep the link busy."""
    rate_bps = _positive("rate", rate_bps, "bit/s")
    rtt_s = _non_negative("rtt", rtt_s, "seconds")
    return rate_bps * rtt_s / 8


def window_limited_throughput(window_bytes: float, rtt_s: float, rate_bps: float | None = None) -> float:
    """At most one window per round trip: ``min(rate, 8 * window / rtt)`` in bit/s.

    The window is whichever is smallest of the peer's receive window, the congestion window
    and what the send buffer can hold; ``rate_bps=None`` means no link limit.
    """
    window_bytes = _non_negative("window", window_bytes, "bytes")
    rtt_s = _positive("rtt", rtt_s, "seconds")
    limit = 8 * window_bytes / rtt_s
    if rate_bps is None:
        return limit
    return min(_positive("rate", rate_bps, "bit/s"), limit)


def _effective_buffer(name: str, requested: int, sysctl_max: int, floor: int, force: bool) -> int:
    requested = _whole(name, requested, -2**31, INT_MAX, "bytes, a C int as setsockopt takes it")
    sysctl_max = _whole(f"{name}_max", sysctl_max, 0, INT_MAX, "bytes, from /proc/sys/net/core")
    # net/core/sock.c sk_setsockopt: min_t(u32, val, sysctl_*mem_max), so a negative int
    # (a huge u32) is clamped to the maximum; SO_*BUFFORCE skips that clamp.
    val = requested if force else (sysctl_max if requested < 0 else min(requested, sysctl_max))
    if val < 0:  # SO_*BUFFORCE with a negative int: the kernel reads it as 0
        val = 0
    # The doubling leaves room for sk_buff overhead ("struct sk_buff" etc.; man 7 socket).
    return max(min(val, INT_MAX // 2) * 2, floor)


def effective_sndbuf(requested: int, wmem_max: int, *, force: bool = False) -> int:
    """``sk_sndbuf`` after ``setsockopt(SO_SNDBUF, requested)``, as ``getsockopt`` reports it.

    net/core/sock.c, ``sk_setsockopt`` case SO_SNDBUF: the request is clamped to
    ``net.core.wmem_max`` (not with SO_SNDBUFFORCE), doubled, and raised to SOCK_MIN_SNDBUF
    (4608 bytes on x86_64). man 7 socket: "The kernel doubles this value (to allow space for
    bookkeeping overhead)". Setting it also sets SOCK_SNDBUF_LOCK in ``sk_userlocks``, which
    turns off send-buffer autotuning (``tcp_sndbuf_expand`` in net/ipv4/tcp_input.c checks it),
    so the socket keeps this size; ``net.ipv4.tcp_wmem`` no longer applies.
    """
    return _effective_buffer("sndbuf", requested, wmem_max, SOCK_MIN_SNDBUF, force)


def effective_rcvbuf(requested: int, rmem_max: int, *, force: bool = False) -> int:
    """``sk_rcvbuf`` after ``setsockopt(SO_RCVBUF, requested)``, as ``getsockopt`` reports it.

    net/core/sock.c, ``sk_setsockopt`` then ``__sock_set_rcvbuf``: clamped to
    ``net.core.rmem_max`` (not with SO_RCVBUFFORCE), doubled, raised to SOCK_MIN_RCVBUF (2304
    bytes on x86_64). Sets SOCK_RCVBUF_LOCK, which stops receive autotuning
    (``tcp_rcv_space_adjust`` in net/ipv4/tcp_input.c skips locked sockets). Set before
    ``connect``/``listen`` it also fixes the window scale offered in the SYN (man 7 tcp).
    The advertised window is only part of it: see :func:`window_from_space_scaling_ratio`.
    """
    return _effective_buffer("rcvbuf", requested, rmem_max, SOCK_MIN_RCVBUF, force)


def window_from_space(space: int, adv_win_scale: int = 1) -> int:
    """Receive window for ``space`` bytes of receive buffer, the rule of kernels before 6.6.

    ``tcp_win_from_space`` (include/net/tcp.h, up to 6.5) kept 1/2^scale of the buffer for
    overhead: ``space - (space >> scale)`` for ``net.ipv4.tcp_adv_win_scale`` > 0 (default 1:
    half the buffer), ``space >> -scale`` otherwise.

    Linux 6.6 removed this rule (commit dfa2f0483360, "tcp: get rid of
    sysctl_tcp_adv_win_scale", Eric Dumazet, 2023); the sysctl still exists but is ignored
    (Documentation/networking/ip-sysctl.rst: "Obsolete since linux-6.6"). Modern kernels use
    :func:`window_from_space_scaling_ratio`.
    """
    space = _whole("space", space, 0, INT_MAX, "bytes")
    adv_win_scale = _whole("adv_win_scale", adv_win_scale, -31, 31, "net.ipv4.tcp_adv_win_scale")
    if adv_win_scale <= 0:
        return space >> -adv_win_scale
    return space - (space >> adv_win_scale)


def window_from_space_scaling_ratio(space: int, scaling_ratio: int = TCP_DEFAULT_SCALING_RATIO) -> int:
    """Receive window for ``space`` bytes of receive buffer, the rule since Linux 6.6.

    ``__tcp_win_from_space`` (include/net/tcp.h): ``space * scaling_ratio >> 8``. The ratio is
    per socket: it starts at TCP_DEFAULT_SCALING_RATIO (128, half the buffer) and
    ``tcp_measure_rcv_mss`` (net/ipv4/tcp_input.c) replaces it with ``(skb->len << 8) /
    skb->truesize`` of received full-sized segments, i.e. the payload share of the memory
    the driver really uses (often 60 to 70 % on Ethernet, less on veth with small pages).
    ``scaling_ratio`` accepts 1 to 256 (256: payload equal to truesize).
    """
    space = _whole("space", space, 0, INT_MAX, "bytes")
    scaling_ratio = _whole("scaling_ratio", scaling_ratio, 1, 1 << TCP_RMEM_TO_WIN_SCALE, "skb len/truesize in 1/256")
    return (space * scaling_ratio) >> TCP_RMEM_TO_WIN_SCALE


#: The first kernel whose receive window follows the per-socket ``scaling_ratio``
#: (commit dfa2f0483360) instead of ``net.ipv4.tcp_adv_win_scale``.
SCALING_RATIO_SINCE = (6, 6)


def kernel_version(release: str) -> tuple[int, int]:
    """(major, minor) of a kernel release string such as "6.1.176" or "6.18.44-fc-v669"."""
    parts = str(release).split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) if len(parts) > 1 else "0")
    except (ValueError, IndexError):
        raise ValueError(f"release: {release!r} is not a kernel release such as 6.1.176") from None


def scaling_ratio_from_clamp(window_clamp: int, rcvbuf: int) -> int | None:
    """The ``scaling_ratio`` a 6.6+ receiver's window clamp was set with, for a fixed buffer.

    When ``tcp_measure_rcv_mss`` learns a new ratio it sets ``window_clamp`` to
    ``tcp_win_from_space(sk_rcvbuf)`` (:func:`window_from_space_scaling_ratio`), so the ratio
    is the one whose window of ``rcvbuf`` (``sk_rcvbuf``, what getsockopt(SO_RCVBUF) returns)
    is the clamp: the smallest such, or None where none is (the clamp came from elsewhere:
    autotuning grew the buffer, memory pressure shrank the clamp, a route's window)."""
    window_clamp = _whole("window_clamp", window_clamp, 0, INT_MAX, "bytes")
    rcvbuf = _whole("rcvbuf", rcvbuf, 1, INT_MAX, "bytes")
    ratio = -(-(window_clamp << TCP_RMEM_TO_WIN_SCALE) // rcvbuf)  # the smallest that can give it
    if 1 <= ratio <= 1 << TCP_RMEM_TO_WIN_SCALE and window_from_space_scaling_ratio(rcvbuf, ratio) == window_clamp:
        return ratio
    return None


def uses_scaling_ratio(release: str) -> bool:
    """Whether kernel ``release`` sizes the receive window by ``scaling_ratio`` (6.6 and later)
    rather than by ``tcp_adv_win_scale`` (before 6.6)."""
    return kernel_version(release) >= SCALING_RATIO_SINCE


def window_from_space_on(release: str, space: int, *, adv_win_scale: int = 1,
                         scaling_ratio: int = TCP_DEFAULT_SCALING_RATIO) -> int:
    """Receive window for ``space`` bytes of buffer under kernel ``release``'s own rule:
    :func:`window_from_space_scaling_ratio` from 6.6 on, :func:`window_from_space` before."""
    if uses_scaling_ratio(release):
        return window_from_space_scaling_ratio(space, scaling_ratio)
    return window_from_space(space, adv_win_scale)


def rwnd_limited_throughput(rcvbuf_effective: int, rtt_s: float, rate_bps: float | None = None, *,
                            scaling_ratio: int = TCP_DEFAULT_SCALING_RATIO) -> float:
    """Throughput (bit/s) when the receiver's buffer is the limit.

    ``rcvbuf_effective`` is ``sk_rcvbuf`` (what getsockopt(SO_RCVBUF) returns, see
    :func:`effective_rcvbuf`); the window it allows is
    :func:`window_from_space_scaling_ratio` of it, one window per round trip.
    """
    window = window_from_space_scaling_ratio(rcvbuf_effective, scaling_ratio)
    return window_limited_throughput(window, rtt_s, rate_bps)


# ------------------------------------------------------------------ segments and goodput


def mss_for_mtu(mtu: int = 1500, ts: bool = True) -> int:
    """Payload bytes per IPv4 segment: MTU - IP - TCP headers - timestamp option if used."""
    mtu = _whole("mtu", mtu, 68 + TCP_HEADER, 65535, "bytes")
    return mtu - IPV4_HEADER - TCP_HEADER - (TCP_TIMESTAMP_OPTION if ts else 0)


def initial_window(mss: int, initcwnd: int = TCP_INIT_CWND) -> int:
    """Bytes a new connection may send before its first ACK: ``initcwnd * mss``.

    RFC 6928 raised the initial window to 10 segments; Linux uses TCP_INIT_CWND = 10
    (include/net/tcp.h) unless a route sets ``initcwnd`` (ip-route(8)).
    """
    mss = _whole("mss", mss, 1, 65535, "bytes")
    initcwnd = _whole("initcwnd", initcwnd, 1, 65535, "segments")
    return initcwnd * mss


def max_goodput(rate_bps: float, mtu: int = 1500, ts: bool = True, *, link_overhead: int = ETHERNET_HEADER) -> float:
    """Best application-level throughput (bit/s) on a link of ``rate_bps``.

    Each full segment carries :func:`mss_for_mtu` payload bytes in ``mtu + link_overhead``
    bytes on the link: 1448/1514 of the rate with timestamps (net.ipv4.tcp_timestamps=1,
    Linux's default), 1460/1514 without. ``link_overhead`` is what the shaper counts beyond
    the IP packet: 14 for the Ethernet header as a Linux qdisc sees it (a physical wire adds
    24 more for preamble, FCS and inter-frame gap).
    """
    rate_bps = _positive("rate", rate_bps, "bit/s")
    link_overhead = _whole("link_overhead", link_overhead, 0, 1024, "bytes")
    return rate_bps * mss_for_mtu(mtu, ts) / (mtu + link_overhead)


def line_ceiling(rate_bps: float, span_s: float, mtu: int = 1500, ts: bool = True, *, late_s: float = 0.0,
                 link_overhead: int = ETHERNET_HEADER) -> float:
    """The most payload (bit/s) a rate measured over ``span_s`` seconds past a transfer's start on
    a line of ``rate_bps`` can show: the line's payload ceiling (:func:`max_goodput`) plus the
    measurement's resolution. One segment over the span: where the span's ends fall between the
    ACKs or reads that count its bytes, one segment more or less lands inside. And the timing of
    those ends: a packet seen up to ``late_s`` after it left the line (the delay line's worst
    lateness in the run, which it records; 0 where nothing between the line and the capture
    keeps time) makes the measured span up to ``late_s`` shorter than the line's, so the rate up
    to ``late_s / span_s`` higher. A rate measured from a transfer's first byte may be higher by
    what the shaper's full bucket let out at once."""
    span_s = _positive("span", span_s, "s")
    late_s = _non_negative("late", late_s, "s")
    line = max_goodput(rate_bps, mtu, ts, link_overhead=link_overhead)
    return line * (1 + late_s / span_s) + 8 * mss_for_mtu(mtu, ts) / span_s


# ------------------------------------------------------------------ whole transfers


def transfer_time(size: int, rate_bps: float, rtt_s: float, *, window: int | None = None, mss: int = 1448,
                  initcwnd: int = TCP_INIT_CWND) -> float:
    """Predicted seconds from ``connect()`` until the sender has the ACK of the last byte.

    An idealised loss-free transfer in rounds of one RTT:

    * the handshake costs one RTT (the data leaves with or after the third packet);
    * slow start: each round sends the congestion window, which starts at
      :func:`initial_window` and doubles per round (RFC 5681; Linux counts ACKed bytes, so
      delayed ACKs do not slow this down), never above ``window`` (the receive window or
      what the send buffer holds; ``None``: no such limit);
    * a round lasts ``max(rtt, bytes * 8 / rate)``: ACK-clocked while the window is below
      the bandwidth-delay product, link-bound above it, so the steady state is
      :func:`window_limited_throughput`;
    * the last round lasts ``rtt + bytes * 8 / rate``: its last byte must be sent, cross the
      path and be acknowledged.

    Not modelled: loss and queueing, the congestion-control algorithm's own pacing (BBR's
    startup is close to doubling per round), delayed-ACK and Nagle stalls
    (:func:`nagle_stall`), headers (use :func:`max_goodput` as ``rate_bps`` for payload rate).
    The receiver holds the last byte half an RTT earlier.
    """
    size = _whole("size", size, 0, 2**62, "bytes")
    rate_bps = _positive("rate", rate_bps, "bit/s")
    rtt_s = _positive("rtt", rtt_s, "seconds")
    if window is not None:
        window = _whole("window", window, 1, 2**62, "bytes")
    cwnd = initial_window(mss, initcwnd)
    elapsed = rtt_s  # SYN, SYN-ACK
    remaining = size
    while remaining > 0:
        sent = min(cwnd if window is None else min(cwnd, window), remaining)
        remaining -= sent
        serialise = sent * 8 / rate_bps
        elapsed += rtt_s + serialise if remaining == 0 else max(rtt_s, serialise)
        cwnd *= 2
    return elapsed


def mathis_throughput(mss: int, rtt_s: float, loss_fraction: float, c: float = math.sqrt(3 / 2)) -> float:
    """Loss-limited throughput (bit/s) of Reno-style congestion avoidance: ``mss/rtt * C/sqrt(p)``.

    Mathis, Semke, Mahdavi, Ott, "The Macroscopic Behavior of the TCP Congestion Avoidance
    Algorithm", ACM CCR 27(3), 1997; ``C = sqrt(3/2)`` for an ACK per segment and periodic
    loss (``sqrt(3/4)`` with delayed ACKs counted per packet). ``loss_fraction`` is a
    fraction (0.01 for 1 %); 0 gives infinity: the model sets no limit without loss. CUBIC
    and BBR do better than this at high BDP (BBR does not react to loss as such).
    """
    mss = _whole("mss", mss, 1, 65535, "bytes")
    rtt_s = _positive("rtt", rtt_s, "seconds")
    c = _positive("c", c, "dimensionless")
    accepted = "a fraction from 0 to 1 (0.01 for 1 %)"
    if not 0 <= _number("loss", loss_fraction, accepted) <= 1:
        raise ParameterError("loss", loss_fraction, accepted, "out of range")
    if loss_fraction == 0:
        return math.inf
    return 8 * mss / rtt_s * c / math.sqrt(loss_fraction)


# ------------------------------------------------------------------ Nagle and delayed ACKs


@dataclass(frozen=True)
class NagleVerdict:
    """Whether a request written as several ``write()`` calls waits on Nagle's algorithm.

    ``stalls``: a sub-MSS segment is held until the receiver's delayed-ACK timer fires.
    ``expected_delay_s``: time added to the request's delivery compared with TCP_NODELAY
    (0 when nothing is held; one RTT when an immediate ACK releases it; the delayed-ACK
    timeout plus one RTT when the delayed ACK does). ``reason``: a short code, explained in
    the course text: ``nodelay``, ``full_segments`` (every segment is full-sized),
    ``no_small_outstanding`` (Minshall: the only small segment goes out at once),
    ``held_until_ack`` (held one RTT, the ACK comes at once), ``held_until_delayed_ack``.
    ``held_bytes``: bytes Nagle held back; ``held_from_write``: the write they started in.
    """

    stalls: bool
    expected_delay_s: float
    reason: str
    held_bytes: int = 0
    held_from_write: int | None = None


def nagle_stall(writes: Sequence[int], mss: int, nodelay: bool = False, *, rtt_s: float = 0.0,
                receiver_quickack: bool = False, delack_s: float = TCP_DELACK_MIN,
                variant: str = "minshall") -> NagleVerdict:
    """Does a request sent as ``writes`` (bytes per ``write()``, back to back) stall?

    The sender follows Linux's Nagle test, Minshall's variant (net/ipv4/tcp_output.c,
    ``tcp_nagle_check`` and ``tcp_minshall_check``): full-sized segments always leave; a
    sub-MSS segment is held only while data is in flight AND the last small segment sent
    (``tp->snd_sml``) is not yet acknowledged. Held bytes stay at the tail of the write
    queue, and later writes are appended to them. ``variant="rfc896"`` models the classic
    rule instead (hold a small segment while anything is un-ACKed; BSD, older stacks).

    The receiver (``__tcp_ack_snd_check`` in net/ipv4/tcp_input.c) ACKs at once when more
    than one full segment arrived since its last ACK, or in quick-ack mode
    (``receiver_quickack``: the first exchanges of a connection, up to 16 ACKs, before it
    turns to ping-pong mode); otherwise it delays the ACK, hoping to piggyback it on a
    response, by at least TCP_DELACK_MIN = 40 ms (HZ/25; ``tcp_send_delayed_ack``, bounded
    by max(srtt, 40 ms) and TCP_DELACK_MAX). A server that answers only after the whole
    request sends nothing else, so the held tail waits for that timer: the 40 ms stall.

    What this means on modern Linux (Minshall), request/response with Nagle on:

    * a single write of any size does not stall: its full segments leave, and its one small
      tail goes at once since no other small segment is in flight. So a single write of
      99,900 bytes (68 segments of 1448 + 1436) and of 100,000 bytes (69 + 88) both go
      without delay;
    * header then body as two small writes stalls: the body waits for the ACK of the
      header, which the receiver delays (~40 ms + one RTT), unless it is in quick-ack mode;
    * a small write after a large one whose tail was small stalls the same way.

    Under the classic rule (``variant="rfc896"``) the tail of a single write waits for the
    ACK of everything before it: with ACKs for every second full segment, 68 full segments
    (99,900 bytes) are all ACKed at once, 69 (100,000 bytes) leave the last one to the
    delayed ACK, hence the seed's 99,900-is-fast / 100,000-is-slow observation on such stacks.

    Assumes the writes come faster than an RTT, the previous exchange is fully
    acknowledged, the congestion and receive windows do not hold anything back, and the
    receiver learned an ``mss``-sized rcv_mss.
    """
    if variant not in ("minshall", "rfc896"):
        raise ParameterError("variant", variant, "one of minshall, rfc896")
    mss = _whole("mss", mss, 1, 65535, "bytes")
    rtt_s = _non_negative("rtt", rtt_s, "seconds")
    delack_s = _non_negative("delack", delack_s, "seconds")
    if isinstance(writes, (str, bytes)) or not len(writes):
        raise ParameterError("writes", writes, "a non-empty list of write sizes in bytes")
    for size in writes:
        _whole("writes", size, 1, INT_MAX, "bytes per write")
    if nodelay:
        return NagleVerdict(False, 0.0, "nodelay")

    unsent = 0  # bytes queued but not sent (Nagle holds them)
    sent = 0  # bytes sent so far (snd_nxt)
    small_end = None  # end of the last small segment sent (Minshall's snd_sml)
    acked = 0  # bytes covered by the receiver's immediate ACKs
    held_from = None

    def deliver(length: int) -> None:
        nonlocal sent, acked
        sent += length
        if receiver_quickack or sent - acked > mss:
            acked = sent

    for index, size in enumerate(writes):
        unsent += size
        while unsent >= mss:
            deliver(mss)
            unsent -= mss
        if not unsent:
            held_from = None
            continue
        # Nothing is ACKed during the burst, so "outstanding" is "sent at all".
        held = sent > 0 and (variant == "rfc896" or small_end is not None)
        if held:
            held_from = index if held_from is None else held_from
            continue
        deliver(unsent)
        small_end = sent
        unsent = 0

    if not unsent:
        all_full = all(size % mss == 0 for size in writes)
        return NagleVerdict(False, 0.0, "full_segments" if all_full else "no_small_outstanding")
    # The ACK that releases the tail must cover the last small segment (Minshall) or
    # everything sent (RFC 896): either one the receiver sent at once, or its delayed ACK.
    needed = small_end if variant == "minshall" else sent
    if acked >= needed:
        return NagleVerdict(False, rtt_s, "held_until_ack", unsent, held_from)
    return NagleVerdict(True, delack_s + rtt_s, "held_until_delayed_ack", unsent, held_from)
