"""The table every analysis reads: a capture's packets and flows (made by :mod:`.packets`,
given its expert columns by :mod:`.expert`), and the one answer to "which flow, which way":
the main flow is the one that carried most payload, its data direction the one that carried
more of it. Metrics, plots and the cases ask here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ..units import ParameterError
from ..words import SaidByReason

if TYPE_CHECKING:
    from .packets import PcapSource

__all__ = ["PacketTable", "FlowError", "main_flow", "data_flows", "data_direction", "flow_view", "expert_column"]


class FlowError(SaidByReason, ValueError):
    """No such flow in a capture, or nothing of one where something was asked for: ``reason``
    is a key under ``flow_error.`` in the strings files, said in the language in force where it
    arose, with ``fields`` filled in."""

    KEYS = "flow_error"


@dataclass
class PacketTable:
    """``packets``: one row per TCP packet; ``flows``: one row per connection (``flow``);
    ``name``: what the capture shows, for plot titles (a case's variant label), or empty."""

    packets: pd.DataFrame
    flows: pd.DataFrame
    source: PcapSource
    name: str = ""

    @property
    def has_expert(self) -> bool:
        return "retransmission" in self.packets.columns

    def between(self, start_s: float, end_s: float) -> "PacketTable":
        """The packets from ``start_s`` to ``end_s`` seconds into the capture (``rel_time``). Each
        keeps the expert analysis of the whole capture: a resend of data sent before
        ``start_s`` is still one."""
        pk = self.packets
        keep = (pk["rel_time"] >= start_s) & (pk["rel_time"] <= end_s)
        return PacketTable(pk.loc[keep].reset_index(drop=True), self.flows, self.source, self.name)

    def __repr__(self) -> str:
        return (f"PacketTable({self.source.path!r}: {len(self.packets)} TCP packets in "
                f"{len(self.flows)} flows, {self.source.frames} frames)")


def _frame(packets: PacketTable | pd.DataFrame) -> pd.DataFrame:
    frame = getattr(packets, "packets", packets)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"expected a PacketTable or its packets DataFrame, got {type(packets).__name__}")
    return frame


def main_flow(packets: PacketTable | pd.DataFrame) -> int:
    """The flow that carried most payload, both directions together (the lower number on a tie)."""
    frame = _frame(packets)
    if frame.empty:
        raise FlowError("no_tcp")
    return int(frame.groupby("flow")["len"].sum().idxmax())


def data_flows(packets: PacketTable | pd.DataFrame) -> list[int]:
    """The flows that carried payload, largest first (ties in flow order): the main flow first."""
    payload = _frame(packets).groupby("flow")["len"].sum()
    return [int(flow) for flow in payload[payload > 0].sort_values(ascending=False, kind="stable").index]


def data_direction(packets: PacketTable | pd.DataFrame) -> int:
    """The direction of one flow's packets that carried more payload: 0 from the side that
    opened the connection, 1 back (0 on a tie)."""
    sums = _frame(packets).groupby("dir")["len"].sum()
    return 0 if sums.get(0, 0) >= sums.get(1, 0) else 1


def flow_view(packets: PacketTable | pd.DataFrame, flow: int | None = None,
              direction: int | None = None) -> tuple[pd.DataFrame, int, int]:
    """The packets of one flow, its number and its data direction (default: the main flow and
    its data direction). A ValueError when there is nothing to show."""
    frame = _frame(packets)
    if frame.empty:
        raise FlowError("nothing_to_plot")
    if flow is None:
        flow = main_flow(frame)
    view = frame[frame["flow"] == flow]
    if view.empty:
        raise FlowError("no_packets", flow=flow, present=sorted(frame["flow"].unique().tolist()))
    if direction is None:
        direction = data_direction(view)
    elif direction not in (0, 1):
        raise ParameterError("direction", direction, "0 (opener to peer) or 1 (back), or None")
    if not (view.loc[view["dir"] == direction, "len"] > 0).any():
        raise FlowError("no_payload", flow=flow, direction=direction)
    return view, int(flow), int(direction)


def expert_column(frame: pd.DataFrame, name: str, default) -> pd.Series:
    """An expert column, or ``default`` everywhere when the table was read without them."""
    return frame[name] if name in frame.columns else pd.Series(default, index=frame.index)
