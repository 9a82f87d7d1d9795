"""What limited a TCP transfer, read from its packets: :func:`diagnose`.

Each round trip of the transfer (a time bin of :class:`~.metrics.FlowMetrics`) gets the limit
its packets show (:func:`round_states`, computed with the metrics); the shares of time give
:attr:`Diagnosis.limits`, and
the largest names the diagnosis, once the "sender side" is split by what else the packets,
the run's context or the kernel's ``ss`` telemetry say. Verdicts that few packets suffice for
(a silent peer, a closed window) come first; too little evidence is ``undetermined``, never a
guess. The order of the rules is the code's: :meth:`_Reasoner.conclude` and
:meth:`_Reasoner._split_sender_side`. The labels are stable codes; their words are in
:mod:`tcplab.words` (``label.``, ``evidence.``, ``caveat.``).

:func:`diagnose` is one flow; :func:`diagnose_flows` every flow of a capture (``tcplab diagnose
--all``), from the metrics of all of them computed in one compiled pass: the same rules on the
same numbers, so each flow gets the verdict it gets alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from ..params import Params, param
from ..units import format_byte_rate, format_duration, format_rate, format_share, format_size
from ..params import check_language
from ..words import Messages
from . import theory
from ._metrics_kernel import MIN_EXCHANGES  # noqa: F401  (the metrics count the turns; a rule of the diagnosis)
from .metrics import CAPTURE_FIELDS, MIN_GAP_S, FlowMetrics, all_flow_metrics, flow_metrics
from .packets import PacketTable

__all__ = ["Diagnosis", "DiagnosisContext", "diagnose", "diagnose_flows", "LABELS", "MIN_SHARE"]

LABELS = ("sender-buffer-limited", "receiver-window-limited", "zero-window", "congestion-loss", "path-bandwidth",
          "application-limited", "nagle-delayed-ack", "window-scaling-absent", "slow-start", "cwnd-limited",
          "peer-unresponsive", "undetermined")
#: The dominant limit must explain at least this share of the transfer's round trips.
MIN_SHARE = 0.5
#: Fewer data packets than this tell nothing.
MIN_DATA_PACKETS = 4
#: A transfer over within this many round trips is dominated by slow start.
SLOW_START_ROUNDS = 8
#: RTT growth (p90 over min) that still counts as flat, and that surely means a queue.
RTT_FLAT, RTT_QUEUE = 1.25, 1.5
#: Sender side means in flight at most this share of the receiver's window.
SENDER_SIDE_WINDOW_SHARE = 0.5
#: Goodput at least this share of the path's best possible is path-bandwidth.
PATH_RATE_SHARE = 0.8
#: Kernel telemetry naming a limit for at least this share of the busy time settles it.
TELEMETRY_SHARE = 0.3
#: Telemetry giving each buffer less than this share of the busy time leaves the cwnd.
TELEMETRY_NONE = 0.05
#: Bytes in flight growing by this factor from the second to the last quarter of the
#: transfer: a window still opening (congestion avoidance), not a fixed buffer.
INFLIGHT_GROWTH = 1.3
#: The receiver's window explains a rate only if the rate reaches at least this share of
#: window / RTT; below it, with round trips growing behind a queue, the queue sets the pace.
WINDOW_EXPLAINS = 0.5
#: A receiver-window-limited rate under this share of window / RTT: the window was full whenever
#: it was open, but reopened more slowly than a round trip, as the receiving application read, so
#: the reader's pace sets the rate under the window's cap and the evidence says so. Case 10's pacer
#: (20.5 KB/s of reads behind SO_RCVBUF 1024): 20.4 KB/s measured under 28.8 KB/s of window / RTT,
#: which the page showed as a prediction its own run contradicted (the teacher's read, item 14).
READER_PACED_SHARE = 0.8
#: A queue at the path's bottleneck delays a segment by at most the bytes in flight ahead of it
#: at the path's rate. Round trips that grow by more than this many times that (plus the 2 ms of
#: scheduling slack) waited elsewhere: at a receiver that sent its ACKs only as its application
#: read. Measured on case 02's slow reader (4 Mbit/s behind an 8 KB SO_RCVBUF on a 100 Mbit/s
#: veth): 17.4 ms of growth where 8.5 KB in flight queue for 0.7 ms at the line.
QUEUE_SLACK = 2.0
#: A sender silent with data in flight, waiting for ACKs, for at least this share of the
#: transfer is held by a window: a full path clocks it out by ACKs and never waits. Measured on
#: the shipped runs of case 01 (20 ms, 100 Mbit/s): 84 % for cubic behind a 16 KB SO_SNDBUF,
#: whose bursts at line rate build a queue that drains between them; 5-39 % where the line
#: is the limit. It counts only where the goodput spaces segments far closer than a wait
#: (``MIN_GAP_S``): on a slow line the ACK clock alone spaces them that far.
ACK_WAIT_SHARE = 0.5
#: "Far closer": a segment's time at the goodput at most this share of ``MIN_GAP_S`` (1.25 ms:
#: goodput above ~9 Mbit/s for 1448-byte segments).
ACK_CLOCK_SHARE = 0.25
#: A sender that spent at least this share of its transfer in pauses it ended by itself, not at
#: an ACK, was paced by its application's writes, not held by a window.
APP_PACED_SHARE = 0.3
#: Seen from the receiver, losses name a sender-side limit when at least this share of the round
#: trips saw one (or a recovery): the congestion window they cut, not a buffer that met a stray drop.
LOSS_ROUNDS = 0.2
#: A standing queue: the typical round trip at least this many times the fastest, plus 2 ms.
STANDING_QUEUE = RTT_QUEUE
#: The qualifier a path-bandwidth verdict carries where its round trips wait in a standing queue.
STANDING_QUEUE_QUALIFIER = "standing-queue"
SENDER_SIDE = "sender-side"

@dataclass(frozen=True)
class DiagnosisContext(Params):
    """What a run knows that its capture alone does not, in stored units (bit/s, seconds,
    bytes); every field may be unset. :meth:`of` reads it from what a run record says."""

    rate_bps: float | None = param("float", None, "the path's configured rate, bit/s", low=0.0, low_open=True,
                                   optional=True)
    rtt_s: float | None = param("float", None, "the path's configured round trip, seconds", low=0.0, low_open=True,
                                optional=True)
    sndbuf: int | None = param("int", None, "SO_SNDBUF the sender asked for, bytes", low=1, optional=True)
    sndbuf_effective: int | None = param("int", None, "SO_SNDBUF the sender's kernel gave, bytes", low=1,
                                         optional=True)
    rcvbuf: int | None = param("int", None, "SO_RCVBUF the receiver asked for, bytes", low=1, optional=True)
    rcvbuf_effective: int | None = param("int", None, "SO_RCVBUF the receiver's kernel gave, bytes", low=1,
                                         optional=True)
    cc: str | None = param("str", None, "the sender's congestion control", optional=True)
    wmem_max: int | None = param("int", None, "net.core.wmem_max, bytes", low=1, optional=True)
    rmem_max: int | None = param("int", None, "net.core.rmem_max, bytes", low=1, optional=True)
    mtu: int | None = param("int", None, "the path's MTU, bytes", low=1, optional=True)
    receiver_prunes: int | None = param("int", None, "times the receiver's kernel pruned its queue for lack of "
                                        "memory (nstat PruneCalled + RcvPruned)", low=0, optional=True)

    @classmethod
    def of(cls, *, spec: Any, workload: Any, app: Any, counters: Mapping[str, Mapping[str, int]] | None = None
           ) -> "DiagnosisContext":
        """From what a run record says (its path's :class:`~tcplab.lab.PathSpec`, its workload,
        the sockets its programs read back, the kernel counters it moved): ``Trial.diagnosis_context``
        of a case's run."""
        sockets = (app.sockets if app is not None else None) or {}
        sends, receives = sockets.get(workload.sender(), {}), sockets.get(workload.receiver(), {})
        out: dict[str, Any] = {"rate_bps": spec.rate, "rtt_s": 2 * spec.one_way_delay or None,
                               "cc": sends.get("cc") or None, "mtu": spec.mtu}
        if sends.get("sndbuf_requested"):
            out["sndbuf"], out["sndbuf_effective"] = sends["sndbuf_requested"], sends["sndbuf"]
        if receives.get("rcvbuf_requested"):
            out["rcvbuf"], out["rcvbuf_effective"] = receives["rcvbuf_requested"], receives["rcvbuf"]
        if counters:
            moved = counters.get(workload.receiver(), {})
            out["receiver_prunes"] = int(moved.get("TcpExtPruneCalled", 0) + moved.get("TcpExtRcvPruned", 0))
        return cls(**out)

    def known(self) -> dict[str, Any]:
        """The fields that are set."""
        return {k: v for k, v in self.to_dict().items() if v is not None}


