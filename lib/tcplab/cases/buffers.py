"""Socket-buffer cases (01 send buffer, 02 receive buffer): the few numbers their notebooks
read off a :class:`~tcplab.cases.Trial` beyond what the trial itself offers, and the
machine's limits on socket buffers that every case setting ``SO_SNDBUF``/``SO_RCVBUF`` reads
(:class:`BufferLimits`).

Everything here works on a trial's record only (packets, ``ss`` samples, the side
programs' reports) or on values kept with the replay data, so it gives the same answer live
and in replay.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..analysis import theory
from ..analysis.table import flow_view
from ..lab import PathSpec, sysctl, tracefs
from ..lab.sysctl import RMEM_MAX, TCP_RMEM, TCP_WMEM, WMEM_MAX, socket_buffer_settings
from ..observe.sendmsg import parse_sendmsg, sendmsg_trace
from ..observe.ss import SENDING_STATES
from ..units import ParameterError, parse_size
from .trial import Trial

__all__ = ["send_wait", "burst_starts", "burst_spacing", "advertised_windows",
           "handshake_wscale", "handshake_window", "scaling_ratios", "sendbuf_row", "filling_frame", "rcvbuf_row", "goodput_frame",
           "sendmsg_summary", "trace_sendmsg", "autotuning_cap", "WMEM_MAX", "RMEM_MAX", "BufferLimits", "LimitChange"]

#: ``tcp_rmem``'s first two values as Linux ships them (both lab kernels): the least a socket's
#: receive buffer may shrink to under memory pressure, and the buffer a new socket starts with.
TCP_RMEM_MIN, TCP_RMEM_DEFAULT = 4096, 131072


def autotuning_cap(name: str, most: Any) -> str:
    """The ``tcp_rmem`` triple that lets receive-buffer autotuning grow a socket's buffer to at
    most ``most`` bytes (``tcp_rmem[2]``), the other two values as shipped; a cap below the
    starting buffer lowers the start with it, since a socket starts at ``tcp_rmem[1]`` whatever
    ``tcp_rmem[2]`` says. ``name``: the parameter that asked, for the error."""
    cap = parse_size(name, most)
    if cap < TCP_RMEM_MIN:
        raise ParameterError(name, most, f"a size of at least {TCP_RMEM_MIN} B (tcp_rmem[0], the least a buffer may shrink to)")
    return f"{TCP_RMEM_MIN} {min(TCP_RMEM_DEFAULT, cap)} {cap}"


def send_wait(trial: Trial) -> dict[str, float]:
    """Seconds the sending program spent inside ``send()`` and that time's share of the
    transfer (first write to last byte read), from the side program's own report."""
    side = (trial.app.extra or {}).get("sides", {}).get(trial.sender, {})
    waited = float(side.get("send_wait_s", float("nan")))
    return {"send_wait_s": waited, "send_wait_share": waited / trial.duration_s}


def burst_starts(times: np.ndarray | pd.Series, gap_s: float) -> np.ndarray:
    """Start times of the bursts in a sorted series of packet times: a burst begins after a
    silence longer than ``gap_s``."""
    t = np.asarray(times, dtype=float)
    if t.size == 0:
        return t
    return np.concatenate([t[:1], t[1:][np.diff(t) > gap_s]])


def burst_spacing(trial: Trial, gap_s: float = 0.005) -> float:
    """Median time between the starts of the sender's data bursts (NaN with fewer than 3)."""
    view, _, direction = flow_view(trial.packets)
    sent = view.loc[(view["dir"] == direction) & (view["len"] > 0), "rel_time"]
    starts = burst_starts(sent.sort_values(), gap_s)
    return float(np.median(np.diff(starts))) if starts.size >= 3 else float("nan")


def advertised_windows(packets: pd.DataFrame, receiver_dir: int) -> pd.Series:
    """Receive windows (bytes, scale applied) the receiver advertised after the handshake:
    its ACKs without SYN, indexed by ``rel_time``."""
    acks = packets[(packets["dir"] == receiver_dir) & packets["f_ack"] & ~packets["f_syn"] & (packets["win"] >= 0)]
    return acks.set_index("rel_time")["win"]


def handshake_wscale(packets: pd.DataFrame, from_dir: int) -> int | None:
    """The window-scale option in the SYN (or SYN-ACK) sent in direction ``from_dir``;
    None when it carried none."""
    syn = packets[(packets["dir"] == from_dir) & packets["f_syn"]]
    if syn.empty or int(syn["wscale"].iloc[0]) < 0:
        return None
    return int(syn["wscale"].iloc[0])


