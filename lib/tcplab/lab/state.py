"""Where tcplab keeps what it must find again after a crash.

/run is emptied at boot, exactly when the kernel forgets namespaces and changed sysctls
too, so nothing kept here can outlive what it describes.
"""

import contextlib
import fcntl
import os
import signal
from pathlib import Path
from typing import Callable, Iterator

STATE_DIR = Path(os.environ.get("TCPLAB_STATE_DIR", "/run/tcplab"))
OWNERS_DIR = STATE_DIR / "owners"
WORK_DIR = STATE_DIR / "work"

MEASURE_LOCK = STATE_DIR / "measure.lock"


def user_state_dir() -> Path:
    """Where this user's records live: the machine's state folder for root; for another
    user (who cannot write /run/tcplab) $XDG_RUNTIME_DIR/tcplab, else /tmp/tcplab-<uid>.
    Both are emptied at boot, like what they describe."""
    if os.geteuid() == 0 or os.access(STATE_DIR, os.W_OK):
        return STATE_DIR
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "tcplab"
    return Path(f"/tmp/tcplab-{os.getuid()}")


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, …); None
    when the process is gone. The name may hold spaces and parentheses: split after its last ')'."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def ancestors(pid: int | None = None) -> list[int]:
    """The parent of ``pid`` (default: this process), its parent, and so on up to init."""
    found, current = [], os.getpid() if pid is None else pid
    while (fields := stat_fields(current)) is not None and (parent := int(fields[1])) > 0:
        found.append(parent)
        current = parent
    return found


def processes() -> Iterator[tuple[int, list[str]]]:
    """Every process now, with its :func:`stat_fields` (those gone meanwhile left out)."""
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := stat_fields(name)) is not None:
            yield int(name), fields


def process_alive(pid: object) -> bool:
    """Whether ``pid`` names a live process (a zombie counts as dead: its parent will reap
    it; one we may not signal counts as alive)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """In a child process (as ``preexec_fn``, or first thing in a helper): get ``signum`` when
    the process that started it dies, even by kill -9, so that no helper outlives its run."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signum, 0, 0, 0)


#: The moments of a run where a crash would leave the most behind, in the order a run reaches
#: them: the fault matrix (tests/test_faults.py) kills a run at each and then checks what
#: ``tcplab cleanup`` finds.
PHASES = ("path-built", "shaping-applied", "delay-line-started", "capture-listening", "mid-transfer",
          "rendering")
#: Names one of PHASES: a process that reaches it stops itself (SIGSTOP) for the fault matrix to
#: kill it there, so "killed while the capture listened" is a certainty, not a race.
STOP_AT_ENV = "TCPLAB_STOP_AT"


def checkpoint(phase: str) -> None:
    """Mark that this process has reached ``phase`` (one of PHASES); a no-op unless
    $TCPLAB_STOP_AT names it."""
    if os.environ.get(STOP_AT_ENV) == phase:
        os.kill(os.getpid(), signal.SIGSTOP)


@contextlib.contextmanager
def exclusive_measurement(wait_message: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the machine's measurement lock: two experiments at once on 2 cores would each
    measure the other's CPU load (the delay line is a userspace process), so case runs take
    turns. The lock is an flock, released by the kernel if the holder dies."""
    lock = MEASURE_LOCK if os.geteuid() == 0 else user_state_dir() / MEASURE_LOCK.name
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait_message is not None:
                wait_message()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
