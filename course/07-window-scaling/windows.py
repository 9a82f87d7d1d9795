"""Window scaling (RFC 7323) as a case reads it: what each end offered in the handshake, and
the scale Linux would choose from its buffer limits."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from tcplab import plots
from tcplab.analysis import theory
from tcplab.words import messages
from tcplab.cases.trial import Trial

__all__ = ["TCP_MAX_WSCALE", "UNSCALED_MAX", "initial_wscale", "handshake", "handshakes", "parallel_unscaled",
           "ceiling_plot"]

#: The largest shift RFC 7323 allows (include/net/tcp.h: TCP_MAX_WSCALE).
TCP_MAX_WSCALE = 14
#: The 16-bit window field: the most a receiver can offer without scaling.
UNSCALED_MAX = 65535


def initial_wscale(tcp_rmem_max: int, rmem_max: int) -> int:
    """The shift Linux offers in its SYN or SYN-ACK.

    ``tcp_select_initial_window`` (net/ipv4/tcp_output.c) sizes the scale for the largest
    buffer the socket could ever get, ``max(tcp_rmem[2], net.core.rmem_max)``, so that the
    window field can express it: ``ilog2(space) - 15``, clamped to 0..14.
    """
    space = max(int(tcp_rmem_max), int(rmem_max))
    if space <= 0:
        raise ValueError(f"buffer limits must be positive, got {tcp_rmem_max} and {rmem_max}")
    return max(0, min(TCP_MAX_WSCALE, space.bit_length() - 1 - 15))


def _offered(value: Any) -> int | None:
    return None if value is None or pd.isna(value) or int(value) < 0 else int(value)


def handshake(trial: Trial, *, rmem_max: int) -> dict[str, Any]:
    """What the SYN and SYN-ACK of the trial's main flow carried, and what the kernels
    predicted from their buffer limits (None where a side had scaling off, and for the server
    when the client's SYN offered no scale).

    ``tcp_rmem`` is per namespace and comes from the run's sysctl record; ``rmem_max`` is
    host-global, and a namespace does not show it on every kernel (6.1 does not), so the
    caller passes the value read in the lab's kernel (``BufferLimits(lab).rmem_max``)."""
    flows = trial.packets.flows
    row = flows.loc[flows["flow"] == trial.metrics.flow].iloc[0]
    sysctls = getattr(trial.run, "sysctls", {})
    sysctls = sysctls() if callable(sysctls) else sysctls
    out: dict[str, Any] = {"variant": trial.label}
    for side in ("client", "server"):
        own = sysctls.get(side, {})
        out[f"{side} offered wscale"] = _offered(row[f"wscale_{side}"])
        predicted = None
        # The server may answer with the option only when the client's SYN carried it
        # (RFC 7323, 2.2): to a client without scaling it offers no shift at all.
        answers = side == "client" or out["client offered wscale"] is not None
        if own.get("net.ipv4.tcp_window_scaling", "1") != "0" and "net.ipv4.tcp_rmem" in own and answers:
            predicted = initial_wscale(int(own["net.ipv4.tcp_rmem"].split()[2]), int(rmem_max))
        out[f"{side} predicted wscale"] = predicted
    out["window scaling"] = str(row["window_scaling"])
    return out


def handshakes(trials: Iterable[Trial], *, rmem_max: int) -> pd.DataFrame:
    """:func:`handshake` of several trials, one row each."""
    return pd.DataFrame([handshake(t, rmem_max=rmem_max) for t in trials]).set_index("variant")


def parallel_unscaled(trials: Iterable[Trial], *, rtt_s: float, rate_bps: float) -> pd.DataFrame:
    """Runs of n parallel connections without window scaling, one row each: how many the
    workload opened, their goodput together, and what n unscaled windows per round trip allow
    (each connection is capped by its own 64 KB; together they are capped by the line)."""
    rows = []
    for t in trials:
        n = int(t.app.extra.get("streams") or 1)
        rows.append({"variant": t.label, "connections": n, "goodput MB/s": t.goodput_bps / 8e6,
                     "predicted MB/s": theory.window_limited_throughput(n * UNSCALED_MAX, rtt_s,
                                                                       theory.max_goodput(rate_bps)) / 8e6})
    return pd.DataFrame(rows).set_index("variant")


def ceiling_plot(runs: pd.DataFrame, *, rate_bps: float, language: str | None = None):
    """Steady throughput against RTT (log axis), a line per scaling setting (``runs``: one row
    per run, columns ``rtt_ms``, ``steady Mbit/s`` and ``scaling``), with the ceiling an
    unscaled window allows, 65535 B per round trip (dashed), and the line's payload rate
    (dotted); every line named in the legend. Returns the figure."""
    word = messages(language)
    fig = plots.sweep_lines(runs, x="rtt_ms", y="steady Mbit/s", hue="scaling", logx=True, language=language)
    ax = fig.axes[0]
    rtts = sorted(runs["rtt_ms"].unique())
    plots.theory_curve(ax, rtts, lambda r: theory.window_limited_throughput(UNSCALED_MAX, r / 1e3) / 1e6,
                       label=word("plot.07-window-scaling.unscaled_ceiling"))
    ax.axhline(theory.max_goodput(rate_bps) / 1e6, color=plots.PALETTE["configured"], linewidth=1, linestyle=":",
               label=word("plot.07-window-scaling.line_rate"), gid="line_rate")
    ax.set_xlabel(word("plot.rtt_ms"))
    ax.set_title(word("plot.07-window-scaling.ceiling"))
    plots.legend(ax)
    plots.tidy(fig)
    return fig