def handshake_window(packets: pd.DataFrame, from_dir: int) -> int | None:
    """The window field of the SYN (or SYN-ACK) sent in direction ``from_dir`` (never scaled)."""
    syn = packets[(packets["dir"] == from_dir) & packets["f_syn"]]
    return None if syn.empty else int(syn["win"].iloc[0])


def scaling_ratios(trace: pd.DataFrame) -> list[int]:
    """The receiver's learned ``scaling_ratio`` values (in 1/256) the tcp_rcvbuf_grow
    tracepoint reported, in order of first appearance."""
    if trace.empty or "scaling_ratio" not in trace:
        return []
    return [int(v) for v in pd.unique(trace["scaling_ratio"].dropna())]


def learned_scaling_ratio(trial: Trial) -> int | None:
    """The ``scaling_ratio`` the receiver learned (in 1/256): the last one its tracepoint
    reported, else, on a 6.6+ kernel with a fixed SO_RCVBUF, the one its window clamp was set
    with when the transfer ended (:func:`theory.scaling_ratio_from_clamp`; where nothing may
    trace, such as a user namespace); None where neither says, or it is still the start value."""
    if ratios := scaling_ratios(trial.trace):
        return ratios[-1]
    sock = trial.socket(trial.receiver)
    if not (trial.kernel and theory.uses_scaling_ratio(trial.kernel) and sock.get("rcvbuf_requested")
            and sock.get("window_clamp") and sock.get("rcvbuf")):
        return None
    ratio = theory.scaling_ratio_from_clamp(sock["window_clamp"], sock["rcvbuf"])
    return None if ratio == theory.TCP_DEFAULT_SCALING_RATIO else ratio


def _receiver_dir(trial: Trial) -> int:
    # dir 0 is client -> server in the packet table
    return 0 if trial.receiver == "client" else 1


def sendbuf_row(trial: Trial) -> dict[str, Any]:
    """One line of case 01's table: what the sender asked, got, queued and put in flight."""
    # Every sample while the sender still sends: an autotuned sender has often written all and
    # closed long before its data is out, and its window grows on after ESTAB.
    ss = trial.socket_samples(trial.sender, states=SENDING_STATES)
    sock = trial.socket(trial.sender)
    m = trial.metrics
    mss = ss["mss"].median() if len(ss) else float("nan")
    return {
        "variant": trial.label,
        "cc": sock.get("cc"),
        "SO_SNDBUF asked": sock.get("sndbuf_requested"),
        "getsockopt": sock.get("sndbuf"),
        "ss tb": ss["skmem_tb"].median() if len(ss) else float("nan"),
        "peak w (queued)": ss["skmem_w"].max() if len(ss) else float("nan"),
        "peak Send-Q": ss["send_q"].max() if len(ss) else float("nan"),
        # The median at each send once past the start-up ramp; a transfer too short to have
        # one falls back to goodput x RTT, the window it used on average.
        "in flight, median past ramp": m.inflight_mean_bytes if np.isnan(m.inflight_plateau_bytes)
        else m.inflight_plateau_bytes,
        "cwnd x MSS (median)": (ss["cwnd"] * mss).median() if len(ss) else float("nan"),
        "duration s": trial.duration_s,
        "goodput MB/s": trial.goodput_bps / 8e6,
        "in send() %": 100 * send_wait(trial)["send_wait_share"],
    }


def filling_frame(runs: dict[str, tuple[Trial, dict[str, float] | None]]) -> pd.DataFrame:
    """Case 01's exercise 3: for each run (a column, by label), how far the queued bytes ``w``
    overshot ``tb`` (``ss``), and how the copy loop filled the buffer (:func:`sendmsg_summary`
    of its trace; empty where the lab's kernel has no tracefs)."""
    columns = {}
    for label, (trial, traced) in runs.items():
        row = sendbuf_row(trial)
        columns[label] = {"peak w (queued)": row["peak w (queued)"], "ss tb": row["ss tb"],
                          "peak w / tb": row["peak w (queued)"] / row["ss tb"], **(traced or {})}
    return pd.DataFrame(columns)


def rcvbuf_row(trial: Trial) -> dict[str, Any]:
    """One line of case 02's table: the receiver's buffer, its window and what it allowed."""
    pk = trial.packets.packets
    rdir = _receiver_dir(trial)
    windows = advertised_windows(pk, rdir)
    sock = trial.socket(trial.receiver)
    ss = trial.socket_samples(trial.receiver)
    return {
        "variant": trial.label,
        "added RTT ms": 1000 * trial.rtt_s if trial.rtt_s else 0.0,
        "SO_RCVBUF asked": sock.get("rcvbuf_requested"),
        "ss rb": ss["skmem_rb"].median() if len(ss) else float("nan"),
        "wscale offered": handshake_wscale(pk, rdir),
        "handshake window": handshake_window(pk, rdir),
        "window median": float(windows.median()) if len(windows) else float("nan"),
        "window max": float(windows.max()) if len(windows) else float("nan"),
        "scaling_ratio": learned_scaling_ratio(trial),
        "Window Full": int(pk["window_full"].sum()),
        "duration s": trial.duration_s,
        "goodput KB/s": trial.goodput_bps / 8e3,  # a rate: KB/s = 1000 B/s, as every rate is written
    }


