"""Packet captures as tables: a fast pcap/pcapng reader and Wireshark's TCP expert analysis;
per-flow metrics and the diagnosis of what limited a transfer."""

from .diagnose import Diagnosis, DiagnosisContext, diagnose
from .expert import analyze
from .metrics import FlowMetrics, flow_metrics
from .packets import PacketTable, PcapError, PcapSource, PcapWarning, read_packets

__all__ = ["Diagnosis", "DiagnosisContext", "FlowMetrics", "PacketTable", "PcapError", "PcapSource", "PcapWarning", "analyze",
           "diagnose", "flow_metrics", "read_packets"]
