"""What one TCP connection did, in numbers: :func:`flow_metrics` turns the packets of a
flow (and, when a run recorded it, the kernel's ``ss -tinm`` telemetry) into a
:class:`FlowMetrics` of summary values and time series; :func:`all_flow_metrics` does it for
every flow of a capture at once.

Units everywhere: seconds, bytes, bit/s. "Sender" is the side that carried most payload
(the data direction); "receiver" the other side, whose ACKs and windows steer the sender.

Everything is measured where the capture was taken. A capture next to the sender sees
bytes in flight and round trips as the sender lives them; next to the receiver, ACKs
follow data at once and in-flight looks small. :attr:`FlowMetrics.vantage` says which
one the handshake timing points to ("sender", "receiver", "middle" or "unknown").

The numbers come from compiled code (:mod:`._metrics_kernel`), one pass per flow over a
flow-sorted index of the packet table: the one-flow and the all-flows paths run the same
code, so a flow gets the same numbers either way. The one-flow path also builds the series
(DataFrames); the all-flows path builds a flow's series only when they are asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np
import pandas as pd

from ..units import ParameterError
from . import _metrics_kernel as K
from ._metrics_kernel import DELAYED_ACK_MIN_S, MIN_GAP_S  # noqa: F401  (public here since before the kernel)
from ..words import messages
from .table import FlowError, PacketTable, expert_column, flow_view, main_flow

__all__ = ["FlowMetrics", "FlowFacts", "flow_metrics", "all_flow_metrics", "limited_shares", "goodput_series", "flow_label",
           "flow_rows", "DELAYED_ACK_MIN_S", "CAPTURE_FIELDS", "SERIES"]

#: The fields of FlowMetrics that say how complete the capture is.
CAPTURE_FIELDS = ("duplicate_frames", "captured_bytes", "lost_segments", "acked_unseen", "truncated_packets",
                  "time_reversals")
#: The series of a FlowMetrics (DataFrames, ``dup_ack_times`` an array), in ``to_dict`` order.
SERIES = ("throughput", "inflight", "rwnd", "rtt", "gaps", "zero_windows", "delayed_acks", "requests",
          "retransmitted", "resent", "recoveries", "dup_ack_times")


class FlowFacts(NamedTuple):
    """What the diagnosis reads beyond the summary numbers, computed with them.

    ``rounds``: round trips (time bins) per limit they show, in the order pandas'
    ``value_counts`` lists them (most first; ties by first appearance); ``turns``: the
    sender's messages when the flow takes request/response turns (None when it does not),
    with their median size and the median wait between them; gap counts, total and median
    seconds for the application's silences (``application`` and ``peer-wait``) and for Nagle
    stalls; ``inflight_growth``: bytes in flight (p90) in the last quarter of the transfer
    over the second; ``ts_samples``: round trips measured from TCP timestamps;
    ``arrival_rate_bps``: the rate new data arrives at back to back (next to the receiver, the
    bottleneck's); ``self_woken_share``: the share of the transfer the sender spent in pauses
    it ended by itself, not at an ACK (next to the sender). (A named
    tuple: --all makes one per flow, and a frozen dataclass costs several times more.)"""

    rounds: dict[str, int]
    turns: int | None
    turn_bytes_median: float
    turn_wait_median_s: float
    app_gaps: int
    app_gap_s: float
    app_gap_median_s: float
    peer_wait_gaps: int
    nagle_gaps: int
    nagle_gap_s: float
    nagle_gap_median_s: float
    inflight_growth: float
    ts_samples: int
    arrival_rate_bps: float = math.nan
    self_woken_share: float = math.nan


@dataclass
class FlowMetrics:
    """Summary numbers of one flow (``to_dict()`` gives them JSON-ready) and its series.

    Series (DataFrames, ``time`` in seconds since the capture's first frame):
    ``throughput`` (time, sent_bps, delivered_bps), ``inflight`` (time, bytes),
    ``rwnd`` (time, bytes, raw), ``rtt`` (time, rtt, source: "ack" or "ts"),
    ``gaps`` (start, end, duration, outstanding, reason: zero-window, retransmission-timeout,
    nagle-delayed-ack, application (nothing in flight, the sender woke by itself), peer-wait
    (nothing in flight until the peer sent data: a request/response turn), receiver-window,
    ack-wait), ``zero_windows`` (start, end,
    duration), ``delayed_acks`` (time, ack_rtt, extra), ``retransmitted`` (time, seq, len, fast,
    spurious: Wireshark's retransmissions), ``resent`` (time, seq, len: every data segment
    that carries no byte beyond the highest one sent before it), ``recoveries`` (start, end, duration: from the duplicate ACKs announcing a
    loss to the ACK of the resent data), ``requests`` (request/response
    breakdown), ``dup_ack_times``, ``telemetry`` (the sender's ``ss`` rows for this flow, if
    given). The series of a flow from :func:`all_flow_metrics` are computed on first use.
    """

    flow: int
    client: str
    server: str
    data_dir: int  # 0: client -> server, 1: server -> client
    sender: str  # "client" or "server"
    vantage: str  # where the capture sat: sender / receiver / middle / unknown
    duration_s: float  # first to last packet of the flow
    transfer_s: float  # first data segment to the ACK of the last byte
    payload_bytes: int  # distinct bytes of the data direction
    reverse_bytes: int  # payload of the other direction
    goodput_bps: float
    bin_s: float
    rtt_s: float  # best estimate of the path's round trip (NaN if none)
    handshake_rtt_s: float
    handshake_server_share: float  # SYN -> SYN-ACK part of the handshake RTT (vantage)
    rtt_min_s: float
    rtt_median_s: float
    rtt_p90_s: float
    ts_rtt_median_s: float
    mss: int | None
    window_scaling: str  # on / off / unknown
    receiver_wscale: int | None  # the shift applied to the receiver's windows; None when scaling is off
    rwnd_unknown_scale: bool
    rwnd_median_bytes: float
    rwnd_max_bytes: float
    inflight_plateau_bytes: float  # median in flight at a send, once past the ramp
    inflight_mean_bytes: float  # goodput x RTT (Little's law): the window actually used on average
    inflight_max_bytes: float
    inflight_p90_bytes: float
    data_packets: int
    retransmissions: int
    fast_retransmissions: int
    spurious_retransmissions: int
    retransmitted_bytes: int
    loss_fraction: float
    resent_segments: int  # by sequence coverage: no byte beyond the highest already sent
    resent_bytes: int
    resent_fraction: float
    timeouts: int
    dup_acks: int
    sack_packets: int
    sack_blocks: int
    zero_window_packets: int
    zero_window_s: float
    window_full: int
    window_updates: int
    persist_probes: int
    idle_s: float
    unanswered_s: float  # the sender resending into a silent peer at the end (0: it never did)
    unanswered_resends: int
    acked_bytes: int  # payload bytes the receiver acknowledged (as far as the capture shows)
    gap_s_by_reason: dict
    delayed_ack_count: int
    telemetry_summary: dict
    # What the capture lacks or holds twice (see _capture): the flow's numbers are only as
    # good as the capture.
    duplicate_frames: int  # second copies of a packet, left out of every number above
    captured_bytes: int  # distinct payload bytes of the data direction the capture holds
    lost_segments: int  # "previous segment not captured" (Wireshark), both directions
    acked_unseen: int  # ACKs of data the capture never held, both directions
    truncated_packets: int  # TCP headers cut by the snaplen
    time_reversals: int  # frames timestamped before the frame before them
    telemetry: pd.DataFrame | None = field(default=None, repr=False)
    facts: FlowFacts | None = field(default=None, repr=False, compare=False)
    #: The series by name, or what computes them on first use.
    _series: dict[str, Any] | Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def series(self) -> dict[str, Any]:
        """Every series by name (also the limit of each time bin, ``round_states``)."""
        if callable(self._series):
            self._series = self._series()
        if self._series is None:
            raise ValueError(f"flow {self.flow}: its series were not kept")
        return self._series

    @property
    def data_endpoints(self) -> tuple[str, str]:
        """(sender, receiver) as ``address:port``: the flow's ends in its data direction."""
        return (self.client, self.server) if self.data_dir == 0 else (self.server, self.client)

    def to_dict(self, *, tables: bool = False) -> dict[str, Any]:
        """Summary values (NaN as None); with ``tables``, the series as lists of records."""
        out: dict[str, Any] = {name: _json_ready(getattr(self, name)) for name in _SUMMARY}
        if tables:
            for name in SERIES:
                value = getattr(self, name)
                if isinstance(value, np.ndarray):
                    value = pd.DataFrame({"time": value})
                out[name] = _json_ready(value.to_dict(orient="records"))
            if self.telemetry is not None:
                out["telemetry"] = _json_ready(self.telemetry.to_dict(orient="records"))
        return out


def _series_property(name: str) -> property:
    return property(lambda self: self.series()[name], doc=f"The ``{name}`` series (see :class:`FlowMetrics`).")


# One property per series: a flow of --all computes them only if someone looks.
for _name in SERIES:
    setattr(FlowMetrics, _name, _series_property(_name))
#: The summary values, in declaration order (what ``to_dict`` gives).
_SUMMARY = tuple(f.name for f in fields(FlowMetrics) if f.name not in ("telemetry", "facts", "_series"))


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def flow_label(row: pd.Series) -> tuple[str, str]:
    def end(addr, port):
        return f"[{addr}]:{port}" if ":" in str(addr) else f"{addr}:{port}"

    return end(row["client"], row["client_port"]), end(row["server"], row["server_port"])


def flow_rows(table: PacketTable) -> list[dict]:
    """One row per flow of ``table``: its ends, packets, bytes each way, duration, handshake seen."""
    rows = []
    for _, row in table.flows.iterrows():
        client, server = flow_label(row)
        rows.append({"flow": int(row["flow"]), "client": client, "server": server,
                     "packets": int(row["packets"]), "bytes_c2s": int(row["bytes_c2s"]),
                     "bytes_s2c": int(row["bytes_s2c"]), "duration_s": float(row["last"] - row["first"]),
                     "handshake": bool(row["handshake"])})
    return rows


def flow_metrics(table: PacketTable, flow: int | None = None, *, telemetry: pd.DataFrame | None = None,
                 bin_s: float | None = None) -> FlowMetrics:
    """Metrics of ``flow`` (default: the largest by payload) of a table read with the expert columns."""
    if not table.has_expert:
        raise ValueError("flow_metrics needs the expert columns: read_packets(..., expert=True)")
    if table.packets.empty:
        raise FlowError("no_tcp_flow", path=table.source.path)
    if flow is None:
        flow = main_flow(table)
    rows = np.flatnonzero(table.flows["flow"].to_numpy() == flow)
    if not len(rows):
        raise FlowError("no_flow", path=table.source.path, flow=flow, flows=_flow_range(table))
    if bin_s is not None and not bin_s > 0:
        raise ParameterError("bin_s", bin_s, "a duration above 0 s")
    idx = np.flatnonzero(table.packets["flow"].to_numpy() == flow)
    if not len(idx):
        raise FlowError("no_packets_here", path=table.source.path, flow=flow)
    cols = _Columns(table)
    return _one(cols, idx, _FlowInfo(table.flows, rows), 0, bin_s, telemetry)


def _one(cols: "_Columns", idx: np.ndarray, info: "_FlowInfo", k: int, bin_s: float | None = None,
         telemetry: pd.DataFrame | None = None) -> FlowMetrics:
    """Flow k of ``info``, whose packets are ``idx``, with its series."""
    out_i, out_f = np.zeros(K.NI, np.int64), np.zeros(K.NF)
    kept, duplicates, raw = K.flow_series(idx, *cols.arrays, *info.kernel_args(k),
                                          math.nan if bin_s is None else float(bin_s), out_i, out_f)
    return _metrics(info, k, out_i.tolist(), out_f.tolist(), int(duplicates), telemetry=telemetry,
                    series=_series(cols, kept, raw, out_i, out_f))


def all_flow_metrics(table: PacketTable, flows: Sequence[int] | None = None) -> Iterator[FlowMetrics]:
    """The metrics of each of ``flows`` (default: every flow with packets), in that order.

    One compiled pass over the packets of all of them first (sorted by flow once, instead
    of one selection per flow); then one :class:`FlowMetrics` at a time, so a capture of
    many flows never holds them all. Their series are computed only when asked for.
    """
    if not table.has_expert:
        raise ValueError("all_flow_metrics needs the expert columns: read_packets(..., expert=True)")
    flow_of = table.packets["flow"].to_numpy()
    if flows is None:
        flows = np.unique(flow_of).tolist()
    wanted = np.asarray(flows, np.int64)
    rows = pd.Index(table.flows["flow"].to_numpy()).get_indexer(wanted)
    if (rows < 0).any():
        raise FlowError("no_flow", path=table.source.path, flow=int(wanted[rows < 0][0]), flows=_flow_range(table))
    # Every packet's place in flow order (capture order within a flow): flow f's packets are
    # order[start[f]:start[f + 1]]. The kernel leaves out the duplicate frames itself.
    order = np.argsort(flow_of, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(flow_of, minlength=int(wanted.max(initial=0)) + 1))])
    first, last = start[wanted], start[wanted + 1]
    del start
    if (last <= first).any():
        raise FlowError("no_packets_here", path=table.source.path, flow=int(wanted[last <= first][0]))
    cols = _Columns(table)
    info = _FlowInfo(table.flows, rows)

    def later(k: int) -> Callable[[], dict[str, Any]]:
        return lambda: _one(cols, order[first[k]:last[k]], info, k).series()

    # A block of flows at a time through the kernel, and one flow's values made Python
    # objects only when its turn comes: all at once would cost ~100 bytes per packet of a
    # capture of small flows.
    for a in range(0, len(wanted), _BLOCK):
        b = min(a + _BLOCK, len(wanted))
        out_i, out_f = np.zeros((b - a, K.NI), np.int64), np.zeros((b - a, K.NF))
        duplicates = np.zeros(b - a, np.int64)
        K.all_flows(order, first[a:b], last[a:b], *cols.arrays, *(x[a:b] for x in info.kernel_args()), out_i, out_f,
                    duplicates)
        for k in range(a, b):
            yield _metrics(info, k, out_i[k - a].tolist(), out_f[k - a].tolist(), int(duplicates[k - a]),
                           series=later(k))


