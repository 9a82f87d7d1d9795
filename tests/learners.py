"""The unprivileged learners the class tests run as: system users made by ``make test-users``
(tcplab-learner1 and 2), and what is theirs on the machine."""

from __future__ import annotations

import pwd
import time
from pathlib import Path

import pytest

LEARNERS = ("tcplab-learner1", "tcplab-learner2")


def account(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pytest.fail(f"no user {name}: `make test-users` (run by `make test`) creates the learners these tests run as")


def processes(uid: int) -> list[int]:
    """The live processes of ``uid`` (zombies left out: their parent reaps them)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and (entry / "stat").read_text().split(") ", 1)[1][0] != "Z":
                    out.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return out


def wait_gone(uid: int, seconds: float = 30) -> list[int]:
    """Wait until ``uid`` has no process left; those still there after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := processes(uid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
