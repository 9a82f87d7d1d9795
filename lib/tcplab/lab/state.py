"""Where tcplab keeps what it must find again after a crash.

/run is emptied at boot, exactly when the kernel forgets namespaces and changed sysctls
too, so nothing kept here can outlive what it describes.
"""

import contextlib
import fcntl
import json
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..files import write_atomically

STATE_DIR = Path(os.environ.get("TCPLAB_STATE_DIR", "/run/tcplab"))
OWNERS_DIR = STATE_DIR / "owners"
WORK_DIR = STATE_DIR / "work"

#: The machine-wide measurement queue: a folder every user may write, as /tmp (sticky), which
#: holds one ticket per measurement waiting or running and the lock the running one holds.
QUEUE_DIR = Path(os.environ.get("TCPLAB_QUEUE_DIR", "/tmp/tcplab-queue"))
#: How long a measurement waits for its turn before it runs anyway, marked as disturbed
#: (``TCPLAB_QUEUE_WAIT``, seconds): a class of learners queues behind each other, but a
#: learner does not wait without end behind a measurement that never finishes.
QUEUE_WAIT_S = 1800.0


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


@dataclass(frozen=True)
class Ticket:
    """One measurement in the queue: who and what, and since when (ns of the epoch)."""

    since_ns: int
    uid: int
    pid: int
    user: str
    what: str
    file: Path

    @classmethod
    def read(cls, file: Path) -> "Ticket | None":
        try:
            data = json.loads(file.read_text())
            return cls(int(data["since_ns"]), int(data["uid"]), int(data["pid"]), str(data["user"]),
                       str(data["what"]), file)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"{self.user}'s {self.what}" if self.what else self.user


@dataclass
class Turn:
    """What :func:`exclusive_measurement` gives: whether the measurement has the machine to
    itself (``alone``), how long it waited, and, when not alone, who still measured."""

    alone: bool = True
    waited_s: float = 0.0
    beside: list[str] = field(default_factory=list)

    def health(self) -> dict[str, Any] | None:
        """The reading a run made in this turn adds to its health (:mod:`tcplab.observe.health`):
        None when it had the machine to itself."""
        if self.alone:
            return None
        return {"waited_s": round(self.waited_s, 1), "beside": list(self.beside)}


@dataclass(frozen=True)
class QueuePlace:
    """Where a waiting measurement stands: ``ahead`` measurements before it (the first of them
    running), named, and how long it has waited."""

    ahead: list[str]
    waited_s: float

    def text(self) -> str:
        n = len(self.ahead)
        who = "; ".join(self.ahead[:4]) + (f"; and {n - 4} more" if n > 4 else "")
        return (f"waiting for the machine: {n} measurement{'s' if n != 1 else ''} ahead of this one "
                f"({who}); waited {self.waited_s:.0f} s. Two measurements at once would each measure the other.")


def _queue_dir() -> Path:
    """The queue's folder, made world-writable and sticky by whoever comes first."""
    QUEUE_DIR.mkdir(parents=True, exist_ok=True)
    info = QUEUE_DIR.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o7777 != 0o1777:
        os.chmod(QUEUE_DIR, 0o1777)
    return QUEUE_DIR


def _open_lock(folder: Path) -> int:
    """The queue's lock file, open for flock (read-only: a file another user made, in a sticky
    folder, cannot be opened with O_CREAT, fs.protected_regular)."""
    lock = folder / "measure.lock"
    while True:
        try:
            return os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            try:
                fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444)
                os.fchmod(fd, 0o444)
                return fd
            except FileExistsError:
                continue


def _take_ticket(folder: Path, what: str) -> Path | None:
    """This measurement's ticket in the queue (None where the folder cannot be written: it
    then waits on the lock alone, without a place in line)."""
    import getpass

    since = time.time_ns()
    file = folder / f"{since}-{os.getuid()}-{os.getpid()}-{secrets.token_hex(2)}.ticket"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    try:
        write_atomically(file, json.dumps({"since_ns": since, "uid": os.getuid(), "pid": os.getpid(),
                                           "user": user, "what": what}))
    except OSError:
        return None
    return file


def queue(folder: Path | None = None) -> list[Ticket]:
    """The measurements in the queue now, oldest first; a ticket whose process is gone is
    removed where this user may (else skipped)."""
    folder = folder or QUEUE_DIR
    live = []
    for file in sorted(folder.glob("*.ticket"), key=lambda f: f.name):
        ticket = Ticket.read(file)
        if ticket is None:
            continue
        if not process_alive(ticket.pid):
            with contextlib.suppress(OSError):
                file.unlink()
            continue
        live.append(ticket)
    return sorted(live, key=lambda t: (t.since_ns, t.file.name))


@contextlib.contextmanager
def exclusive_measurement(on_wait: Callable[[QueuePlace], None] | None = None, *, what: str = "",
                          limit_s: float | None = None, poll_s: float = 0.25) -> Iterator[Turn]:
    """Take this machine's turn to measure: two experiments at once on 2 cores would each
    measure the other's CPU load (the delay line is a userspace process, a UML kernel a host
    process), so measurements take turns, whichever user runs them (root, learners on one
    JupyterHub, each in their own user namespace). First come, first served: a ticket in
    :data:`QUEUE_DIR`, and an flock on its lock file, which the kernel releases if the holder
    dies (a dead holder's ticket is skipped). ``on_wait`` hears where the measurement stands
    whenever that changes; after ``limit_s`` (default :data:`QUEUE_WAIT_S`, or
    $TCPLAB_QUEUE_WAIT) it runs anyway, and the :class:`Turn` it gets says it was not alone,
    so that its runs are marked disturbed rather than trusted."""
    if limit_s is None:
        limit_s = float(os.environ.get("TCPLAB_QUEUE_WAIT", QUEUE_WAIT_S))
    folder = _queue_dir()
    lock = _open_lock(folder)
    ticket = _take_ticket(folder, what)
    turn, start, said = Turn(), time.monotonic(), None
    try:
        while True:
            ahead = [t for t in queue(folder) if ticket is None or t.file.name < ticket.name]
            if not ahead or ticket is None:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
            waited = time.monotonic() - start
            if waited > limit_s:
                turn = Turn(alone=False, waited_s=waited, beside=[t.describe() for t in ahead] or ["unknown"])
                break
            place = QueuePlace([t.describe() for t in ahead] or ["a measurement without a ticket"], waited)
            if on_wait is not None and (said is None or place.ahead != said.ahead or waited - said.waited_s >= 30):
                on_wait(place)
                said = place
            time.sleep(poll_s)
        turn.waited_s = time.monotonic() - start
        yield turn
    finally:
        if ticket is not None:
            with contextlib.suppress(OSError):
                ticket.unlink()
        os.close(lock)  # releases the flock, if held