#: Flows per call of the compiled pass (its output is ~700 bytes a flow).
_BLOCK = 4096


def _flow_range(table: PacketTable) -> str:
    return f"0..{len(table.flows) - 1}" if len(table.flows) else messages()("flow_error.none")


class _Columns:
    """The packet columns the kernel reads, contiguous and in the types it was compiled for
    (no copy for a table from read_packets)."""

    NAMES = (("duplicate_frame", np.bool_), ("rel_time", np.float64), ("dir", np.int8), ("seq", np.int64), ("ack", np.int64), ("len", np.int32),
             ("flags", np.uint16), ("expert_flags", np.uint16), ("win", np.int32), ("win_raw", np.uint16),
             ("ts_val", np.int64), ("ts_ecr", np.int64), ("time_ns", np.int64), ("ack_rtt", np.float64),
             ("bytes_in_flight", np.int64), ("snaplen_truncated", np.bool_), ("sack_count", np.int16))

    def __init__(self, table: PacketTable) -> None:
        pk = table.packets
        self.arrays = tuple(np.ascontiguousarray(pk[name].to_numpy(), dtype=dtype) for name, dtype in self.NAMES)
        self.packets = pk


class _FlowInfo:
    """What the flows table says about each flow the metrics are for, as lists (one Python
    object per value, fetched once) and as the arrays the kernel reads."""

    def __init__(self, flows: pd.DataFrame, rows: np.ndarray) -> None:
        f = flows.iloc[rows]
        self.flow = f["flow"].astype(np.int64).tolist()
        self.client_addr, self.server_addr = f["client"].astype(str).tolist(), f["server"].astype(str).tolist()
        self.client_port, self.server_port = f["client_port"].tolist(), f["server_port"].tolist()
        self.scaling = [str(s) if h else "unknown" for s, h in zip(f["window_scaling"], f["handshake"])]
        self.wscale = (f["wscale_client"].astype(np.int64).tolist(), f["wscale_server"].astype(np.int64).tolist())
        self.arrays = tuple(np.ascontiguousarray(f[c].to_numpy(), dtype=np.int64)
                            for c in ("bytes_c2s", "bytes_s2c", "mss_client", "mss_server"))
        self.telemetry_ends = f[["client", "client_port", "server", "server_port"]]

    def kernel_args(self, k: int | None = None) -> tuple:
        """The per-flow arrays, or flow k's values."""
        return self.arrays if k is None else tuple(int(a[k]) for a in self.arrays)


