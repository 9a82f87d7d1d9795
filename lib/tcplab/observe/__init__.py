"""Watching a run: tcpdump captures, ``ss -tinm`` socket telemetry, kernel tracepoints."""

from .capture import CAPTURE_POINTS, Capture, CaptureError, CapturePoint, CaptureStats, points_for
from .spec import ObserveSpec
from .ss import SsSampler, parse_ss
from .trace import Tracepoints

__all__ = [
    "CAPTURE_POINTS", "Capture", "CaptureError", "CapturePoint", "CaptureStats", "ObserveSpec",
    "SsSampler", "Tracepoints", "parse_ss", "points_for",
]
