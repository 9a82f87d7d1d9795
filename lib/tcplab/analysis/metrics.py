"""What one TCP connection did, in numbers: :func:`flow_metrics` turns the packets of a
flow (and, when a run recorded it, the kernel's ``ss -tinm`` telemetry) into a
:class:`FlowMetrics` of summary values and time series.

Units everywhere: seconds, bytes, bit/s. "Sender" is the side that carried most payload
(the data direction); "receiver" the other side, whose ACKs and windows steer the sender.

Everything is measured where the capture was taken. A capture next to the sender sees
bytes in flight and round trips as the sender lives them; next to the receiver, ACKs
follow data at once and in-flight looks small. :attr:`FlowMetrics.vantage` says which
one the handshake timing points to ("sender", "receiver", "middle" or "unknown").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from ..units import ParameterError
from .table import PacketTable, data_direction, expert_column, flow_view, main_flow

__all__ = ["FlowMetrics", "flow_metrics", "goodput_series", "flow_label", "flow_rows",
           "DELAYED_ACK_MIN_S", "CAPTURE_FIELDS"]

#: A delayed ACK on Linux waits at least 40 ms (TCP_DELACK_MIN); 30 ms of extra wait
#: beyond the path's round trip counts as one.
DELAYED_ACK_MIN_S = 0.030
#: A sender silent for less than this is not idle, whatever the round trip (scheduler noise).
MIN_GAP_S = 0.005


#: The fields of FlowMetrics that say how complete the capture is (see ``_capture``).
CAPTURE_FIELDS = ("duplicate_frames", "captured_bytes", "lost_segments", "acked_unseen", "truncated_packets",
                  "time_reversals")


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
    breakdown), ``telemetry`` (the sender's ``ss`` rows for this flow, if given).
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
    throughput: pd.DataFrame = field(repr=False)
    inflight: pd.DataFrame = field(repr=False)
    rwnd: pd.DataFrame = field(repr=False)
    rtt: pd.DataFrame = field(repr=False)
    gaps: pd.DataFrame = field(repr=False)
    zero_windows: pd.DataFrame = field(repr=False)
    delayed_acks: pd.DataFrame = field(repr=False)
    requests: pd.DataFrame = field(repr=False)
    retransmitted: pd.DataFrame = field(repr=False)
    resent: pd.DataFrame = field(repr=False)
    recoveries: pd.DataFrame = field(repr=False)
    dup_ack_times: np.ndarray = field(repr=False)
    telemetry: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def data_endpoints(self) -> tuple[str, str]:
        """(sender, receiver) as ``address:port``: the flow's ends in its data direction."""
        return (self.client, self.server) if self.data_dir == 0 else (self.server, self.client)

    def to_dict(self, *, tables: bool = False) -> dict[str, Any]:
        """Summary values (NaN as None); with ``tables``, the series as lists of records."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value = pd.DataFrame({"time": value})
            if isinstance(value, pd.DataFrame) or value is None and f.name == "telemetry":
                if tables and value is not None:
                    out[f.name] = _json_ready(value.to_dict(orient="records"))
                continue
            out[f.name] = _json_ready(value)
        return out


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
        raise ValueError(f"{table.source.path}: no TCP flow")
    if flow is None:
        flow = main_flow(table)
    rows = table.flows.loc[table.flows["flow"] == flow]
    if rows.empty:
        raise ValueError(f"{table.source.path}: no flow {flow} (flows are {_flow_range(table)})")
    info = rows.iloc[0]
    pk = table.packets.loc[table.packets["flow"] == flow]
    duplicates = pk["duplicate_frame"].to_numpy()
    pk = pk.loc[~duplicates].reset_index(drop=True)
    return _Builder(pk, info, telemetry, bin_s, duplicate_frames=int(duplicates.sum())).build()


def _flow_range(table: PacketTable) -> str:
    return f"0..{len(table.flows) - 1}" if len(table.flows) else "none"


class _Builder:
    """Computes one FlowMetrics; each method fills one group of fields."""

    def __init__(self, pk: pd.DataFrame, info: pd.Series, telemetry, bin_s, *, duplicate_frames: int = 0) -> None:
        self.pk = pk
        self.duplicate_frames = duplicate_frames
        self.info = info
        self.dd = data_direction(pk)
        self.snd = pk.loc[pk["dir"] == self.dd]
        self.rcv = pk.loc[pk["dir"] != self.dd]
        self.data = self.snd.loc[self.snd["len"] > 0]
        self.acks = self.rcv.loc[self.rcv["f_ack"]]
        self.telemetry_in = telemetry
        self.bin_request = bin_s
        self.out: dict[str, Any] = {}

    def build(self) -> FlowMetrics:
        info, out = self.info, self.out
        client, server = flow_label(info)
        out.update(flow=int(info["flow"]), client=client, server=server, data_dir=self.dd,
                   sender="client" if self.dd == 0 else "server")
        self._handshake()
        self._volume()
        self._recoveries()
        self._rtt()
        self._windows()
        self._bins()
        self._inflight()
        self._losses()
        self._zero_windows()
        self._gaps()
        self._delayed_acks()
        self._requests()
        self._telemetry()
        self._capture()
        return FlowMetrics(**out)

    # --- handshake, vantage ----------------------------------------------------------------------
    def _handshake(self) -> None:
        pk = self.pk
        syn = pk.loc[pk["f_syn"] & ~pk["f_ack"] & (pk["dir"] == 0)]
        synack = pk.loc[pk["f_syn"] & pk["f_ack"] & (pk["dir"] == 1)]
        rtt, share = math.nan, math.nan
        if len(syn) and len(synack):
            t_syn, t_synack = syn["rel_time"].iloc[-1], synack["rel_time"].iloc[0]
            after = pk.loc[(pk["dir"] == 0) & ~pk["f_syn"] & (pk["rel_time"] >= t_synack)]
            if len(after) and t_synack >= t_syn:
                rtt = float(after["rel_time"].iloc[0] - t_syn)
                share = float((t_synack - t_syn) / rtt) if rtt > 0 else math.nan
        vantage = "unknown"
        if math.isfinite(share):
            # share ~1: capture next to the client; ~0: next to the server.
            near = "client" if share > 0.8 else "server" if share < 0.2 else "middle"
            vantage = "middle" if near == "middle" else ("sender" if near == ("client", "server")[self.dd]
                                                         else "receiver")
        self.out.update(handshake_rtt_s=rtt, handshake_server_share=share, vantage=vantage)

    # --- volume, goodput ---------------------------------------------------------------------------
    def _volume(self) -> None:
        data, rcv = self.data, self.rcv
        info = self.info
        reverse = int(info["bytes_s2c"] if self.dd == 0 else info["bytes_c2s"])
        if data.empty:
            self.t0 = self.t1 = float(self.pk["rel_time"].iloc[0])
            self.out.update(duration_s=float(self.pk["rel_time"].iloc[-1] - self.pk["rel_time"].iloc[0]),
                            transfer_s=0.0, payload_bytes=0, reverse_bytes=reverse, goodput_bps=0.0,
                            data_packets=0, unanswered_s=0.0, unanswered_resends=0, acked_bytes=0)
            return
        ends = data["seq"].to_numpy() + data["len"].to_numpy()
        first_seq, last_end = int(data["seq"].min()), int(ends.max())
        payload = last_end - first_seq
        self.t0 = float(data["rel_time"].iloc[0])
        acked = rcv.loc[rcv["f_ack"] & (rcv["ack"] >= last_end)]
        self.t1 = float(acked["rel_time"].iloc[0]) if len(acked) else float(data["rel_time"].iloc[-1])
        transfer = max(self.t1 - self.t0, 0.0)
        unanswered_s, resends = self._unanswered(data)
        acks = self.acks
        acked = int(min(max(int(acks["ack"].max()) - first_seq, 0), payload)) if len(acks) else 0
        goodput = 8 * payload / transfer if transfer > 0 else math.nan
        if resends and not acked:
            goodput = 0.0  # resent into silence and never acknowledged: nothing is known delivered
        self.out.update(duration_s=float(self.pk["rel_time"].iloc[-1] - self.pk["rel_time"].iloc[0]),
                        transfer_s=transfer, payload_bytes=payload, reverse_bytes=reverse,
                        goodput_bps=goodput, data_packets=len(data), unanswered_s=unanswered_s,
                        unanswered_resends=resends, acked_bytes=acked)

    @cached_property
    def probes(self) -> np.ndarray:
        """Data segments that carry old bytes on purpose: keep-alives and zero-window probes."""
        return (self.data["keep_alive"] | self.data["zero_window_probe"]).to_numpy()

    @cached_property
    def resends(self) -> np.ndarray:
        """Data segments resent, by sequence coverage: no byte beyond the highest one sent
        before (Wireshark calls a resend "out-of-order" when the receiver's window changed
        while it sent duplicate ACKs, so its count runs short under loss; this does not)."""
        ends = (self.data["seq"] + self.data["len"]).to_numpy()
        highest_before = np.concatenate([[-np.inf], np.maximum.accumulate(ends)[:-1]]) if len(ends) else ends
        return (ends <= highest_before) & ~self.probes

    def _unanswered(self, data: pd.DataFrame) -> tuple[float, int]:
        """How long the sender kept resending after the peer's last packet, and how many
        segments: (0, 0) unless at least two resends follow that packet and the flow ends on
        one. A peer that answers keep-alives or zero-window probes is not silent."""
        probe, old = self.probes, self.resends
        times = data["rel_time"].to_numpy()
        since = float(self.rcv["rel_time"].iloc[-1]) if len(self.rcv) else -math.inf
        after = (times > since) & ~probe
        resends = int((after & old).sum())
        last = np.flatnonzero(~probe)
        if resends < 2 or not len(last) or not old[last[-1]]:
            return 0.0, 0
        return float(times[last[-1]] - max(since, times[0])), resends

    # --- loss recovery ---------------------------------------------------------------------------
    def _recoveries(self) -> None:
        """For each retransmission: from the duplicate ACKs (or the resend) that announced the
        loss to the first ACK beyond the resent data; that ACK's RTT sample is dropped (Karn)."""
        retx = self.data.loc[self.data["retransmission"]]
        acks = self.acks
        t, seq = retx["rel_time"].to_numpy(), retx["seq"].to_numpy()
        ack_t = acks["rel_time"].to_numpy()
        cum = np.maximum.accumulate(acks["ack"].to_numpy()) if len(acks) else np.zeros(0, np.int64)
        # The first ACK after the resend whose cumulative value passes the resent byte.
        first = np.maximum(np.searchsorted(ack_t, t, side="right"), np.searchsorted(cum, seq, side="right"))
        found = first < len(ack_t)
        end = np.where(found, ack_t[np.minimum(first, max(len(ack_t) - 1, 0))] if len(ack_t) else t, t)
        # Duplicate ACKs within a round trip before the resend announced the loss.
        dup_t = acks.loc[acks["dup_ack"], "rel_time"].to_numpy()
        window = self.out["handshake_rtt_s"] if math.isfinite(self.out["handshake_rtt_s"]) else 0.0
        lo = np.searchsorted(dup_t, t - window - MIN_GAP_S, side="left")
        hi = np.searchsorted(dup_t, t, side="right")
        start = np.where(hi > lo, dup_t[np.minimum(lo, max(len(dup_t) - 1, 0))] if len(dup_t) else t, t)
        frame = pd.DataFrame({"start": start.astype(float), "end": end.astype(float)})
        frame["duration"] = frame["end"] - frame["start"]
        self.karn = acks.index[first[found]]
        self.out["recoveries"] = frame

    # --- round trips ------------------------------------------------------------------------------
    def _rtt(self) -> None:
        # The SYN-ACK's ack_rtt is half a handshake, not a data round trip; an ACK of resent
        # data is ambiguous (Karn's rule).
        # A sample at or below zero comes from a file whose clock ran backwards (frames
        # merged from two capture points): no round trip at all.
        usable = (self.rcv["ack_rtt"] > 0) & ~self.rcv["f_syn"] & ~self.rcv.index.isin(self.karn)
        acks = self.rcv.loc[usable, ["rel_time", "ack_rtt"]]
        samples = [pd.DataFrame({"time": acks["rel_time"], "rtt": acks["ack_rtt"], "source": "ack"})]
        ts = self._ts_echo_rtt()
        samples.append(ts)
        self.out["rtt"] = pd.concat(samples, ignore_index=True).sort_values("time", ignore_index=True)
        a = acks["ack_rtt"]
        hs = self.out["handshake_rtt_s"]
        rtt_min = float(a.min()) if len(a) else math.nan
        # The path's round trip: the handshake when captured (right at any vantage point),
        # else the fastest data round trip, which is right next to the sender.
        rtt = hs if math.isfinite(hs) and hs > 0 else float(a.quantile(0.05)) if len(a) else (
            float(ts["rtt"].min()) if len(ts) else math.nan)
        self.out.update(rtt_min_s=rtt_min, rtt_median_s=float(a.median()) if len(a) else math.nan,
                        rtt_p90_s=float(a.quantile(0.9)) if len(a) else math.nan,
                        ts_rtt_median_s=float(ts["rtt"].median()) if len(ts) else math.nan, rtt_s=rtt)

    def _ts_echo_rtt(self) -> pd.DataFrame:
        """Round trips from timestamps: a receiver packet echoing a value, since the sender first sent it."""
        sent = self.data.loc[self.data["ts_val"] >= 0].groupby("ts_val")["rel_time"].min()
        echo = self.rcv.loc[self.rcv["ts_ecr"] >= 0].groupby("ts_ecr")["rel_time"].min()
        both = pd.concat([sent.rename("sent"), echo.rename("echo")], axis=1, join="inner")
        both = both.loc[both["echo"] >= both["sent"]]
        return pd.DataFrame({"time": both["echo"].to_numpy(), "rtt": (both["echo"] - both["sent"]).to_numpy(),
                             "source": "ts"})

    # --- windows ----------------------------------------------------------------------------------
    def _windows(self) -> None:
        info, rcv = self.info, self.rcv
        receiver = "server" if self.dd == 0 else "client"
        mss = int(info[f"mss_{receiver}"]) if int(info[f"mss_{receiver}"]) > 0 else None
        if mss is None and len(self.data):
            mss = int(self.data["len"].max())
        wscale = int(info[f"wscale_{receiver}"])
        body = rcv.loc[~rcv["f_syn"]]
        unknown = bool((body["win"] < 0).any())
        rwnd = pd.DataFrame({"time": body["rel_time"].to_numpy(),
                             "bytes": body["win"].where(body["win"] >= 0).astype(float).to_numpy(),
                             "raw": body["win_raw"].to_numpy()})
        self.rwnd_df = rwnd
        scaling = str(info["window_scaling"]) if bool(info["handshake"]) else "unknown"
        # A scale the receiver offered counts only when both ends agreed on scaling.
        self.out.update(mss=mss, window_scaling=scaling,
                        receiver_wscale=wscale if wscale >= 0 and scaling == "on" else None, rwnd_unknown_scale=unknown,
                        rwnd_median_bytes=float(rwnd["bytes"].median()) if rwnd["bytes"].notna().any() else math.nan,
                        rwnd_max_bytes=float(rwnd["bytes"].max()) if rwnd["bytes"].notna().any() else math.nan,
                        rwnd=rwnd)

    # --- time bins: throughput ---------------------------------------------------------------------
    def _bins(self) -> None:
        span = max(self.t1 - self.t0, 1e-6)
        if self.bin_request is not None:
            if not (self.bin_request > 0):
                raise ParameterError("bin_s", self.bin_request, "a duration above 0 s")
            bin_s = float(self.bin_request)
        else:
            rtt = self.out["rtt_s"]
            bin_s = rtt if math.isfinite(rtt) and rtt > 0 else span / 100
            bin_s = max(bin_s, span / 500, 1e-3)  # at most ~500 bins
        self.bin_s = bin_s
        edges = self.t0 + bin_s * np.arange(int(math.ceil(span / bin_s)) + 1)
        if len(edges) < 2:
            edges = np.array([self.t0, self.t0 + bin_s])
        self.edges = edges
        data = self.data
        sent = np.histogram(data["rel_time"], bins=edges, weights=data["len"])[0] if len(data) else np.zeros(
            len(edges) - 1)
        acks = self.acks
        # Delivered: how far the cumulative ACK moved in each bin.
        cum = np.maximum.accumulate(acks["ack"].to_numpy()) if len(acks) else np.array([0])
        idx = np.searchsorted(acks["rel_time"].to_numpy(), edges, side="right") - 1
        at_edges = np.where(idx >= 0, cum[np.clip(idx, 0, len(cum) - 1)], cum[0])
        delivered = np.diff(at_edges)
        self.out.update(bin_s=bin_s, throughput=pd.DataFrame({
            "time": edges[:-1], "sent_bps": 8 * sent / bin_s, "delivered_bps": 8 * delivered / bin_s}))

    # --- bytes in flight -------------------------------------------------------------------------------
    def _inflight(self) -> None:
        d = self.data.loc[self.data["bytes_in_flight"] >= 0]
        series = pd.DataFrame({"time": d["rel_time"].to_numpy(), "bytes": d["bytes_in_flight"].to_numpy()})
        plateau = math.nan
        if len(series):
            b = np.digitize(series["time"], self.edges) - 1
            per_bin = series.groupby(b)["bytes"].max()
            # Leave out the ramp (round trips before in-flight first reaches 80% of its
            # usual peak); the plateau is then the typical in-flight at a send.
            peak = per_bin.quantile(0.9)
            ramp_end = per_bin.index[np.argmax(per_bin.to_numpy() >= 0.8 * peak)]
            plateau = float(series.loc[b >= ramp_end, "bytes"].median())
        goodput, rtt = self.out["goodput_bps"], self.out["rtt_s"]
        self.out.update(inflight=series, inflight_plateau_bytes=plateau, inflight_mean_bytes=goodput * rtt / 8,
                        inflight_max_bytes=float(series["bytes"].max()) if len(series) else math.nan,
                        inflight_p90_bytes=float(series["bytes"].quantile(0.9)) if len(series) else math.nan)

    # --- losses, ACK events -------------------------------------------------------------------------
    def _losses(self) -> None:
        d, r = self.data, self.rcv
        retx = d.loc[d["retransmission"]]
        payload = self.out["payload_bytes"]
        again = d.loc[self.resends]
        self.out.update(
            resent=pd.DataFrame({"time": again["rel_time"].to_numpy(), "seq": again["seq"].to_numpy(),
                                 "len": again["len"].to_numpy()}),
            resent_segments=len(again), resent_bytes=int(again["len"].sum()),
            resent_fraction=float(again["len"].sum() / payload) if payload else 0.0)
        self.out.update(
            retransmitted=pd.DataFrame({"time": retx["rel_time"].to_numpy(), "seq": retx["seq"].to_numpy(),
                                        "len": retx["len"].to_numpy(),
                                        "fast": retx["fast_retransmission"].to_numpy(),
                                        "spurious": retx["spurious_retransmission"].to_numpy()}),
            dup_ack_times=r.loc[r["dup_ack"], "rel_time"].to_numpy(),
            retransmissions=len(retx), fast_retransmissions=int(d["fast_retransmission"].sum()),
            spurious_retransmissions=int(d["spurious_retransmission"].sum()),
            retransmitted_bytes=int(retx["len"].sum()),
            loss_fraction=float(retx["len"].sum() / payload) if payload else 0.0,
            dup_acks=int(r["dup_ack"].sum()), sack_packets=int((r["sack_count"] > 0).sum()),
            sack_blocks=int(r["sack_count"].clip(lower=0).sum()),
            zero_window_packets=int(r["zero_window"].sum()), window_full=int(self.snd["window_full"].sum()),
            window_updates=int(r["window_update"].sum()),
            # Linux probes a zero window with an empty segment below the window: Wireshark's keep-alive.
            persist_probes=int((self.snd["keep_alive"] | self.snd["zero_window_probe"]).sum()))

    def _zero_windows(self) -> None:
        r = self.rwnd_df
        zero = (r["raw"] == 0).to_numpy()
        episodes = []
        start = None
        for t, z in zip(r["time"].to_numpy(), zero):
            if z and start is None:
                start = t
            elif not z and start is not None:
                episodes.append((start, t))
                start = None
        if start is not None:
            episodes.append((start, float(self.pk["rel_time"].iloc[-1])))
        frame = pd.DataFrame(episodes, columns=["start", "end"], dtype=float)
        frame["duration"] = frame["end"] - frame["start"]
        self.out.update(zero_windows=frame, zero_window_s=float(frame["duration"].sum()))

    # --- idle gaps -------------------------------------------------------------------------------------
    def _gaps(self) -> None:
        """Silences of the sender while data remains, each with the reason the packets suggest."""
        # Within the transfer only: data sent after every byte was acknowledged (keep-alives
        # of a connection left open, spurious resends) is not part of it, nor the wait before.
        d = self.data.loc[self.data["rel_time"] <= self.t1]
        rtt = self.out["rtt_s"]
        threshold = max(rtt / 2 if math.isfinite(rtt) else 0.0, MIN_GAP_S)
        t = d["rel_time"].to_numpy()
        cols = ["start", "end", "duration", "outstanding", "reason"]
        if len(t) < 2:
            self.out.update(gaps=pd.DataFrame(columns=cols), idle_s=0.0, gap_s_by_reason={}, timeouts=0)
            return
        ends = d["seq"].to_numpy() + d["len"].to_numpy()
        high = np.maximum.accumulate(ends)
        acks = self.acks
        ack_t, ack_v = acks["rel_time"].to_numpy(), np.maximum.accumulate(acks["ack"].to_numpy()) if len(acks) \
            else np.array([])
        rw_t, rw_v = self.rwnd_df["time"].to_numpy(), self.rwnd_df["raw"].to_numpy()
        rw_b = self.rwnd_df["bytes"].to_numpy()
        peer_data = acks["len"].to_numpy() > 0
        mss = self.out["mss"] or 1460
        # Away from the sender, an ACK seen here reaches the sender, and what it sends in answer
        # comes back here, this much later (the handshake tells where the capture sat).
        share, hs = self.out["handshake_server_share"], self.out["handshake_rtt_s"]
        lag = hs * (share if self.dd == 1 else 1 - share) if math.isfinite(share) and math.isfinite(hs) else 0.0
        rows = []
        for i in np.flatnonzero(np.diff(t) > threshold):
            start, end = t[i], t[i + 1]
            j = np.searchsorted(ack_t, end, side="right") - 1  # the last ACK before the sender woke up
            acked = ack_v[j] if j >= 0 else 0
            last_ack_t = ack_t[j] if j >= 0 else -math.inf
            outstanding = int(high[i] - acked)
            k_start = np.searchsorted(rw_t, start, side="right") - 1
            k_end = np.searchsorted(rw_t, end, side="right") - 1
            window_closed = k_end >= 0 and (rw_v[max(k_start, 0):k_end + 1] == 0).any()
            rwnd_start = rw_b[k_start] if k_start >= 0 else math.nan
            # A fast retransmission answers duplicate ACKs: the silence before it is a wait for ACKs.
            next_is_retx = bool(d["retransmission"].iloc[i + 1] and not d["fast_retransmission"].iloc[i + 1])
            # Nagle holds data back while a small segment is the only thing un-ACKed.
            small = d["len"].iloc[i] < mss and 0 <= d["bytes_in_flight"].iloc[i] <= mss
            woke_on_ack = end - last_ack_t < threshold + lag
            if window_closed:
                reason = "zero-window"
            elif next_is_retx:
                reason = "retransmission-timeout"
            elif outstanding <= 0 and woke_on_ack and small and self._ack_was_delayed(j):
                reason = "nagle-delayed-ack"
            elif outstanding <= 0 and not woke_on_ack:
                reason = "application"
            elif outstanding <= 0 and peer_data[j]:
                # Woken by the peer's data, not by an ACK of its own: a request/response turn.
                reason = "peer-wait"
            elif math.isfinite(rwnd_start) and high[i] - (ack_v[max(np.searchsorted(ack_t, start, side="right") - 1, 0)]
                                                      if len(ack_v) else 0) >= rwnd_start - mss:
                reason = "receiver-window"
            else:
                reason = "ack-wait"
            rows.append((start, end, end - start, outstanding, reason))
        gaps = pd.DataFrame(rows, columns=cols)
        gaps = gaps.astype({"start": float, "end": float, "duration": float})
        self.out.update(gaps=gaps, idle_s=float(gaps["duration"].sum()),
                        gap_s_by_reason={k: float(v) for k, v in gaps.groupby("reason")["duration"].sum().items()},
                        timeouts=int((gaps["reason"] == "retransmission-timeout").sum()))

    def _ack_was_delayed(self, ack_index: int) -> bool:
        if ack_index < 0:
            return False
        value = self.acks["ack_rtt"].iloc[ack_index]
        return bool(np.isfinite(value) and value - self._undelayed_rtt() >= DELAYED_ACK_MIN_S)

    def _undelayed_rtt(self) -> float:
        """A round trip without ACK delay: the handshake's (never delayed) or the fastest data ACK."""
        known = [x for x in (self.out["rtt_min_s"], self.out["handshake_rtt_s"]) if math.isfinite(x)]
        return min(known) if known else 0.0

    def _delayed_acks(self) -> None:
        r = self.rcv.loc[self.rcv["ack_rtt"].notna() & ~self.rcv["f_syn"], ["rel_time", "ack_rtt"]]
        extra = r["ack_rtt"] - self._undelayed_rtt()
        delayed = pd.DataFrame({"time": r["rel_time"], "ack_rtt": r["ack_rtt"], "extra": extra}).loc[
            extra >= DELAYED_ACK_MIN_S].reset_index(drop=True)
        self.out.update(delayed_acks=delayed, delayed_ack_count=len(delayed))

    # --- request / response ---------------------------------------------------------------------
    def _requests(self) -> None:
        """Client data bursts (requests) each followed by a server burst (response)."""
        pk = self.pk
        cols = ["request_start", "request_end", "request_bytes", "response_start", "response_end",
                "response_bytes", "wait_s", "total_s"]
        data = pk.loc[(pk["len"] > 0) & ~pk["retransmission"], ["rel_time", "dir", "len"]]
        if data.empty or data["dir"].nunique() < 2:
            self.out["requests"] = pd.DataFrame(columns=cols)
            return
        run_id = (data["dir"] != data["dir"].shift()).cumsum()
        runs = data.groupby(run_id).agg(dir=("dir", "first"), start=("rel_time", "first"),
                                        end=("rel_time", "last"), bytes=("len", "sum")).reset_index(drop=True)
        req = runs.loc[runs["dir"] == 0]
        nxt = runs.shift(-1).loc[req.index]
        pair = nxt["dir"] == 1
        req, resp = req.loc[pair], nxt.loc[pair]
        frame = pd.DataFrame({
            "request_start": req["start"].to_numpy(), "request_end": req["end"].to_numpy(),
            "request_bytes": req["bytes"].to_numpy(), "response_start": resp["start"].to_numpy(),
            "response_end": resp["end"].to_numpy(), "response_bytes": resp["bytes"].astype(int).to_numpy()})
        frame["wait_s"] = frame["response_start"] - frame["request_end"]
        frame["total_s"] = frame["response_end"] - frame["request_start"]
        self.out["requests"] = frame

    # --- the capture itself --------------------------------------------------------------------------
    def _capture(self) -> None:
        """How complete the capture of this flow is: distinct payload bytes it holds (of
        ``payload_bytes``, first to last byte seen), holes Wireshark notices, headers cut by
        the snaplen, copies of frames, and timestamps that run backwards."""
        pk, data = self.pk, self.data
        captured = 0
        if len(data):
            order = np.argsort(data["seq"].to_numpy(), kind="stable")
            start = data["seq"].to_numpy()[order]
            end = start + data["len"].to_numpy()[order]
            reach = np.concatenate([[start[0]], np.maximum.accumulate(end)[:-1]])
            captured = int(np.clip(end - np.maximum(start, reach), 0, None).sum())
        self.out.update(duplicate_frames=self.duplicate_frames, captured_bytes=captured,
                        lost_segments=int(pk["lost_segment"].sum()), acked_unseen=int(pk["acked_unseen"].sum()),
                        truncated_packets=int(pk["snaplen_truncated"].sum()),
                        time_reversals=int((np.diff(pk["time_ns"].to_numpy()) < 0).sum()))

    # --- kernel telemetry -------------------------------------------------------------------------------
    def _telemetry(self) -> None:
        tel = self.telemetry_in
        if tel is None or len(tel) == 0:
            self.out.update(telemetry=None, telemetry_summary={})
            return
        info = self.info
        ends = [(str(info["client"]), int(info["client_port"])), (str(info["server"]), int(info["server_port"]))]
        (src, sport), (dst, dport) = ends if self.dd == 0 else ends[::-1]
        mine = tel.loc[(tel["src"].astype(str) == src) & (tel["sport"].astype(int) == sport)
                       & (tel["dst"].astype(str) == dst) & (tel["dport"].astype(int) == dport)]
        mine = mine.sort_values("time").reset_index(drop=True)
        summary: dict[str, Any] = {"samples": len(mine)}
        if len(mine):
            for col in ("cwnd", "ssthresh", "rtt", "pacing_rate", "delivery_rate", "skmem_tb", "notsent"):
                if col in mine:
                    summary[f"{col}_median"] = float(pd.to_numeric(mine[col], errors="coerce").median())
            busy = float(mine["busy_s"].max()) if "busy_s" in mine else math.nan
            for col in ("rwnd_limited_s", "sndbuf_limited_s"):
                if col in mine and busy > 0:
                    summary[col.removesuffix("_s") + "_share"] = float(mine[col].max()) / busy
            if "app_limited" in mine:
                summary["app_limited_share"] = float(mine["app_limited"].astype(bool).mean())
        self.out.update(telemetry=mine, telemetry_summary=summary)


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
