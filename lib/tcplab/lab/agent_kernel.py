"""A lab kernel in a process of its own, driven by calls: a User-mode Linux kernel
(:mod:`tcplab.lab.uml`) or the host's kernel in a user namespace (:mod:`tcplab.lab.userns`).

Either way one agent process (:mod:`tcplab.lab.agent`) is root of the lab there and does
what this process asks: a request is a call (function and arguments, cloudpickled) written
to a work folder both see; the agent's console (its stdin and stdout) carries ``call N`` in
and ``done N`` out. The lab's live objects (a path and its hosts) stay in the agent and
travel as references. One start serves many runs.

Nothing is left behind: a watchdog (``shepherd.py``) kills the instance's whole process
group when its owner exits, however it died, and a record in the user's state folder lets
``tcplab cleanup`` end an instance whose watchdog was killed too.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import pickle
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..files import write_atomically
from . import state
from .agent import PROTOCOL

#: Environment variables the agent inherits (the rest of the host's environment stays out).
PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "FRESH", "TZ", "NUMBA_DISABLE_JIT", "XDG_DATA_HOME")
PASSED_ENV_PREFIX = "TCPLAB_"
#: The agent's environment variable that says which kind of lab kernel it is the agent of.
AGENT_ENV = "TCPLAB_LAB_AGENT"


class AgentError(RuntimeError):
    """The lab kernel is missing, cannot start, or died; the message says what to do."""


class AgentTimeout(AgentError):
    """The lab kernel did not answer in time; it was ended."""


class RemoteError(RuntimeError):
    """An exception raised inside the lab kernel that could not travel as itself."""


# --- the records tcplab cleanup reads ---------------------------------------------------------

def records_dir() -> Path:
    return state.user_state_dir() / "kernels"


@dataclass
class AgentRecord:
    """What ``tcplab cleanup`` needs to end an instance whose owner died."""

    umid: str
    owner: int
    workdir: str
    kind: str = "uml"
    uid: int = field(default_factory=os.getuid)

    @property
    def file(self) -> Path:
        return records_dir() / f"{self.umid}.json"

    def pgid(self) -> int | None:
        try:
            return int((Path(self.workdir) / "kernel.pgid").read_text())
        except (OSError, ValueError):
            return None

    def save(self) -> None:
        write_atomically(self.file, json.dumps(self.__dict__))

    @classmethod
    def all(cls) -> list["AgentRecord"]:
        out = []
        for file in sorted(records_dir().glob("*.json")):
            try:
                out.append(cls(**json.loads(file.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return out

    def end(self) -> bool:
        """Kill the instance's process group (if any is left) and remove its files; True if
        a process was killed."""
        killed = False
        if (pgid := self.pgid()) is not None:
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed = True
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            self.file.unlink()
        except FileNotFoundError:
            pass
        return killed


def cleanup_orphans() -> list[AgentRecord]:
    """End this user's lab kernels (UML, user namespaces) whose owner process is gone."""
    ended = []
    for record in AgentRecord.all():
        if record.uid != os.getuid() or state.process_alive(record.owner):
            continue
        record.end()
        ended.append(record)
    return ended


# --- the kernel --------------------------------------------------------------------------------

