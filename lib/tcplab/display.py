"""What the notebook's IPython kernel shows for an object: its display formatters, where the
house style hooks in (tables in :mod:`.report.tables`, figures' alt text in :mod:`.plots`)."""

from __future__ import annotations

from typing import Any

__all__ = ["formatter"]


def formatter(mime: str) -> Any | None:
    """The running IPython kernel's formatter of ``mime`` ("text/html", "image/png"); None
    outside IPython, where there is nothing to hook."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.display_formatter.formatters[mime]
