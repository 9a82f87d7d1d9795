"""Reading ``ss -tinm`` field by field (case 11): pick representative samples of a run's
telemetry and check the fields against what the run's settings predict.

The telemetry table is :mod:`tcplab.observe.ss`'s: one row per socket per sample, times in
seconds, sizes in bytes, rates in bit/s.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from tcplab.analysis.metrics import limited_shares
from tcplab.observe.ss import SENDING_STATES, read_by, socket_rows

__all__ = ["FIELDS", "representative", "field_table", "send_rate_error",
           "payload_over_charged", "charged_per_segment", "limited_share", "predicted_wscale"]

#: The fields a field-by-field table shows, in ss's order: (column, label as ss prints it).
FIELDS = (
    ("recv_q", "Recv-Q"), ("send_q", "Send-Q"),
    ("skmem_r", "skmem r"), ("skmem_rb", "skmem rb"), ("skmem_t", "skmem t"), ("skmem_tb", "skmem tb"),
    ("skmem_f", "skmem f"), ("skmem_w", "skmem w"), ("skmem_o", "skmem o"), ("skmem_bl", "skmem bl"),
    ("skmem_d", "skmem d"),
    ("cc", "cc"), ("wscale_snd", "wscale (snd)"), ("wscale_rcv", "wscale (rcv)"),
    ("rto", "rto"), ("rtt", "rtt (srtt)"), ("rttvar", "rttvar"), ("ato", "ato"), ("minrtt", "minrtt"),
    ("mss", "mss"), ("advmss", "advmss"), ("rcvmss", "rcvmss"), ("pmtu", "pmtu"),
    ("cwnd", "cwnd"), ("ssthresh", "ssthresh"), ("unacked", "unacked"), ("retrans", "retrans"),
    ("send_rate", "send"), ("pacing_rate", "pacing_rate"), ("delivery_rate", "delivery_rate"),
    ("app_limited", "app_limited"), ("busy_s", "busy"), ("rwnd_limited_s", "rwnd_limited"),
    ("sndbuf_limited_s", "sndbuf_limited"), ("notsent", "notsent"),
    ("rcv_space", "rcv_space"), ("rcv_ssthresh", "rcv_ssthresh"), ("snd_wnd", "snd_wnd"),
)
_SECONDS = {"rto", "rtt", "rttvar", "ato", "minrtt", "busy_s", "rwnd_limited_s", "sndbuf_limited_s"}


def representative(telemetry: pd.DataFrame, side: str) -> pd.Series:
    """One sample from the middle of the transfer: among ``side``'s established samples while
    data was still moving (something queued, or in flight, or unread), the one nearest the
    middle in time. Falls back to the middle sample when none was caught moving."""
    rows = socket_rows(telemetry, side)
    if rows.empty:
        raise ValueError(f"no established samples of the {side}")
    moving = rows[(rows["send_q"] > 0) | (rows["recv_q"] > 0) | (rows["unacked"].fillna(0) > 0)]
    pool = moving if len(moving) else rows
    middle = pool["time"].min() + (pool["time"].max() - pool["time"].min()) / 2
    return pool.iloc[int((pool["time"] - middle).abs().to_numpy().argmin())]


def _shown(column: str, value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        return value
    if pd.isna(value):
        return "—"
    if column in _SECONDS:  # as ss prints them: rto:236, rtt:23.266 (µs at most)
        return f"{value * 1e3:.3f}".rstrip("0").rstrip(".") + " ms"
    if column in ("send_rate", "pacing_rate", "delivery_rate"):
        return f"{value / 1e6:.2f} Mbit/s"
    return int(value) if float(value).is_integer() else value


def field_table(samples: Mapping[str, pd.Series], predictions: Mapping[str, Mapping[str, Any]] | None = None,
                ) -> pd.DataFrame:
    """Fields as rows, one column per named sample (``{"autotuned · server": row, …}``), plus
    a "predicted" column per sample where ``predictions[name][column]`` says what to expect."""
    predictions = predictions or {}
    table = {}
    for name, row in samples.items():
        table[name] = [_shown(column, row.get(column)) for column, _ in FIELDS]
        if name in predictions:
            table[f"{name}: predicted"] = [predictions[name].get(column, "") for column, _ in FIELDS]
    return pd.DataFrame(table, index=pd.Index([label for _, label in FIELDS], name="field"))


def send_rate_error(telemetry: pd.DataFrame) -> pd.Series:
    """Per sample, |send − cwnd × mss × 8 / srtt| / (cwnd × mss × 8 / srtt): how far ss's
    "send" is from the formula (established samples that have an srtt)."""
    rows = telemetry[(telemetry["state"] == "ESTAB") & telemetry["rtt"].gt(0) & telemetry["send_rate"].notna()]
    formula = rows["cwnd"] * rows["mss"] * 8 / rows["rtt"]
    return ((rows["send_rate"] - formula).abs() / formula).rename("send_rate_error")


def payload_over_charged(telemetry: pd.DataFrame) -> pd.DataFrame:
    """Per established sample: Recv-Q / r and Send-Q / w, the payload share of the charged
    memory (NaN where the charged memory is zero)."""
    rows = telemetry[telemetry["state"] == "ESTAB"]
    with np.errstate(divide="ignore", invalid="ignore"):
        recv = rows["recv_q"] / rows["skmem_r"].where(rows["skmem_r"] > 0)
        send = rows["send_q"] / rows["skmem_w"].where(rows["skmem_w"] > 0)
    return pd.DataFrame({"side": rows["side"], "recv_q/r": recv, "send_q/w": send})


def charged_per_segment(telemetry: pd.DataFrame, side: str) -> pd.DataFrame:
    """The memory the kernel charges ``side`` per segment in flight: per established sample with
    segments unacknowledged and nothing waiting unsent, ``skmem_w`` / ``unacked``. ``w`` counts
    the whole write queue, sent or not, so a sample with data not yet sent (``notsent``, which
    ss leaves out when it is 0) would count that data too. Columns: ``time``, ``skmem_w``,
    ``unacked``, ``mss`` and ``w per segment``."""
    rows = socket_rows(telemetry, side)
    rows = rows[(rows["unacked"].fillna(0) > 0) & (rows["notsent"].fillna(0) == 0)]
    return pd.DataFrame({"time": rows["time"], "skmem_w": rows["skmem_w"], "unacked": rows["unacked"],
                         "mss": rows["mss"], "w per segment": rows["skmem_w"] / rows["unacked"]}
                        ).reset_index(drop=True)


def during_pause(trial: Any) -> dict[str, float]:
    """Both ends' queues while the reader did not read (its first pause; the samples that ``ss``
    took wholly inside it): the client's largest ``Recv-Q`` and ``skmem_r`` and its ``rb`` then,
    the server's largest ``Send-Q`` and ``skmem_w`` and its ``tb`` then, and the server's median
    ``unacked`` (segments)."""
    stopped, resumed = trial.reader_pauses[0]

    def inside(side: str) -> pd.DataFrame:
        rows = socket_rows(trial.telemetry, side)
        return rows[(rows["time"] > stopped) & (read_by(rows) < resumed)]

    client, server = inside("client"), inside("server")
    fullest_r, fullest_w = client.loc[client["skmem_r"].idxmax()], server.loc[server["skmem_w"].idxmax()]
    return {"Recv-Q max": float(client["recv_q"].max()), "r max": float(fullest_r["skmem_r"]),
            "rb": float(fullest_r["skmem_rb"]), "Send-Q max": float(server["send_q"].max()),
            "w max": float(fullest_w["skmem_w"]), "tb": float(fullest_w["skmem_tb"]),
            "unacked median": float(server["unacked"].fillna(0).median())}


def limited_share(telemetry: pd.DataFrame, side: str) -> dict[str, float]:
    """The kernel's own verdict on ``side``'s socket while data flowed, as the diagnosis reads it
    (:func:`tcplab.analysis.metrics.limited_shares`): the busy time, and the shares of it that the
    connection was limited by the receive window and by the send buffer."""
    shares = limited_shares(socket_rows(telemetry, side, SENDING_STATES))
    return {"busy_s": shares["busy_s"], "rwnd_limited": shares["rwnd_limited_share"],
            "sndbuf_limited": shares["sndbuf_limited_share"]}


def predicted_wscale(space: int) -> int:
    """The window scale a socket offers in its SYN for a receive space of ``space`` bytes:
    the smallest shift that brings the space under 65 535 (at most 14), as the kernel's
    ``tcp_select_initial_window`` does. An autotuned socket's space is the larger of
    ``tcp_rmem[2]`` and ``rmem_max``; one with SO_RCVBUF set before connect offers only the
    window its fixed buffer allows."""
    shift = 0
    while space > 0xFFFF and shift < 14:
        space >>= 1
        shift += 1
    return shift
