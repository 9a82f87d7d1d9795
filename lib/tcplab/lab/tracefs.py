"""tracefs, the kernel's tracing file system, as the lab uses it: mounted when needed, and
private instances named after the process that made them (``tcplab-<pid>-<hex>``), so
``tcplab cleanup`` can remove those whose owner died. What is traced and how it is read is
:mod:`tcplab.observe.trace`'s."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from .state import process_alive

__all__ = ["TRACEFS", "INSTANCE_PREFIX", "ensure_tracefs", "new_instance", "instance_owner", "cleanup_instances"]

TRACEFS = Path("/sys/kernel/tracing")
INSTANCE_PREFIX = "tcplab-"


def new_instance() -> Path:
    """A fresh instance's folder (not made yet), named for this process."""
    return TRACEFS / "instances" / f"{INSTANCE_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"


def ensure_tracefs() -> bool:
    """True when tracefs is usable; mounts it when it is only not mounted yet (root). Not for
    other users (it is root's alone, mode 700), a user namespace's root included."""
    try:
        if (TRACEFS / "events").is_dir():
            return True
    except PermissionError:
        return False
    if os.geteuid() != 0 or not TRACEFS.is_dir():
        return False
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True)
    return (TRACEFS / "events").is_dir()


def instance_owner(name: str) -> int | None:
    """The pid of the process that made the trace instance ``name`` (None: not one of ours)."""
    pid = name[len(INSTANCE_PREFIX):].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def cleanup_instances(*, force: bool = False) -> list[str]:
    """Remove tcplab trace instances whose owner process is gone (all of them with ``force``)."""
    instances = TRACEFS / "instances"
    if not instances.is_dir():
        return []
    removed = []
    for directory in sorted(instances.glob(INSTANCE_PREFIX + "*")):
        owner = instance_owner(directory.name)
        if not force and owner is not None and owner != os.getpid() and process_alive(owner):
            continue
        try:
            directory.rmdir()
            removed.append(directory.name)
        except OSError:
            pass  # busy (a reader still has trace_pipe open): the next cleanup gets it
    return removed
