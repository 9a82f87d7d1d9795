"""Build the path: namespaces, veths, link shaping, TCP settings (step 1 of the journey)."""

from .link import LinkShape
from .path import NetPath, PathSpec

__all__ = ["NetPath", "PathSpec", "LinkShape"]