def kernel_windows(pairs: Mapping[str, tuple[Any, Any]], rb: int, mss: int) -> pd.DataFrame:
    """Case 02's two kernels side by side: for each lab kernel, its runs with
    ``tcp_adv_win_scale`` 1 and 2 (``pairs``: kernel → (run with 1, run with 2)), the window its
    own rule predicts and the median window it advertised.

    The prediction is the kernel's rule (6.6+: ``scaling_ratio``, the learned one where a
    run shows it, :func:`learned_scaling_ratio`; before: ``tcp_adv_win_scale``) applied to ``rb`` less one queued
    segment's true size, in whole segments of ``mss``: the window may grow only up to
    ``rcv_ssthresh``, which ``tcp_grow_window`` raises only to the space free at that moment,
    and a segment waiting to be read holds its true size (``mss × 256 / ratio`` where the ratio
    was learned, else the kernel's minimum, TCP_SKB_MIN_TRUESIZE = 2048 + 256 on x86_64)."""
    rows = []
    for trials in pairs.values():
        for scale, trial in zip((1, 2), trials):
            release = trial.kernel
            row = rcvbuf_row(trial)
            modern = theory.uses_scaling_ratio(release)
            learned = row["scaling_ratio"]
            ratio = learned or theory.TCP_DEFAULT_SCALING_RATIO
            queued = mss * 256 // learned if learned else theory.SOCK_MIN_RCVBUF
            predicted = theory.window_from_space_on(release, rb - queued, adv_win_scale=scale, scaling_ratio=ratio)
            rows.append({
                "kernel": trial.kernel_name, "tcp_adv_win_scale": scale, "scaling_ratio kernel": modern,
                "rule": (f"scaling_ratio {ratio}/256" + ("" if learned else " (start)")) if modern
                        else f"tcp_adv_win_scale {scale}",
                "predicted window B": predicted // mss * mss, "window median B": row["window median"],
                "upload s": trial.duration_s,
            })
    return pd.DataFrame(rows)


def goodput_frame(trials: Any) -> pd.DataFrame:
    """One row per trial with its variant (the label without a ``#n`` repetition suffix),
    goodput in Mbit/s (as the table of runs writes it) and duration, for a bar plot with
    confidence bands over repetitions."""
    return pd.DataFrame([{"variant": t.label.split("#", 1)[0], "goodput Mbit/s": t.goodput_bps / 1e6,
                          "duration s": t.duration_s} for t in trials])


# --------------------------------------------------------------- how tcp_sendmsg fills buffers

def sendmsg_summary(events: pd.DataFrame, writes: int) -> dict[str, float]:
    """What each turn of the copy loop found at the tail of the write queue, for ``writes``
    application writes. Only a new buffer is checked against ``sk_sndbuf`` (a turn that
    waited for room is counted again when it retries); bytes appended to an unfinished tail
    buffer are not checked."""
    empty = events["addr"] == 0
    full = ~empty & (events["len"] >= events["goal"])
    append = ~empty & ~full & (events["len"] > 0)
    return {
        "application writes": writes,
        "copy-loop turns": len(events),
        "new buffer, write queue empty (checked)": int(empty.sum()),
        "new buffer, tail full (checked)": int(full.sum()),
        "appended to an unfinished tail (not checked)": int(append.sum()),
        "tail full, per write": float(full.sum()) / writes if writes else float("nan"),
        "size goal (median)": float(events["goal"].median()) if len(events) else float("nan"),
    }