@dataclass
class Diagnosis:
    """``label``: the dominant limit (a code of :data:`LABELS`); ``limits``: (label, share of
    the transfer's round trips), largest first; ``evidence``: the numbers behind it;
    ``sentences``: the evidence in words; ``summary``: one line."""

    label: str
    title: str
    explanation: str
    limits: list[tuple[str, float]]
    evidence: dict[str, Any]
    sentences: list[str]
    summary: str
    metrics: FlowMetrics = field(repr=False)
    caveats: list[str] = field(default_factory=list)  # what the capture lacks; also in sentences
    #: What the label carries beside it (``standing-queue``: round trips grown behind a full bottleneck queue).
    qualifiers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from .metrics import _json_ready

        return {"label": self.label, "title": self.title, "explanation": self.explanation,
                "limits": [[k, v] for k, v in self.limits], "evidence": _json_ready(self.evidence),
                "sentences": self.sentences, "caveats": self.caveats, "qualifiers": self.qualifiers,
                "summary": self.summary,
                "metrics": self.metrics.to_dict()}


def diagnose(table: PacketTable, flow: int | None = None, *, telemetry: pd.DataFrame | None = None,
             context: DiagnosisContext | Mapping[str, Any] | None = None, language: str = "en") -> Diagnosis:
    """Diagnose ``flow`` (default: the largest) of ``table``; see the module docstring.

    ``context`` is what a run knows (:class:`DiagnosisContext`, or a mapping of its fields in
    stored units). Unknown keys are a :class:`ParameterError`, so a typo does not silently
    weaken the diagnosis.
    """
    context = _check_context(context)
    words = Messages(check_language(language))
    metrics = flow_metrics(table, flow, telemetry=telemetry)
    return _Reasoner(metrics, context, words).conclude()


