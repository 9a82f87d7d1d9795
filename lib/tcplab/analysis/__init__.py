"""Packet captures as tables: a fast pcap/pcapng reader and Wireshark's TCP expert analysis."""

from .expert import analyze
from .packets import PacketTable, PcapError, PcapSource, PcapWarning, read_packets

__all__ = ["PacketTable", "PcapError", "PcapSource", "PcapWarning", "analyze", "read_packets"]
