"""Files written whole or not at all: a reader, or a run killed halfway, never sees half a page,
half a summary or half a run record."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["is_partial", "partial_name", "write_atomically"]

_PARTIAL = ".partial"


def partial_name(path: str | Path) -> Path:
    """Where ``path`` is written before it is moved into place: hidden beside it, on the same
    file system (so the move is atomic), and never taken for a result."""
    path = Path(path)
    return path.with_name(f".{path.name}{_PARTIAL}")


def is_partial(path: str | Path) -> bool:
    """Whether ``path`` is a file still being written (or one a killed writer left)."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(_PARTIAL)


def write_atomically(path: str | Path, text: str, *, sync: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through :func:`partial_name`, creating its folder;
    with ``sync``, on disk before it is in place (a record that must survive a crash)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_name(path)
    with open(partial, "w", encoding="utf-8") as fh:
        fh.write(text)
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(partial, path)
    return path