def diagnose_flows(table: PacketTable, flows: Sequence[int] | None = None, *,
                   context: DiagnosisContext | Mapping[str, Any] | None = None,
                   language: str = "en") -> Iterator[Diagnosis]:
    """The diagnosis of each of ``flows`` (default: every flow with packets), in that order,
    one at a time: a capture of many flows never holds all their diagnoses. Each equals
    :func:`diagnose` of that flow alone (without telemetry, which is one flow's)."""
    context = _check_context(context)
    words = Messages(check_language(language))
    for metrics in all_flow_metrics(table, flows):
        yield _Reasoner(metrics, context, words).conclude()


def _check_context(context: DiagnosisContext | Mapping[str, Any] | None) -> dict[str, Any]:
    """The context's set fields; a mapping is checked as a :class:`DiagnosisContext`."""
    if not isinstance(context, DiagnosisContext):
        context = DiagnosisContext.from_settings(dict(context or {}))
    return context.known()


def round_states(m: FlowMetrics) -> pd.Series:
    """The limit each time bin (about one round trip) of the transfer shows; None: nothing
    happened. Computed with the metrics (:mod:`._metrics_kernel`, ``_round_states``): activity
    is the sender side, bytes in flight at the receiver's window (within 2 MSS) its window,
    gaps their reason's limit, a loss or a recovery (and the round trip after it) congestion,
    any closed window zero-window; each rule overrides the ones before it."""
    return m.series()["round_states"]