class AgentKernel:
    """One started lab kernel and its agent. ``call(fn, …)`` runs ``fn`` inside it.

    A subclass says how to start it (:meth:`_command`, :meth:`_preflight`) and what it is
    (``kind``, ``title``); the calls, the console, the watchdog and the records are here."""

    #: "uml" or "userns": the agent's :data:`AGENT_ENV`, the run records' ``lab_kernel``.
    kind = ""
    #: The kernel in words, for messages: "the UML kernel".
    title = "the lab kernel"
    Error: type[AgentError] = AgentError
    Timeout: type[AgentTimeout] = AgentTimeout
    #: Real-time priority of the kernel's processes where the user may set one (0: none).
    rt_priority = 0

    def __init__(self, *, boot_timeout: float = 120.0, call_timeout: float = 1800.0) -> None:
        self.boot_timeout = boot_timeout
        self.call_timeout = call_timeout
        self.umid = f"tcplab-{os.getpid()}-{secrets.token_hex(3)}"
        self.info: dict[str, Any] = {}
        self.boot_seconds: float | None = None
        self.console: collections.deque[str] = collections.deque(maxlen=400)
        #: Called with every console line that is not the agent's (kernel and program output).
        self.echo: Callable[[str], None] | None = None
        self._proc: subprocess.Popen | None = None
        self._lifeline: int | None = None
        self._console_in: Any = None
        self._workdir: Path | None = None
        self._record: AgentRecord | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._done: set[int] = set()
        self._ready: dict[str, Any] | None = None
        self._eof = False
        self._serial = 0
        self._owner = os.getpid()

    # --- what a kind of kernel says ----------------------------------------------------------------
    def _preflight(self, python: Path) -> None:
        """What would make the start fail, said (raised) before anything starts."""

    def _command(self, workdir: Path, python: Path) -> tuple[list[str], dict[str, str]]:
        """The argv that starts the kernel and its agent, and environment variables for it."""
        raise NotImplementedError

    def _after_boot(self) -> None:
        """Checks of the kernel once its agent said it is ready."""

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._eof

    @property
    def release(self) -> str:
        return self.info.get("release", "?")

    @property
    def host_pgid(self) -> int | None:
        """The host process group of this kernel's processes (the kernel, its helpers, one per
        address space inside)."""
        return self._record.pgid() if self._record is not None else None

    def __enter__(self) -> "AgentKernel":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "AgentKernel":
        if self.alive:
            return self
        python = Path(sys.executable)
        self._preflight(python)
        work_parent = os.environ.get("TCPLAB_UML_WORKDIR") or tempfile.gettempdir()
        self._workdir = Path(tempfile.mkdtemp(prefix=f"tcplab-{self.kind}-", dir=work_parent))
        self._record = AgentRecord(self.umid, os.getpid(), str(self._workdir), self.kind)
        self._record.save()
        atexit.register(self.stop)
        try:
            self._boot(python)
        except BaseException:
            self.stop()
            raise
        return self

    def _boot(self, python: Path) -> None:
        assert self._workdir is not None
        workdir = self._workdir
        env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_ENV_PREFIX)}
        env[AGENT_ENV] = self.kind
        argv, extra_env = self._command(workdir, python)
        env.update({k: v for k, v in extra_env.items() if k.startswith(PASSED_ENV_PREFIX)})
        (workdir / "config.json").write_text(json.dumps({"cwd": os.getcwd(), "env": env,
                                                         "sys_path": [p for p in sys.path if p]}))
        read_life, self._lifeline = os.pipe()
        shepherd = Path(__file__).with_name("shepherd.py")
        started = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, "-S", str(shepherd), str(read_life), str(workdir / "kernel.pgid"), str(self.rt_priority),
             "--", *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(read_life,),
            start_new_session=True, env={**os.environ, **extra_env})
        os.close(read_life)
        self._console_in = self._proc.stdin
        threading.Thread(target=self._read_console, name=f"{self.kind}-console-{self.umid}", daemon=True).start()
        with self._cond:
            ok = self._cond.wait_for(lambda: self._ready is not None or self._eof, timeout=self.boot_timeout)
        if not ok or self._ready is None:
            why = "did not come up" if not ok else "stopped while starting"
            self.kill()
            raise self.Error(f"{self.title} {why} within {self.boot_timeout:.0f} s; its last console lines:\n"
                             + self.tail())
        self.info = self._ready
        self.boot_seconds = time.monotonic() - started
        self._after_boot()

    def _read_console(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        verbose = os.environ.get("TCPLAB_UML_VERBOSE") == "1"
        for raw in self._proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if PROTOCOL in line and not line.startswith(PROTOCOL):
                # a program's unfinished line ran into the agent's: keep both
                line, said = line.split(PROTOCOL, 1)
                self._output(line)
                line = PROTOCOL + said
            if line.startswith(PROTOCOL):
                word, _, rest = line[len(PROTOCOL):].strip().partition(" ")
                with self._cond:
                    if word == "ready":
                        self._ready = json.loads(rest)
                    elif word == "done":
                        self._done.add(int(rest))
                    self._cond.notify_all()
                continue
            self._output(line, verbose)
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _output(self, line: str, verbose: bool = False) -> None:
        self.console.append(line)
        if self.echo is not None:
            self.echo(line)
        elif verbose:
            print(f"[{self.kind}] {line}", file=sys.__stderr__, flush=True)

    def tail(self, lines: int = 25) -> str:
        return "\n".join(list(self.console)[-lines:]) or "(nothing)"

    def stop(self, timeout: float = 20.0) -> None:
        """End the kernel (the agent closes every live path first), then remove its files."""
        if os.getpid() != self._owner:
            return
        atexit.unregister(self.stop)
        if self.alive and self._ready is not None:
            try:
                self._send("quit")
                with self._cond:
                    self._cond.wait_for(lambda: self._eof, timeout=timeout)
            except (OSError, ValueError):
                pass
        self.kill()

    def kill(self) -> None:
        """End the instance at once: close the lifeline (the shepherd kills the process group)."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self._record is not None:
            self._record.end()  # the group is gone by now; this removes the work folder and record
            self._record = None
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    # --- calls -----------------------------------------------------------------------------------
    def _send(self, line: str) -> None:
        self._console_in.write((line + "\n").encode())
        self._console_in.flush()

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` inside the lab kernel; its result, or its exception raised here."""
        import cloudpickle

        if not self.alive:
            raise self.Error(f"{self.title} is not running" + (f"; its last console lines:\n{self.tail()}"
                                                                if self.console else ""))
        assert self._workdir is not None
        with self._lock:
            self._serial += 1
            serial = self._serial
            request = self._workdir / f"call-{serial}.pkl"
            tmp = request.with_suffix(".tmp")
            tmp.write_bytes(cloudpickle.dumps((fn, args, kwargs)))
            os.replace(tmp, request)
            self._send(f"call {serial}")
            limit = timeout or self.call_timeout
            with self._cond:
                answered = self._cond.wait_for(lambda: serial in self._done or self._eof, timeout=limit)
            if serial not in self._done:
                what = f"did not answer within {limit:.0f} s" if not answered else "stopped"
                name = getattr(fn, "__qualname__", repr(fn))
                self.kill()
                error = self.Timeout if not answered else self.Error
                raise error(f"{self.title} {what} during {name}; it was ended. Last console lines:\n{self.tail()}")
            answer = self._workdir / f"answer-{serial}.pkl"
            status, payload, trace = pickle.loads(answer.read_bytes())
            answer.unlink()
        if status == "ok":
            return payload
        exc = payload if isinstance(payload, BaseException) else RemoteError(payload)
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised inside {self.title} {self.release}:)\n{trace}")
        raise exc


def run_command(argv: list[str]) -> int:
    """Run ``argv`` in the lab kernel with its output on the console (called in the agent by
    ``tcplab uml run``); its exit status."""
    return subprocess.call(argv, stdin=subprocess.DEVNULL)


# --- one kernel of each kind per process ------------------------------------------------------------

_shared: dict[str, AgentKernel] = {}
_shared_lock = threading.Lock()


def shared(kind: str, make: Callable[[], AgentKernel]) -> AgentKernel:
    """The process's lab kernel of ``kind``, started with ``make()`` on first use and ended at
    exit: a case's runs and a notebook's paths all go to one start."""
    with _shared_lock:
        kernel = _shared.get(kind)
        if kernel is None or not kernel.alive:
            kernel = _shared[kind] = make().start()
        return kernel


def shutdown_shared(kind: str | None = None) -> None:
    """End the process's lab kernel of ``kind`` (None: every kind)."""
    with _shared_lock:
        for name in [kind] if kind else list(_shared):
            kernel = _shared.pop(name, None)
            if kernel is not None:
                kernel.stop()