def trace_sendmsg(path: Any, workload: Any) -> dict[str, float] | None:
    """Run ``workload`` once on a live ``path`` (not recorded, no capture) while tracing how
    the sender's ``send()`` calls fill the send buffer; :func:`sendmsg_summary` of it, or
    None on a kernel without tracefs (nothing is run then)."""
    if not tracefs.ensure_tracefs():
        return None
    with tempfile.TemporaryDirectory() as logs, sendmsg_trace() as read:
        result = workload.run(path, logs)
        text = read()
    if not result.ok:
        raise RuntimeError(f"traced run failed: {result.error}")
    return sendmsg_summary(parse_sendmsg(text), -(-workload.size // workload.write_size))


# --------------------------------------------------------------- the machine's buffer limits

@dataclass(frozen=True)
class LimitChange:
    """What a case's variants did with one buffer limit (``net.core.wmem_max``, ``rmem_max``)."""

    key: str
    #: The value found before the runs, and read again after them.
    found: int
    after: int
    #: The largest buffer a variant asked for of this limit (None: none asked).
    asked: int | None
    #: The values variants ran with instead of ``found`` (raised or lowered for their path), and which.
    changed: dict[int, list[str]]


class BufferLimits:
    """The socket-buffer limits of a case's lab kernel, and the host settings its variants need.

    ``SO_SNDBUF``/``SO_RCVBUF`` are clamped, silently, to ``net.core.wmem_max``/``rmem_max``,
    which belong to the whole machine. A variant that asks for more than the machine allows
    gets the limit raised to exactly what it asks, for its own path only (the path's host
    guard restores it when the path goes); a machine whose limit is already large enough is
    left alone, and a limit is never lowered here. The values are read in the lab's kernel
    with :meth:`CaseLab.keep`, so replay uses those of the machine that recorded the runs,
    and builds the same path specs that were recorded.

    ::

        limits = buffers.BufferLimits(lab)
        fixed = Bulk(size=size, sndbuf="256KB")
        lab.run("sndbuf-256KB", fixed, path=limits.spec(spec, fixed))
        page.limits_note(limits)   # what was found, raised and restored, from the runs
    """

    def __init__(self, lab: Any) -> None:
        self.lab = lab
        #: The limits as the case found them, before any of its runs.
        self.found: dict[str, Any] = lab.keep("buffer limits", socket_buffer_settings)
        self._after: dict[str, Any] | None = None

    @property
    def wmem_max(self) -> int:
        return int(self.found[WMEM_MAX])

    @property
    def rmem_max(self) -> int:
        return int(self.found[RMEM_MAX])

    @property
    def tcp_rmem_max(self) -> int:
        return int(str(self.found[TCP_RMEM]).split()[2])

    @property
    def tcp_wmem_max(self) -> int:
        return int(str(self.found[TCP_WMEM]).split()[2])

    def needed(self, spec: PathSpec, *workloads: Any) -> dict[str, int]:
        """{limit: bytes} for each limit below a buffer the workloads ask for, raised to the
        largest such buffer. A workload with ``clamp_ok`` wants the clamp, and a limit the
        spec sets itself is the notebook's choice: neither is raised."""
        own = {sysctl.key_of(k) for k in spec.host}
        need: dict[str, int] = {}
        for workload in workloads:
            if getattr(workload, "clamp_ok", False):
                continue
            for _, asked, key in workload.buffers():
                if asked is None or key in own or asked <= int(self.found[key]):
                    continue
                need[key] = max(need.get(key, 0), int(asked))
        return need

    def spec(self, spec: PathSpec, *workloads: Any) -> PathSpec:
        """``spec`` with the limits the workloads need raised for its path; ``spec`` itself
        when the machine's limits suffice (so the runs are the same as before)."""
        need = self.needed(spec, *workloads)
        return spec.replaced(host={**spec.host, **need}) if need else spec

    def in_force(self, key: str, spec: PathSpec) -> int:
        """The value of ``key`` while a path of ``spec`` is up: the spec's, else the machine's."""
        host = {sysctl.key_of(k): v for k, v in spec.host.items()}
        return int(host.get(key, self.found[key]))

    def after(self) -> dict[str, Any]:
        """The limits read again once the case's runs are over (kept too)."""
        if self._after is None:
            self._after = self.lab.keep("buffer limits after", socket_buffer_settings)
        return self._after

    def changes(self, trials: Any = None) -> list[LimitChange]:
        """For each limit the variants ask about: the value found, which variants ran with it
        raised or lowered (from their recorded path settings), and the value read after the runs."""
        trials = list(trials if trials is not None else self.lab.trials.values())
        after = self.after()
        found_changes = []
        for key, param in ((WMEM_MAX, "sndbuf"), (RMEM_MAX, "rcvbuf")):
            found = int(self.found[key])
            asked = [int(v) for t_ in trials if (v := getattr(t_.workload, param, None)) is not None]
            changed: dict[int, list[str]] = {}
            for trial in trials:
                host = {sysctl.key_of(k): v for k, v in trial.spec.host.items()}
                if key in host and int(host[key]) != found:
                    changed.setdefault(int(host[key]), []).append(trial.label)
            if asked or changed:
                found_changes.append(LimitChange(key, found, int(after[key]), max(asked) if asked else None, changed))
        return found_changes