class _Reasoner:
    """Turns metrics (and context) into a Diagnosis: one method per label's evidence."""

    def __init__(self, m: FlowMetrics, context: dict, words: Messages) -> None:
        self.m, self.context, self.words = m, context, words
        self.evidence: dict[str, Any] = {}
        self.sentences: list[str] = []
        self.rtt = context.get("rtt_s") or m.rtt_s
        self._pending: list[str] = []  # the evidence of an "undetermined" found while splitting
        self._cwnd_reason: str | None = None  # set when the split finds the cwnd holding the sender
        self._window_held_by_queue = False  # set when a queue outranks the receiver's full window
        self._acks_held = False  # set when round trips grow more than any queue at the path's rate can make them
        self._paced = False  # set when the split finds the application's writes pacing the sender
        self.qualifiers: list[str] = []

    # --- the decision ------------------------------------------------------------------------
    def conclude(self) -> Diagnosis:
        m = self.m
        rounds = sum(m.facts.rounds.values())
        # Largest first, ties by first appearance (the metrics count them in that order); a
        # plain dict, not a Series: --all concludes tens of thousands of these.
        shares = {k: v / rounds for k, v in m.facts.rounds.items()}
        self.evidence.update(rounds=rounds, shares=dict(shares))
        # Shares of the flow (first to last packet, which holds the transfer), not of the
        # transfer: a silent peer or a closed window may outlast the last acknowledged byte.
        if m.unanswered_resends >= 2 and m.duration_s > 0 and m.unanswered_s >= MIN_SHARE * m.duration_s:
            silent = m.unanswered_s / m.duration_s
            limits = {"peer-unresponsive": silent,
                      **{k: v * (1 - silent) for k, v in shares.items() if v * (1 - silent) > 0}}
            return self._done("peer-unresponsive", limits, self._peer_unresponsive(silent))
        if m.zero_window_s > 0 and shares.get("zero-window", 0.0) >= MIN_SHARE:
            return self._done("zero-window", shares, self._zero_window(shares["zero-window"]))
        if m.data_packets < MIN_DATA_PACKETS:
            return self._done("undetermined", shares, self._say("undetermined-few", data_packets=m.data_packets))
        best, share = next(iter(shares.items()), ("undetermined", 0.0))
        if self._short_transfer() and best in (SENDER_SIDE, "receiver-window-limited"):
            return self._done("slow-start", shares, self._slow_start(share))
        if share < MIN_SHARE:
            name = best if best != SENDER_SIDE else self.words("diagnosis.sender_side")
            return self._done("undetermined", shares, self._say("undetermined-weak", best=name, share=format_share(share)))
        label = best
        if best == SENDER_SIDE:
            label = self._split_sender_side()
        elif best == "receiver-window-limited" and self._queue_holds_the_window():
            label = "path-bandwidth"
            self._window_held_by_queue = True
        elif best == "receiver-window-limited" and m.window_scaling == "off" and m.rwnd_max_bytes <= 65535 \
                and not self._acks_held:  # a receiver answering late holds the rate, whatever its window's cap
            label = "window-scaling-absent"
        elif best == "congestion-loss" and self._at_path_rate():
            # A flow that fills the path loses what overflows the bottleneck's queue: the
            # losses are how the path says it is full, not what holds the flow back.
            label = "path-bandwidth"
        if label == "undetermined":
            return self._done(label, shares, self._pending)
        if label != best and label in shares:
            share = shares[label]  # the label's own round trips, not the sender side's
        return self._done(label, shares, EVIDENCE[label](self, share))

    def _split_sender_side(self) -> str:
        m = self.m
        tel = m.telemetry_summary
        if tel.get("sndbuf_limited_share", 0) >= TELEMETRY_SHARE:
            return "sender-buffer-limited"
        if tel.get("rwnd_limited_share", 0) >= TELEMETRY_SHARE:
            return "receiver-window-limited"
        if self._at_path_rate():
            return "path-bandwidth"
        if self.turns is not None:
            return "application-limited"
        if m.vantage == "sender" and m.facts.self_woken_share >= APP_PACED_SHARE:
            # It resumed sending when it wrote, not when an ACK opened a window: the writes set
            # the pace, whatever the kernel's counters say of buffers.
            self._paced = True
            return "application-limited"
        if m.vantage == "receiver" and not tel:
            return self._split_at_the_receiver()
        growth = self._rtt_growth()
        if growth >= RTT_QUEUE:
            if self._ack_wait_share() < ACK_WAIT_SHARE:
                return "path-bandwidth"
            # A queue that bursts built and that drained between them: a window held the sender.
            if self.context.get("sndbuf"):
                return "sender-buffer-limited"
            self._pending = self._say("undetermined-bursts", rtt_min=_dur(m.rtt_min_s), rtt_p90=_dur(m.rtt_p90_s),
                                      wait=format_share(self._ack_wait_share()))
            return "undetermined"
        cwnd_reason = self._cwnd_holds()
        if cwnd_reason:
            self._cwnd_reason = cwnd_reason
            return "congestion-loss" if _lost(m) else "cwnd-limited"
        window_share = m.inflight_plateau_bytes / m.rwnd_median_bytes if m.rwnd_median_bytes > 0 else math.nan
        if growth <= RTT_FLAT and (window_share <= SENDER_SIDE_WINDOW_SHARE or self.context.get("sndbuf")):
            return "sender-buffer-limited"
        self._pending = self._say("undetermined-rtt", rtt_min=_dur(m.rtt_min_s), rtt_p90=_dur(m.rtt_p90_s))
        return "undetermined"

    def _split_at_the_receiver(self) -> str:
        """The sender side seen from the receiver, whose bytes in flight are an estimate: the
        path where data arrives back to back at a steady rate behind a queue, the losses where
        it saw holes, the congestion window where the flight keeps growing; a sender's buffer
        and a congestion window that stopped growing look alike here."""
        m = self.m
        if self._arrivals_fill_the_path() and (self._rtt_growth() >= RTT_QUEUE or _lost(m)):
            return "path-bandwidth"
        if _lost(m) and m.facts.rounds.get("congestion-loss", 0) >= LOSS_ROUNDS * sum(m.facts.rounds.values()):
            return "congestion-loss"
        if self.inflight_growth >= INFLIGHT_GROWTH:
            # The bytes arriving per round trip keep growing: a window still opening, which a
            # fixed send buffer never is (the estimate follows the sender's flight).
            self._cwnd_reason = "growth"
            return "cwnd-limited"
        self._pending = self._say("undetermined-vantage", **self._common())
        return "undetermined"

    def _arrivals_fill_the_path(self) -> bool:
        """Next to the receiver: the goodput is at least ``PATH_RATE_SHARE`` of the rate new data
        arrives at back to back (the bottleneck's), so the bottleneck was hardly ever idle."""
        rate = self.m.facts.arrival_rate_bps
        return math.isfinite(rate) and rate > 0 and self.m.goodput_bps >= PATH_RATE_SHARE * rate

    def _queue_holds_the_window(self) -> bool:
        """Round trips growing behind a queue while the receiver's window is full, and far less
        delivered than window / RTT: the queue holds the window, and a larger one would only
        lengthen it (an upload behind a slow link's deep queue)."""
        predicted = self._predicted(self.m.rwnd_median_bytes)
        if not (self._rtt_growth() >= RTT_QUEUE and math.isfinite(predicted) and
                self.m.goodput_bps < WINDOW_EXPLAINS * predicted):
            return False
        if self._queue_fits_the_path():
            return True
        self._acks_held = True
        return False

    def _queue_delay_most_s(self) -> float:
        """The longest a queue at the path's known rate can delay a segment: the most in flight
        ahead of it, sent at the rate; infinite where the rate is unknown (the queue may sit
        anywhere, behind any link)."""
        rate = self.context.get("rate_bps")
        if not rate or not math.isfinite(self.m.inflight_max_bytes):
            return math.inf
        return 8 * self.m.inflight_max_bytes / self._max_goodput(rate)

    def _queue_fits_the_path(self) -> bool:
        m = self.m
        return m.rtt_p90_s - m.rtt_min_s <= QUEUE_SLACK * self._queue_delay_most_s() + 0.002

    def _at_path_rate(self) -> bool:
        rate = self.context.get("rate_bps")
        return bool(rate) and self.m.goodput_bps >= PATH_RATE_SHARE * self._max_goodput(rate)

    @property
    def turns(self) -> int | None:
        """How many messages the sender sent when the flow takes turns with its peer, each
        out within a round trip and started with nothing else of its own in flight (so the
        wait for the peer, not TCP, sets the pace); else None. Data clocked out by ACKs while
        the peer also talks (application acknowledgements beside one-way bulk, like IRC DCC's
        4-byte byte counts) takes none. Counted with the metrics (``_turns``)."""
        return self.m.facts.turns

    def _cwnd_holds(self) -> str | None:
        """Why the congestion window, not a buffer, holds the sender ("telemetry", "growth",
        "loss"), or None when nothing says so."""
        m = self.m
        tel = m.telemetry_summary
        if "sndbuf_limited_share" in tel:
            # ss prints a limit only once the kernel counted some: no number means none.
            shares = [tel.get(k) for k in ("sndbuf_limited_share", "rwnd_limited_share")]
            if all(not (x is not None and math.isfinite(x) and x >= TELEMETRY_NONE) for x in shares):
                return "telemetry"
            return None
        if self.context.get("sndbuf"):
            return None
        if self.inflight_growth >= INFLIGHT_GROWTH:
            return "growth"
        if _lost(m):
            return "loss"
        return None

    @property
    def inflight_growth(self) -> float:
        """Bytes in flight (90th percentile) in the last quarter of the transfer over the second
        (the first holds slow start)."""
        return self.m.facts.inflight_growth

    def _ack_wait_share(self) -> float:
        """The share of the transfer the sender spent silent with data in flight, waiting for
        ACKs; 0 where the goodput is so slow that the ACK clock alone makes such waits."""
        m = self.m
        segment_s = 8 * (m.mss or 1448) / m.goodput_bps if m.goodput_bps > 0 else math.inf
        if m.transfer_s <= 0 or segment_s > ACK_CLOCK_SHARE * MIN_GAP_S:
            return 0.0
        return m.gap_s_by_reason.get("ack-wait", 0.0) / m.transfer_s

    def _rtt_growth(self) -> float:
        m = self.m
        if not (math.isfinite(m.rtt_min_s) and math.isfinite(m.rtt_p90_s)) or m.rtt_min_s <= 0:
            return math.nan
        # 2 ms of slack: scheduling noise on a loaded machine is not a queue.
        return (m.rtt_p90_s - 0.002) / m.rtt_min_s

    def _short_transfer(self) -> bool:
        m = self.m
        rtt = m.rtt_s
        return math.isfinite(rtt) and rtt > 0 and m.transfer_s < SLOW_START_ROUNDS * rtt and not _lost(m) \
            and m.zero_window_packets == 0

    def _max_goodput(self, rate: float) -> float:
        return theory.max_goodput(rate, int(self.context.get("mtu", 1500)), ts=self.m.facts.ts_samples > 0)

    # --- evidence per label -------------------------------------------------------------------
    def _predicted(self, window: float) -> float:
        rtt = self.rtt
        if not (math.isfinite(rtt) and rtt > 0 and math.isfinite(window)):
            return math.nan
        return theory.window_limited_throughput(window, rtt, self.context.get("rate_bps"))

    def _goodput(self) -> str:
        """The flow's goodput with the span it is timed over: a page that also shows the
        application's time, or a steady second half, shows a slightly different rate."""
        return self.words("diagnosis.goodput_span", goodput=_rate_bytes(self.m.goodput_bps))

    def _common(self) -> dict[str, str]:
        m = self.m
        return {"goodput": self._goodput(), "rtt": _dur(self.rtt), "rtt_min": _dur(m.rtt_min_s),
                "rtt_p90": _dur(m.rtt_p90_s), "rwnd": _size(m.rwnd_median_bytes), "rwnd_max": _size(m.rwnd_max_bytes),
                "inflight_plateau": _size(m.inflight_plateau_bytes), "inflight_mean": _size(m.inflight_mean_bytes),
                "inflight_max": _size(m.inflight_max_bytes)}

    def _sender_buffer_limited(self, share: float) -> list[str]:
        m = self.m
        predicted = self._predicted(m.inflight_plateau_bytes)
        self.evidence.update(inflight_plateau_bytes=m.inflight_plateau_bytes, rwnd_bytes=m.rwnd_median_bytes,
                             predicted_bps=predicted, goodput_bps=m.goodput_bps, rtt_s=self.rtt)
        out = self._say("sender-buffer-limited", predicted=_rate_bytes(predicted), **self._common())
        sndbuf = self.context.get("sndbuf")
        tel = m.telemetry_summary
        if sndbuf:
            effective = self.context.get("sndbuf_effective") or (
                theory.effective_sndbuf(int(sndbuf), int(self.context["wmem_max"])) if self.context.get("wmem_max")
                else 2 * sndbuf)
            self.evidence.update(sndbuf=sndbuf, sndbuf_effective=effective)
            out += self._say("sender-buffer-context", sndbuf=_size(sndbuf), sndbuf_effective=_size(effective))
        elif "sndbuf_limited_share" not in tel:
            out += self._say("sender-side-either", rtt_min=_dur(m.rtt_min_s), rtt_p90=_dur(m.rtt_p90_s))
        return out + self._telemetry()

    def _receiver_window_limited(self, share: float) -> list[str]:
        m = self.m
        if self._acks_held:
            return self._receiver_acks_held(share)
        predicted = self._predicted(m.rwnd_median_bytes)
        self.evidence.update(rwnd_bytes=m.rwnd_median_bytes, predicted_bps=predicted, goodput_bps=m.goodput_bps,
                             rtt_s=self.rtt)
        out = self._say("receiver-window-limited", share=format_share(share), predicted=_rate_bytes(predicted),
                        **self._common())
        if predicted > 0 and m.goodput_bps < READER_PACED_SHARE * predicted:
            out += self._say("receiver-window-reader-paced", ratio=format_share(m.goodput_bps / predicted),
                             goodput=_rate_bytes(m.goodput_bps))
        return out + self._receiver_flight() + self._telemetry()

    def _receiver_flight(self) -> list[str]:
        """How bytes in flight were counted where the capture sat next to the receiver."""
        return self._say("receiver-flight", rtt=_dur(self.m.rtt_s)) if self.m.vantage == "receiver" else []

    def _receiver_acks_held(self, share: float) -> list[str]:
        """The window is full and the round trips grow, but by more than a queue at the path's
        rate can hold: the receiver answered late (a slow reader behind a small buffer), so its
        window over the round trips as measured, not the path's, sets the rate."""
        m = self.m
        rate = float(self.context["rate_bps"])
        predicted = theory.window_limited_throughput(m.rwnd_median_bytes, m.rtt_median_s, rate)
        queue_s = self._queue_delay_most_s()
        self.evidence.update(rwnd_bytes=m.rwnd_median_bytes, predicted_bps=predicted, goodput_bps=m.goodput_bps,
                             rtt_s=m.rtt_median_s, rtt_min_s=m.rtt_min_s, rtt_p90_s=m.rtt_p90_s, rate_bps=rate,
                             queue_delay_most_s=queue_s)
        return self._say("receiver-window-acks-held", share=format_share(share), rate=format_rate(rate), queue=_dur(queue_s),
                         rtt_median=_dur(m.rtt_median_s), predicted=_rate_bytes(predicted),
                         **self._common()) + self._telemetry()

    def _window_scaling_absent(self, share: float) -> list[str]:
        m = self.m
        predicted = self._predicted(m.rwnd_max_bytes)
        self.evidence.update(window_scaling=m.window_scaling, rwnd_max_bytes=m.rwnd_max_bytes,
                             predicted_bps=predicted, goodput_bps=m.goodput_bps, rtt_s=self.rtt)
        return self._say("window-scaling-absent", window_scaling=self.words.cell(m.window_scaling),
                         predicted=_rate_bytes(predicted), **self._common()) + self._receiver_flight()

    def _zero_window(self, share: float) -> list[str]:
        m = self.m
        self.evidence.update(zero_window_packets=m.zero_window_packets, zero_window_s=m.zero_window_s,
                             persist_probes=m.persist_probes, window_updates=m.window_updates)
        return self._say("zero-window", zero_window_packets=m.zero_window_packets, zero_window=_dur(m.zero_window_s),
                         share=format_share(m.zero_window_s / m.duration_s if m.duration_s else 0.0),
                         persist_probes=m.persist_probes, window_updates=m.window_updates) + self._pruned()

    def _peer_unresponsive(self, share: float) -> list[str]:
        m = self.m
        self.evidence.update(unanswered_s=m.unanswered_s, unanswered_resends=m.unanswered_resends,
                             acked_bytes=m.acked_bytes, timeouts=m.timeouts)
        return self._say("peer-unresponsive", silence=_dur(m.unanswered_s), share=format_share(m.unanswered_s / m.duration_s),
                         resends=m.unanswered_resends, acked=_size(m.acked_bytes), payload=_size(m.payload_bytes))

    def _congestion_loss(self, share: float) -> list[str]:
        m = self.m
        mathis = math.nan
        lost = _loss_share(m)
        if lost > 0 and math.isfinite(self.rtt) and self.rtt > 0:
            mathis = theory.mathis_throughput(m.mss or 1460, self.rtt, min(lost, 1.0))
        self.evidence.update(retransmissions=m.retransmissions, resent_segments=m.resent_segments,
                             loss_fraction=lost, timeouts=m.timeouts, dup_acks=m.dup_acks, mathis_bps=mathis,
                             goodput_bps=m.goodput_bps)
        return self._say("congestion-loss", resent=_resends(m), loss=format_share(lost),
                         retransmissions=m.retransmissions,
                         fast_retransmissions=m.fast_retransmissions, timeouts=m.timeouts,
                         # Neither rule (a SACK recovery, a tail-loss probe): said, so the parts add up.
                         other_retransmissions=max(m.retransmissions - m.fast_retransmissions - m.timeouts, 0),
                         dup_acks=m.dup_acks, sack_blocks=m.sack_blocks, share=format_share(share), mathis=_rate_bytes(mathis),
                         goodput=self._goodput()) + (
            self._say("congestion-loss-cwnd") + self._cwnd_sentences() if self._cwnd_reason else []) + self._pruned()

    def _path_bandwidth(self, share: float) -> list[str]:
        m = self.m
        rate = self.context.get("rate_bps")
        self.evidence.update(goodput_bps=m.goodput_bps, rtt_min_s=m.rtt_min_s, rtt_p90_s=m.rtt_p90_s)
        out = []
        if rate:
            best = self._max_goodput(rate)
            self.evidence.update(rate_bps=rate, max_goodput_bps=best)
            out += self._say("path-bandwidth-rate", goodput=self._goodput(), rate_share=format_share(m.goodput_bps / best),
                             rate=format_rate(rate), max_goodput=_rate_bytes(best))
        if m.vantage == "receiver" and self._arrivals_fill_the_path():
            rate_in = m.facts.arrival_rate_bps
            self.evidence.update(arrival_rate_bps=rate_in)
            out += self._say("path-bandwidth-arrivals", arrivals=_rate_bytes(rate_in),
                             share=format_share(m.goodput_bps / rate_in), goodput=self._goodput())
        if self._window_held_by_queue:
            predicted = self._predicted(m.rwnd_median_bytes)
            self.evidence.update(rwnd_bytes=m.rwnd_median_bytes, predicted_bps=predicted)
            out += self._say("path-bandwidth-queue-window", predicted=_rate_bytes(predicted), **self._common())
        elif self._rtt_growth() >= RTT_QUEUE or not rate:
            out += self._say("path-bandwidth-queue", **self._common())
        if _lost(m):
            key = "path-bandwidth-overflow" if self._at_path_rate() else "path-bandwidth-queue-loss"
            out += self._say(key, resent=_resends(m), loss=format_share(_loss_share(m)))
        return out + self._standing_queue()

    def _standing_queue(self) -> list[str]:
        """A queue that stays: the typical round trip (median) grown past the fastest by
        ``STANDING_QUEUE`` (plus 2 ms). Its delay is the median's excess; its size what the
        goodput puts into that time. The latency every packet of the path pays, said beside
        the verdict (the ``standing-queue`` qualifier)."""
        m = self.m
        if not (math.isfinite(m.rtt_median_s) and math.isfinite(m.rtt_min_s) and m.rtt_min_s > 0) or \
                m.rtt_median_s - 0.002 < STANDING_QUEUE * m.rtt_min_s:
            return []
        delay = m.rtt_median_s - m.rtt_min_s
        size = delay * m.goodput_bps / 8 if math.isfinite(m.goodput_bps) else math.nan
        self.qualifiers.append(STANDING_QUEUE_QUALIFIER)
        self.evidence.update(queue_delay_s=delay, queue_bytes=size, rtt_median_s=m.rtt_median_s, rtt_min_s=m.rtt_min_s)
        return self._say("path-bandwidth-standing-queue", queue=_dur(delay), size=_size(size),
                         rtt_median=_dur(m.rtt_median_s), rtt_min=_dur(m.rtt_min_s),
                         times=f"{m.rtt_median_s / m.rtt_min_s:.1f}")

    def _pruned(self) -> list[str]:
        """A receiver short of memory closes its window and drops what it cannot queue: the
        same packets as a slow reader or a lossy path, told apart only by its counters."""
        prunes = self.context.get("receiver_prunes")
        if not prunes:
            return []
        self.evidence.update(receiver_prunes=prunes)
        return self._say("receiver-pruned", prunes=prunes)

    def _gap_evidence(self, key: str, gaps: int, total_s: float, median_s: float, share: float) -> list[str]:
        self.evidence.update(gaps=gaps, gap_s=total_s, gap_median_s=median_s if gaps else math.nan)
        return self._say(key, n_gaps=gaps, idle=_dur(total_s), stall=_dur(median_s) if gaps else "-",
                         share=format_share(share))

    def _application_limited(self, share: float) -> list[str]:
        m, f = self.m, self.m.facts
        out = []
        turns = self.turns
        if turns is not None:
            wait = f.turn_wait_median_s  # from one message to the next
            self.evidence.update(exchanges=turns, message_median_bytes=f.turn_bytes_median,
                                 peer_wait_median_s=wait, rtt_s=self.rtt, goodput_bps=m.goodput_bps)
            out += self._say("application-exchanges", exchanges=turns, message=_size(f.turn_bytes_median),
                             wait=_dur(wait), rtt=_dur(self.rtt), goodput=self._goodput())
        if self._paced:
            self.evidence.update(self_woken_share=f.self_woken_share, goodput_bps=m.goodput_bps,
                                 inflight_max_bytes=m.inflight_max_bytes)
            out += self._say("application-paced", share=format_share(f.self_woken_share), goodput=self._goodput(),
                             inflight_max=_size(m.inflight_max_bytes), rtt=_dur(self.rtt))
        if f.app_gaps or (turns is None and not self._paced):
            out += self._gap_evidence("application-limited", f.app_gaps, f.app_gap_s, f.app_gap_median_s, share)
            if f.peer_wait_gaps:
                out += self._say("application-peer-wait", n_woken=f.peer_wait_gaps)
        return out

    def _cwnd_limited(self, share: float) -> list[str]:
        m = self.m
        self.evidence.update(rwnd_bytes=m.rwnd_median_bytes, goodput_bps=m.goodput_bps, rtt_s=self.rtt,
                             cwnd_evidence=self._cwnd_reason)
        growth = self.inflight_growth
        if math.isfinite(growth) and growth >= INFLIGHT_GROWTH:
            # A window still opening has no plateau to predict a rate from: "mostly near" one
            # value, and window / RTT of it, would contradict the growth said beside them.
            return self._say("cwnd-limited-growing", **self._common()) + self._cwnd_sentences()
        predicted = self._predicted(m.inflight_plateau_bytes)
        self.evidence.update(inflight_plateau_bytes=m.inflight_plateau_bytes, predicted_bps=predicted)
        return self._say("cwnd-limited", predicted=_rate_bytes(predicted), **self._common()) + self._cwnd_sentences()

    def _cwnd_sentences(self) -> list[str]:
        """Why the window in use is the congestion window, as :meth:`_cwnd_holds` found it."""
        m = self.m
        tel = m.telemetry_summary
        out = []
        if self._cwnd_reason == "telemetry":
            out += self._say("cwnd-telemetry")
        growth = self.inflight_growth
        if math.isfinite(growth) and growth >= INFLIGHT_GROWTH:
            self.evidence.update(inflight_growth=growth)
            out += self._say("cwnd-growth", growth=f"{growth:.1f}")
        if self._cwnd_reason == "loss":
            out += self._say("cwnd-loss", resent=_resends(m))
        if math.isfinite(tel.get("cwnd_median", math.nan)):
            ssthresh = tel.get("ssthresh_median", math.nan)
            out += self._say("telemetry-cwnd-ssthresh", cwnd=_segments(tel["cwnd_median"]),
                             ssthresh=_segments(ssthresh))
        return out

    def _nagle_delayed_ack(self, share: float) -> list[str]:
        f = self.m.facts
        return self._gap_evidence("nagle-delayed-ack", f.nagle_gaps, f.nagle_gap_s, f.nagle_gap_median_s, share)

    def _slow_start(self, share: float) -> list[str]:
        m = self.m
        rounds = m.transfer_s / m.rtt_s
        self.evidence.update(transfer_s=m.transfer_s, rounds=rounds, inflight_max_bytes=m.inflight_max_bytes)
        # A transfer shorter than a round trip (seen from the receiver) is not "0.0 round trips".
        shown = f"{rounds:.1f}" if rounds >= 1 else f"{rounds:.2g}"
        return self._say("slow-start", transfer=_dur(m.transfer_s), rounds=shown, inflight_max=_size(m.inflight_max_bytes))

    def _telemetry(self) -> list[str]:
        tel = self.m.telemetry_summary
        out = []
        # ss prints a limit's time only once the kernel has counted some: no number, no sentence.
        for key, share in (("telemetry-sndbuf", "sndbuf_limited_share"), ("telemetry-rwnd", "rwnd_limited_share")):
            if math.isfinite(tel.get(share, math.nan)):
                out += self._say(key, share=format_share(tel[share]))
        if math.isfinite(tel.get("cwnd_median", math.nan)):
            out += self._say("telemetry-cwnd", cwnd=_segments(tel["cwnd_median"]))
        return out

    # --- words ------------------------------------------------------------------------------------
    def _say(self, key: str, **values: Any) -> list[str]:
        return [self.words(f"evidence.{key}", **values)]

    def _done(self, label: str, shares: dict[str, float], sentences: list[str]) -> Diagnosis:
        title = self.words(f"label.{label}.title")
        limits: dict[str, float] = {}
        for k, v in shares.items():
            name = self._side_name(label) if k == SENDER_SIDE else k
            limits[name] = limits.get(name, 0.0) + float(v)
        caveats = self._caveats()
        sentences = sentences + caveats
        summary = self.words("diagnosis.summary", title=title, evidence=self.words("diagnosis.evidence_separator").join(sentences))
        return Diagnosis(label=label, title=title, explanation=self.words(f"label.{label}.explanation"),
                         limits=sorted(limits.items(), key=lambda kv: -kv[1]), evidence=self.evidence,
                         sentences=sentences, summary=summary, metrics=self.m, caveats=caveats,
                         qualifiers=self.qualifiers if label == "path-bandwidth" else [])

    def _caveats(self) -> list[str]:
        """What the capture lacks or holds twice, said beside any verdict it qualifies."""
        m = self.m
        out = []
        if m.duplicate_frames:
            out.append(self.words("caveat.duplicate-frames", n=m.duplicate_frames))
        if m.payload_bytes and m.captured_bytes < m.payload_bytes:
            missing = m.payload_bytes - m.captured_bytes
            out.append(self.words("caveat.bytes-missing", missing=_size(missing), payload=_size(m.payload_bytes),
                                  share=format_share(missing / m.payload_bytes)))
        if m.lost_segments or m.acked_unseen:
            out.append(self.words("caveat.holes", lost=m.lost_segments, unseen=m.acked_unseen))
        if m.truncated_packets:
            out.append(self.words("caveat.truncated", n=m.truncated_packets))
        if m.time_reversals:
            out.append(self.words("caveat.time-reversals", n=m.time_reversals))
        self.evidence.update(capture={k: getattr(m, k) for k in CAPTURE_FIELDS})
        return out

    def _side_name(self, label: str) -> str:
        """The sender side, once split, is named by what it turned out to be."""
        if self._cwnd_reason:
            return "cwnd-limited"
        if label in ("sender-buffer-limited", "path-bandwidth", "slow-start", "application-limited"):
            return label
        return SENDER_SIDE