def _end(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _metrics(info: _FlowInfo, k: int, oi: list, of: list, duplicates: int, *, telemetry: pd.DataFrame | None = None,
             series: Any = None) -> FlowMetrics:
    """A FlowMetrics from flow k's rows of the kernel's output (as lists: --all makes 50,000
    of these, so the fields come by name from the kernel's column names, not one by one)."""
    values = dict(zip(_INT_SUMMARY, oi))
    values.update(zip(_FLOAT_SUMMARY, of))
    dd = values["data_dir"]
    del values["wscale"]
    wscale = info.wscale[1 - dd][k]  # the receiver's: the server's when the client sends
    scaling = info.scaling[k]
    rounds = {label: oi[i] for label, i, _ in _ROUNDS if oi[i]}
    if len(rounds) > 1:  # value_counts' order: most first, ties in order of first appearance
        first = {label: oi[j] for label, _, j in _ROUNDS}
        rounds = dict(sorted(rounds.items(), key=lambda kv: (-kv[1], first[kv[0]])))
    turns = oi[K.I_TURNS]
    facts = FlowFacts(
        rounds=rounds, turns=turns if turns >= 0 else None, turn_bytes_median=of[K.F_TURN_BYTES],
        turn_wait_median_s=of[K.F_TURN_WAIT], app_gaps=oi[K.I_GAPS + K.R_APPLICATION] + oi[K.I_GAPS + K.R_PEER_WAIT],
        app_gap_s=of[K.F_APP_GAP_S], app_gap_median_s=of[K.F_APP_GAP_MEDIAN],
        peer_wait_gaps=oi[K.I_GAPS + K.R_PEER_WAIT], nagle_gaps=oi[K.I_GAPS + K.R_NAGLE],
        nagle_gap_s=of[K.F_NAGLE_GAP_S], nagle_gap_median_s=of[K.F_NAGLE_GAP_MEDIAN],
        inflight_growth=of[K.F_INFLIGHT_GROWTH], ts_samples=oi[K.I_TS_SAMPLES], arrival_rate_bps=of[K.F_ARRIVAL],
        self_woken_share=of[K.F_SELF_WOKEN])
    summary, tel = {}, None
    if telemetry is not None and len(telemetry):
        summary, tel = _telemetry(telemetry, info, k, dd)
    values.update(
        flow=info.flow[k], client=_end(info.client_addr[k], info.client_port[k]),
        server=_end(info.server_addr[k], info.server_port[k]), sender="client" if dd == 0 else "server",
        vantage=K.VANTAGES[values["vantage"]], mss=values["mss"] or None, window_scaling=scaling,
        # A scale the receiver offered counts only when both ends agreed on scaling.
        receiver_wscale=wscale if wscale >= 0 and scaling == "on" else None,
        rwnd_unknown_scale=bool(values["rwnd_unknown_scale"]),
        gap_s_by_reason={reason: of[j] for reason, i, j in _GAPS if oi[i]}, telemetry_summary=summary,
        duplicate_frames=duplicates, telemetry=tel, facts=facts, _series=series)
    return FlowMetrics(**values)


#: The kernel's results that are FlowMetrics fields, by the same names.
_INT_SUMMARY = K.INT_FIELDS[:K.I_TS_SAMPLES]
_FLOAT_SUMMARY = K.FLOAT_FIELDS[:K.F_INFLIGHT_GROWTH]
_F = {name: i for i, name in enumerate(K.FLOAT_FIELDS)}
#: Gap reasons: (name, column of their count, column of their seconds).
_GAPS = tuple((reason, K.I_GAPS + r, K.F_GAP_S + r) for r, reason in enumerate(K.GAP_REASONS))
#: Round-trip states by code (0: nothing happened), as the diagnosis names them.
STATE_LABELS = (None, "sender-side", "receiver-window-limited", "application-limited", "nagle-delayed-ack",
                "congestion-loss", "zero-window")
#: States: (label, column of their rounds, column of the rank of their first appearance).
_ROUNDS = tuple((label, K.I_ROUNDS + c - 1, K.I_FIRST + c - 1) for c, label in enumerate(STATE_LABELS) if c)


def _series(cols: _Columns, idx: np.ndarray, raw: tuple, out_i: np.ndarray, out_f: np.ndarray) -> dict[str, Any]:
    """One flow's series as DataFrames, from the kernel's masks and arrays (``idx``: its packets)."""
    (mask, edges, sent, delivered, states, g_start, g_end, g_out, g_reason, zw_start, zw_end, rec_start, rec_end,
     ts_time, ts_rtt, req, in_t, in_b) = raw
    bin_s = float(out_f[_F["bin_s"]])

    def rows(bit: int) -> np.ndarray:
        return idx[(mask & bit) != 0]

    def col(name: str, bit: int) -> np.ndarray:
        return cols.packets[name].to_numpy()[rows(bit)]

    out: dict[str, Any] = {}
    out["throughput"] = pd.DataFrame({"time": edges[:-1], "sent_bps": 8 * sent / bin_s,
                                      "delivered_bps": 8 * delivered / bin_s})
    # Wireshark's bytes in flight where the capture sits; next to the receiver, the estimate.
    out["inflight"] = pd.DataFrame({"time": in_t, "bytes": in_b})
    win = col("win", K.M_RWND)
    out["rwnd"] = pd.DataFrame({"time": col("rel_time", K.M_RWND),
                                "bytes": np.where(win >= 0, win, np.nan).astype(float),
                                "raw": col("win_raw", K.M_RWND)})
    samples = [pd.DataFrame({"time": col("rel_time", K.M_RTT), "rtt": col("ack_rtt", K.M_RTT), "source": "ack"}),
               pd.DataFrame({"time": ts_time, "rtt": ts_rtt, "source": "ts"})]
    out["rtt"] = pd.concat(samples, ignore_index=True).sort_values("time", ignore_index=True)
    out["gaps"] = pd.DataFrame({"start": g_start, "end": g_end, "duration": g_end - g_start, "outstanding": g_out,
                                "reason": np.array(K.GAP_REASONS, dtype=object)[g_reason]})
    out["zero_windows"] = pd.DataFrame({"start": zw_start, "end": zw_end, "duration": zw_end - zw_start})
    ack_rtt = col("ack_rtt", K.M_DELAYED)
    out["delayed_acks"] = pd.DataFrame({"time": col("rel_time", K.M_DELAYED), "ack_rtt": ack_rtt,
                                        "extra": ack_rtt - out_f[_F["undelayed_rtt_s"]]})
    names = ["request_start", "request_end", "request_bytes", "response_start", "response_end", "response_bytes"]
    if req[6]:
        frame = pd.DataFrame(dict(zip(names, req[:6])))
        frame["wait_s"] = frame["response_start"] - frame["request_end"]
        frame["total_s"] = frame["response_end"] - frame["request_start"]
    else:  # one side sent no new data: no turns at all
        frame = pd.DataFrame(columns=names + ["wait_s", "total_s"])
    out["requests"] = frame
    out["retransmitted"] = pd.DataFrame({"time": col("rel_time", K.M_RETX), "seq": col("seq", K.M_RETX),
                                         "len": col("len", K.M_RETX), "fast": col("fast_retransmission", K.M_RETX),
                                         "spurious": col("spurious_retransmission", K.M_RETX)})
    out["resent"] = pd.DataFrame({"time": col("rel_time", K.M_RESENT), "seq": col("seq", K.M_RESENT),
                                  "len": col("len", K.M_RESENT)})
    out["recoveries"] = pd.DataFrame({"start": rec_start.astype(float), "end": rec_end.astype(float),
                                      "duration": rec_end - rec_start})
    out["dup_ack_times"] = col("rel_time", K.M_DUPACK)
    out["round_states"] = pd.Series(np.array(STATE_LABELS, dtype=object)[states], index=edges[:-1], name="limit")
    return out


def limited_shares(samples: pd.DataFrame) -> dict[str, float]:
    """The kernel's own verdict on one socket from its ``ss`` samples: its busy time (tcp_info's
    counters only grow, so the largest reading is the last), and the shares of it that the
    sender was limited by the receive window and by the send buffer (NaN where unknown)."""
    busy = float(samples["busy_s"].max()) if "busy_s" in samples and len(samples) else math.nan
    shares = {"busy_s": busy}
    for column in ("rwnd_limited_s", "sndbuf_limited_s"):
        known = column in samples and busy > 0
        shares[column.removesuffix("_s") + "_share"] = float(np.nan_to_num(samples[column].max())) / busy \
            if known else math.nan
    return shares


def _telemetry(tel: pd.DataFrame, info: _FlowInfo, k: int, dd: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """The sender's ``ss`` rows of this flow and what they sum up to."""
    ends = [(info.client_addr[k], int(info.client_port[k])), (info.server_addr[k], int(info.server_port[k]))]
    (src, sport), (dst, dport) = ends if dd == 0 else ends[::-1]
    mine = tel.loc[(tel["src"].astype(str) == src) & (tel["sport"].astype(int) == sport)
                   & (tel["dst"].astype(str) == dst) & (tel["dport"].astype(int) == dport)]
    mine = mine.sort_values("time").reset_index(drop=True)
    summary: dict[str, Any] = {"samples": len(mine)}
    if len(mine):
        for col in ("cwnd", "ssthresh", "rtt", "pacing_rate", "delivery_rate", "skmem_tb", "notsent"):
            if col in mine:
                summary[f"{col}_median"] = float(pd.to_numeric(mine[col], errors="coerce").median())
        summary.update({k: v for k, v in limited_shares(mine).items() if k != "busy_s" and not math.isnan(v)})
        if "app_limited" in mine:
            summary["app_limited_share"] = float(mine["app_limited"].astype(bool).mean())
    return summary, mine


def _default_bin(duration: float) -> float:
    """About 50 bins over the transfer, rounded to 1/2/5 x 10^n seconds, 1 ms at least."""
    raw = max(duration / 50, 1e-3)
    exponent = np.floor(np.log10(raw))
    mantissa = min((m for m in (1, 2, 5, 10) if m * 10**exponent >= raw))
    return float(mantissa * 10**exponent)


def goodput_series(packets, flow: int | None = None, *, bin_s: float | None = None,
                   direction: int | None = None) -> pd.Series:
    """New payload bytes per time bin, as bit/s, indexed by the bin's start (``rel_time``).

    Retransmitted segments are left out: goodput counts each byte once.
    """
    view, flow, direction = flow_view(packets, flow, direction)
    data = view[(view["dir"] == direction) & (view["len"] > 0)]
    fresh = data[~expert_column(data, "retransmission", False)]
    start, stop = float(data["rel_time"].min()), float(data["rel_time"].max())
    if bin_s is None:
        bin_s = _default_bin(stop - start)
    elif not (isinstance(bin_s, (int, float)) and np.isfinite(bin_s) and bin_s > 0):
        raise ParameterError("bin_s", bin_s, "a bin width in seconds above 0")
    edges = start + bin_s * np.arange(int(np.floor((stop - start) / bin_s)) + 2)
    counts, _ = np.histogram(fresh["rel_time"], bins=edges, weights=fresh["len"])
    series = pd.Series(counts * 8 / bin_s, index=pd.Index(edges[:-1], name="rel_time"), name="goodput_bps")
    series.attrs["bin_s"] = bin_s
    return series
