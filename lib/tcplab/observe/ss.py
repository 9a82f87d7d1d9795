"""Socket telemetry as ``ss -tinm`` shows it: a sampler for the lab's namespaces and a parser.

The table has one row per socket and sample with the fields ``ss -tinm`` prints. The
sampler reads them from the kernel the way ``ss`` does (an inet_diag dump, see
:mod:`tcplab.observe.sockdiag`) instead of starting ``ss`` for every sample: in the UML
kernel a program start costs 0.1–0.5 s, which both starved the transfer and left
seconds between samples. ``ss`` stays what the course shows students (they can run it by
hand in ``ip netns exec``) and the reference: :func:`parse_ss` reads its text, and a
test holds :func:`diag_row` equal to it on live sockets. Each sampler thread enters the
namespace once (setns) and keeps one netlink socket open there.

Units of the parsed table: seconds, bytes, bit/s; ``cwnd`` and ``ssthresh`` in segments
as the kernel keeps them; ``wscale_snd``/``wscale_rcv`` as shifts. ``send_rate`` is what ss
prints as ``send``: its own cwnd × mss × 8 / srtt, computed, not measured. A field ``ss`` does not print is NaN. Note that ``ss`` leaves
out ``snd_wnd`` when it is zero (a zero window), and ``unacked``/``lost`` when zero.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..lab import netns
from . import sockdiag

__all__ = ["COLUMNS", "SsSampler", "diag_row", "parse_ss", "socket_rows", "ss_command"]

COLUMNS = [
    # the kernel reads the socket somewhere between ``time`` (when it was asked) and ``time_end`` (when
    # it returned); under load the gap reaches several ms, enough to cross an application event.
    "time", "time_end", "side", "src", "sport", "dst", "dport", "state", "recv_q", "send_q", "cc", "cwnd",
    "ssthresh", "rtt", "rttvar", "rto", "mss", "snd_wnd", "rcv_space", "rcv_ssthresh", "rcv_wnd",
    "skmem_r", "skmem_rb", "skmem_t", "skmem_tb", "skmem_f", "skmem_w", "skmem_o", "skmem_bl",
    "skmem_d", "notsent", "unacked", "retrans", "lost", "delivery_rate", "pacing_rate",
    "app_limited", "bytes_acked", "bytes_received", "busy_s", "rwnd_limited_s", "sndbuf_limited_s",
    # added for reading ss field by field (case 11)
    "wscale_snd", "wscale_rcv", "minrtt", "ato", "advmss", "rcvmss", "pmtu", "send_rate",
    # the exponent of the retransmission or persist timer's backoff (ss prints it only when > 0)
    "backoff",
]
_TEXT = ("side", "src", "dst", "state", "cc")
_STATES = {"ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "UNCONN",
           "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "CLOSED"}
#: Bare words ss prints that are options or flags, not the congestion control's name.
_FLAGS = {"ts", "sack", "ecn", "ecnseen", "fastopen", "app_limited", "send", "pacing_rate",
          "delivery_rate", "cwnd_limited", "acked", "unacked"}
#: ``key:value`` fields copied as numbers (value unit already bytes or segments).
_PLAIN = {"cwnd": "cwnd", "ssthresh": "ssthresh", "mss": "mss", "snd_wnd": "snd_wnd",
          "rcv_space": "rcv_space", "rcv_ssthresh": "rcv_ssthresh", "rcv_wnd": "rcv_wnd",
          "notsent": "notsent", "unacked": "unacked", "lost": "lost",
          "bytes_acked": "bytes_acked", "bytes_received": "bytes_received",
          "advmss": "advmss", "rcvmss": "rcvmss", "pmtu": "pmtu", "backoff": "backoff"}
#: ``key:<n>ms`` durations, stored in seconds.
_MILLIS = {"rto": "rto", "ato": "ato", "minrtt": "minrtt", "busy": "busy_s", "rwnd_limited": "rwnd_limited_s",
           "sndbuf_limited": "sndbuf_limited_s"}
_SKMEM = {"r": "skmem_r", "rb": "skmem_rb", "t": "skmem_t", "tb": "skmem_tb", "f": "skmem_f",
          "w": "skmem_w", "o": "skmem_o", "bl": "skmem_bl", "d": "skmem_d"}
_NESTED = re.compile(r"(\w+):\(([^)]*)\)")
_KEYED = re.compile(r"(\w+):(\S+)")
_RATE = re.compile(r"\b(send|pacing_rate|delivery_rate)\s+([\d.]+)([KMGT]?)bps")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def ss_command(port: int) -> list[str]:
    """``ss`` argv for the TCP sockets of one port: numeric, memory and info, one line each."""
    return ["ss", "-tinmHOn", "sport", "=", f":{port}", "or", "dport", "=", f":{port}"]


def _records(text: str) -> list[str]:
    """One string per socket: ss without -O puts the details on indented follow-on lines."""
    records: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[:1].isspace() and records:
            records[-1] += " " + line.strip()
        else:
            records.append(line.strip())
    return records


def _endpoint(text: str) -> tuple[str, float]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if host.startswith("::ffff:"):
        host = host[len("::ffff:"):]
    return host, float(port) if port.isdigit() else np.nan


def _number(text: str) -> float:
    match = _NUMBER.match(text)
    return float(match.group()) if match else np.nan


def parse_record(record: str) -> dict[str, Any] | None:
    head = record.split()
    if len(head) < 5 or head[0] not in _STATES:
        return None
    row: dict[str, Any] = dict.fromkeys(COLUMNS, np.nan)
    row.update(side=None, cc=None, app_limited=False)
    row["state"] = head[0]
    row["recv_q"], row["send_q"] = float(head[1]), float(head[2])
    row["src"], row["sport"] = _endpoint(head[3])
    row["dst"], row["dport"] = _endpoint(head[4])
    rest = " ".join(head[5:])

    for name, body in _NESTED.findall(rest):
        if name == "skmem":
            for item in body.split(","):
                key = item.rstrip("0123456789")
                if key in _SKMEM:
                    row[_SKMEM[key]] = float(item[len(key):])
    flat = _NESTED.sub(" ", rest)
    for name, value, suffix in _RATE.findall(flat):
        # "send" is ss's own cwnd * mss * 8 / srtt, not a kernel counter: kept apart as send_rate
        row["send_rate" if name == "send" else name] = float(value) * _SCALE[suffix]
    flat = _RATE.sub(" ", flat)

    for key, value in _KEYED.findall(flat):
        if key == "rtt":
            rtt, _, var = value.partition("/")
            row["rtt"], row["rttvar"] = _number(rtt) / 1e3, _number(var) / 1e3
        elif key == "wscale":
            snd, _, rcv = value.partition(",")
            row["wscale_snd"], row["wscale_rcv"] = _number(snd), _number(rcv)
        elif key == "retrans":
            # "retrans:<in flight now>/<total>": the running total is the useful series.
            row["retrans"] = _number(value.partition("/")[2] or value)
        elif key in _MILLIS:
            row[_MILLIS[key]] = _number(value) / 1e3
        elif key in _PLAIN:
            row[_PLAIN[key]] = _number(value)
    words = [w for w in _KEYED.sub(" ", flat).split() if re.fullmatch(r"[a-z][a-z0-9_]*", w)]
    row["app_limited"] = "app_limited" in words
    row["cc"] = next((w for w in words if w not in _FLAGS), None)
    return row


def parse_ss(text: str) -> list[dict[str, Any]]:
    """Rows (one per socket, :data:`COLUMNS` keys) from ``ss -tinm`` output, with or without -H/-O."""
    return [row for row in map(parse_record, _records(text)) if row is not None]


def diag_row(sock: Mapping[str, Any]) -> dict[str, Any]:
    """The row ``parse_ss`` makes of ``ss -tinm``'s line for a socket, from the socket's
    inet_diag record (:mod:`tcplab.observe.sockdiag`): same units, and NaN where ss prints
    nothing (ss leaves out a zero counter, an infinite ssthresh, the default 3 s rto)."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS, np.nan)
    row.update(side=None, cc=sock["cc"], app_limited=False, state=sock["state"],
               recv_q=float(sock["recv_q"]), send_q=float(sock["send_q"]),
               src=sock["src"], sport=float(sock["sport"]), dst=sock["dst"], dport=float(sock["dport"]))
    for letter, value in sock.get("skmem", {}).items():
        if letter in _SKMEM:
            row[_SKMEM[letter]] = float(value)
    info = sock["info"]
    if not info:
        return row

    def shown(column: str, value: float, scale: float = 1.0) -> None:
        if value:
            row[column] = value * scale

    if info["options"] & sockdiag.TCPI_OPT_WSCALE:
        row["wscale_snd"], row["wscale_rcv"] = float(info["snd_wscale"]), float(info["rcv_wscale"])
    if info["rto"] != 3_000_000:
        shown("rto", info["rto"], 1e-6)
    if info["rtt"]:
        row["rtt"], row["rttvar"] = info["rtt"] / 1e6, info["rttvar"] / 1e6
        if info["snd_mss"] and info["snd_cwnd"]:
            row["send_rate"] = info["snd_cwnd"] * info["snd_mss"] * 8e6 / info["rtt"]
    for column, field_name in (("backoff", "backoff"), ("mss", "snd_mss"), ("pmtu", "pmtu"),
                               ("rcvmss", "rcv_mss"), ("advmss", "advmss"), ("cwnd", "snd_cwnd"),
                               ("bytes_acked", "bytes_acked"), ("bytes_received", "bytes_received"),
                               ("unacked", "unacked"), ("lost", "lost"), ("notsent", "notsent_bytes"),
                               ("rcv_space", "rcv_space"), ("rcv_ssthresh", "rcv_ssthresh"),
                               ("snd_wnd", "snd_wnd"), ("rcv_wnd", "rcv_wnd")):
        shown(column, info.get(field_name, 0))
    if info["snd_ssthresh"] < 0xFFFF:
        shown("ssthresh", info["snd_ssthresh"])
    shown("ato", info["ato"], 1e-6)
    shown("minrtt", info.get("min_rtt", 0), 1e-6)
    if info.get("pacing_rate", 0) != 2**64 - 1:
        shown("pacing_rate", info.get("pacing_rate", 0), 8.0)
    shown("delivery_rate", info.get("delivery_rate", 0), 8.0)
    row["app_limited"] = bool(info["app_limited"])
    if info["retrans"] or info["total_retrans"]:
        row["retrans"] = float(info["total_retrans"])
    if info.get("busy_time"):  # ss prints whole milliseconds, and the limits only beside busy
        row["busy_s"] = info["busy_time"] // 1000 / 1e3
        shown("rwnd_limited_s", info["rwnd_limited"] // 1000, 1e-3)
        shown("sndbuf_limited_s", info["sndbuf_limited"] // 1000, 1e-3)
    return row


#: The states in which a socket may still send data: an application that wrote its last byte
#: and closed leaves its socket in FIN-WAIT-1 (or, after its peer closed, LAST-ACK or CLOSING)
#: while the data it queued is still sent, often most of a bulk transfer's.
SENDING_STATES = ("ESTAB", "FIN-WAIT-1", "CLOSE-WAIT", "LAST-ACK", "CLOSING")


def socket_rows(telemetry: pd.DataFrame, side: str, states: tuple[str, ...] = ("ESTAB",)) -> pd.DataFrame:
    """The samples of ``side``'s ("client" or "server") connected socket, in time order
    (``states`` adds e.g. CLOSE-WAIT, for a socket whose peer already closed)."""
    if telemetry.empty:
        return telemetry
    rows = telemetry[(telemetry["side"] == side) & telemetry["state"].isin(states)]
    if "time_end" not in rows:  # recorded before the sampler stamped both ends: unknown
        rows = rows.assign(time_end=np.nan)
    return rows.sort_values("time").reset_index(drop=True)


def read_by(rows: pd.DataFrame) -> pd.Series:
    """When ``ss`` had read each sample's socket at the latest (:func:`socket_rows`' rows):
    ``time_end``, or ``time`` for a sample recorded before the sampler stamped both ends."""
    return rows["time_end"].fillna(rows["time"])


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The telemetry table, columns in :data:`COLUMNS` order with stable dtypes."""
    df = pd.DataFrame(rows, columns=COLUMNS)
    for column in COLUMNS:
        if column in _TEXT:
            df[column] = df[column].astype("string")
        elif column == "app_limited":
            df[column] = df[column].astype(bool)
        else:
            df[column] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    return df


@dataclass
class _Side:
    name: str
    ns: str
    #: (asked, answered, the dump's socket records); turned into rows by ``frame()``, not while sampling.
    samples: list[tuple[float, float, list[dict[str, Any]]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: (time.time() a dump started, how late against its schedule, s): see :meth:`SsSampler.late_share`.
    starts: list[tuple[float, float]] = field(default_factory=list)


class SsSampler:
    """Runs ``ss`` every ``interval`` seconds in each namespace for the sockets of ``port``.

    ``hosts`` maps a side name to a namespace name (``{"client": path.client.ns, ...}``).
    Use as a context manager or call :meth:`start`/:meth:`stop`; :meth:`frame` parses.
    """

    def __init__(self, hosts: Mapping[str, str], port: int, interval: float = 0.02) -> None:
        self.port = port
        self.interval = interval
        self.sides = [_Side(name, ns) for name, ns in hosts.items()]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "SsSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "SsSampler":
        for side in self.sides:
            thread = threading.Thread(target=self._sample_in, args=(side,), name=f"ss-{side.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _sample_in(self, side: _Side) -> None:
        try:
            netns.run_in(side.ns, self._loop, side)
        except Exception as exc:  # a vanished namespace ends sampling; the record says why
            side.errors.append(repr(exc))

    def _loop(self, side: _Side) -> None:
        due = time.monotonic()
        with sockdiag.DiagSocket() as diag:  # opened here: in the side's namespace
            while not self._stop.is_set():
                started = time.monotonic()
                stamp = time.time()
                side.starts.append((stamp, max(started - due, 0.0)))
                try:
                    sockets = diag.tcp_sockets(self.port)
                except OSError as exc:
                    if len(side.errors) < 10:
                        side.errors.append(repr(exc))
                else:
                    side.samples.append((stamp, time.time(), sockets))
                # The next dump is due one interval after the later of this one's due time and
                # its start: a late start moves the schedule on (no burst to catch up), so each
                # start's lateness is time the thread was held that no earlier start counted.
                due = max(due, started) + self.interval
                self._stop.wait(due - time.monotonic())

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()

    @property
    def sample_count(self) -> int:
        return sum(len(side.samples) for side in self.sides)

    def late_share(self, start: float | None = None, end: float | None = None) -> float | None:
        """The share of the time from ``start`` to ``end`` (time.time(); by default the whole
        sampling) by which this sampler's dumps started late, on its most delayed side.

        The sampler is a thread of the run's own process, in the lab's kernel, that asks for
        the CPU every ``interval``: near 0 when that kernel runs its programs on time; when the
        kernel holds its programs (a UML kernel whose one CPU the run saturates, a hypervisor
        taking the machine), the time it held the next dump. None without a dump in the span."""
        shares = []
        for side in self.sides:
            if not side.starts:
                continue
            lo = side.starts[0][0] if start is None else start
            hi = side.starts[-1][0] if end is None else end
            if hi > lo:
                shares.append(sum(late for stamp, late in side.starts if lo <= stamp <= hi) / (hi - lo))
        return max(shares) if shares else None

    @property
    def errors(self) -> dict[str, list[str]]:
        return {side.name: list(side.errors) for side in self.sides if side.errors}

    def frame(self) -> pd.DataFrame:
        rows = []
        for side in self.sides:
            for stamp, end, sockets in side.samples:
                for sock in sockets:
                    rows.append({**diag_row(sock), "time": stamp, "time_end": end, "side": side.name})
        return frame(rows).sort_values(["time", "side"], kind="stable").reset_index(drop=True)