#: Each label's evidence: the method of :class:`_Reasoner` that gathers its numbers and says them,
#: given the label's share of the transfer. Every label but "undetermined" (whose evidence is
#: what the rules found missing) has one; checked below, at import.
EVIDENCE = {
    "sender-buffer-limited": _Reasoner._sender_buffer_limited,
    "receiver-window-limited": _Reasoner._receiver_window_limited,
    "zero-window": _Reasoner._zero_window,
    "congestion-loss": _Reasoner._congestion_loss,
    "path-bandwidth": _Reasoner._path_bandwidth,
    "application-limited": _Reasoner._application_limited,
    "nagle-delayed-ack": _Reasoner._nagle_delayed_ack,
    "window-scaling-absent": _Reasoner._window_scaling_absent,
    "slow-start": _Reasoner._slow_start,
    "cwnd-limited": _Reasoner._cwnd_limited,
    "peer-unresponsive": _Reasoner._peer_unresponsive,
}
if set(EVIDENCE) != set(LABELS) - {"undetermined"}:
    raise ImportError(f"diagnosis labels without evidence: {sorted(set(LABELS) - {'undetermined'} - set(EVIDENCE))}; "
                      f"evidence without a label: {sorted(set(EVIDENCE) - set(LABELS))}")


def _resends(m: FlowMetrics) -> int:
    """Segments resent: by sequence coverage, or Wireshark's count where that is higher."""
    return max(m.resent_segments, m.retransmissions)


def _loss_share(m: FlowMetrics) -> float:
    return max(m.loss_fraction, m.resent_fraction)


def _lost(m: FlowMetrics) -> bool:
    return _resends(m) > 0


def _segments(x: float) -> str:
    """A median count of segments as ss's samples give it: whole, or halfway between two."""
    return f"{round(x, 1):g}" if math.isfinite(x) else "-"


def _dur(x: float) -> str:
    return format_duration(x) if math.isfinite(x) else "-"


def _size(x: float) -> str:
    return format_size(x) if math.isfinite(x) else "unknown"


def _rate_bytes(bps: float) -> str:
    """A rate as bytes per second (decimal, as the course's tables) with bit/s beside it."""
    if not math.isfinite(bps):
        return "-"
    return f"{format_byte_rate(bps / 8)} ({format_rate(bps)})"
