"""The course's cases: what a case notebook calls to run its variants (live or replayed)
and to read them (step "explain" of the journey). See :class:`CaseLab`."""

from .lab import CaseLab, ReplayedPath
from .replay import ReplayMissing, save
from .trial import Trial
from .variants import VariantTable, ms_tag, size_tag

__all__ = ["CaseLab", "Trial", "ReplayedPath", "ReplayMissing", "save", "VariantTable", "ms_tag", "size_tag"]
