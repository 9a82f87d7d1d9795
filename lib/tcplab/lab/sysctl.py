"""Kernel settings: per-namespace TCP sysctls, and a guard for the few host-global ones.

Most ``net.ipv4.tcp_*`` settings live in each network namespace, so an experiment changes
them in its own namespaces and they vanish with the namespaces. A few knobs are shared by
the whole machine (``net.core.rmem_max``, ``net.core.wmem_max``, ``net.ipv4.tcp_mem``,
``net.ipv4.tcp_allowed_congestion_control``): :class:`HostGuard` is the only way tcplab
touches them. It writes the old values to disk *before* changing anything, restores them
on exit, and ``tcplab cleanup`` restores from that record after a crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..files import write_atomically
from ..units import ParameterError
from . import netns, state

PROC_SYS = Path("/proc/sys")

#: The congestion controls a namespace may make its default (host-global).
ALLOWED_CC = "net.ipv4.tcp_allowed_congestion_control"
#: Knobs that belong to the whole machine, not to a namespace (kernel 6.x). Linux 6.x shows
#: rmem_max and wmem_max in every network namespace, read-only outside the host's own.
HOST_GLOBAL = (
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_allowed_congestion_control",
)

STATE_DIR = state.STATE_DIR
GUARD_RECORD = STATE_DIR / "host-guard.json"
GUARD_LOCK = STATE_DIR / "host-guard.lock"

#: The per-namespace settings recorded with every run, so a result says what the kernel did.
SNAPSHOT_PREFIXES = ("net/ipv4/tcp_", "net/core/")


def _path(key: str) -> Path:
    return PROC_SYS / key.replace(".", "/")


def key_of(name: str) -> str:
    """Accept ``tcp_rmem``, ``ipv4.tcp_rmem`` or ``net.ipv4.tcp_rmem``; return the full key."""
    name = name.strip().replace("/", ".")
    if name.startswith("net."):
        return name
    if name.startswith(("ipv4.", "core.", "ipv6.")):
        return "net." + name
    if name.startswith("tcp_"):
        return "net.ipv4." + name
    return name


def check_namespace_settings(settings: Mapping[str, object]) -> dict[str, str]:
    """Validate per-namespace sysctls before anything is touched; return full key → text value."""
    out = {}
    for name, value in settings.items():
        key = key_of(name)
        if key in HOST_GLOBAL:
            raise ParameterError(
                name, value, "a per-namespace sysctl",
                f"{key} is shared by the whole machine; set it through host_settings (HostGuard)",
            )
        # Without /proc/sys/net (replaying recorded runs off Linux) only a live run can tell.
        if not key.startswith("net.") or not (known(key) or not (PROC_SYS / "net").exists()):
            raise ParameterError(name, value, "a sysctl under net.ipv4 or net.core that this kernel has",
                                 "unknown sysctl")
        out[key] = format_value(value)
    return out


def format_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def read(key: str) -> str:
    return _path(key).read_text().strip()


def known(key: str) -> bool:
    """Whether the kernel this runs in has the sysctl ``key`` (``tcp_rto_max_ms`` came with
    Linux 6.15, for example)."""
    return _path(key_of(key)).exists()


def read_or_empty(key: str) -> str:
    """``read``, or "" where this machine has no such file (no /proc/sys: replay off Linux)."""
    try:
        return read(key)
    except OSError:
        return ""


#: Buffer limits on what SO_SNDBUF/SO_RCVBUF may ask for (man 7 socket), host-global.
#: The host-global ceilings of ``SO_SNDBUF`` and ``SO_RCVBUF`` (man 7 socket). Stock Linux
#: has 212992 for both; distributions and tuned hosts often more, so a case never assumes.
WMEM_MAX, RMEM_MAX = "net.core.wmem_max", "net.core.rmem_max"
BUFFER_LIMIT_KEYS = (WMEM_MAX, RMEM_MAX)
#: The autotuning maxima beside them (per namespace; a new namespace starts with the host's).
TCP_RMEM, TCP_WMEM = "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"


def buffer_limits() -> dict[str, int]:
    """The buffer limits in force now (a namespace sees the host's values)."""
    return {key: int(read(key)) for key in BUFFER_LIMIT_KEYS}


def socket_buffer_settings() -> dict[str, Any]:
    """The socket-buffer settings of the kernel this runs in: wmem_max and rmem_max (ints),
    tcp_rmem and tcp_wmem (as the kernel prints them, "min default max")."""
    return {**buffer_limits(), **{key: " ".join(read(key).split()) for key in (TCP_RMEM, TCP_WMEM)}}


def default_cc() -> str:
    """This kernel's default congestion control ("" where unknown)."""
    return read_or_empty("net.ipv4.tcp_congestion_control")


def available_cc() -> list[str]:
    """This kernel's congestion controls; empty where there is no /proc/sys (replay off Linux)."""
    return read_or_empty("net.ipv4.tcp_available_congestion_control").split()


def allowed_cc() -> list[str]:
    """The congestion controls a namespace may pick (EPERM for others): host-global."""
    return read_or_empty(ALLOWED_CC).split()


def write(key: str, value: str) -> None:
    try:
        _path(key).write_text(value + "\n")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot set {key} = {value!r}: {exc.strerror}") from None


def read_in(ns: str, key: str) -> str:
    return netns.run_in(ns, read, key)


def apply_in(ns: str, settings: Mapping[str, str]) -> None:
    def _apply() -> None:
        for key, value in settings.items():
            write(key, value)
    netns.run_in(ns, _apply)


def snapshot_in(ns: str) -> dict[str, str]:
    """Every TCP and net.core sysctl as the namespace sees it (for run records)."""
    def _snap() -> dict[str, str]:
        result = {}
        for prefix in SNAPSHOT_PREFIXES:
            folder, _, start = prefix.rpartition("/")
            for entry in sorted((PROC_SYS / folder).iterdir()):
                if not entry.name.startswith(start) or not entry.is_file():
                    continue
                try:
                    result[f"{folder.replace('/', '.')}.{entry.name}"] = " ".join(entry.read_text().split())
                except OSError:
                    continue  # write-only or permission-restricted entries
        return result
    return netns.run_in(ns, _snap)


#: The guards this process holds, outermost first. A forked child (pyroute2 forks helpers)
#: inherits the list but holds nothing, so a guard nests only when the pid matches.
_held: list["HostGuard"] = []


class HostGuard:
    """Change host-global sysctls for the duration of a ``with`` block, then restore them.

    Only one guard holds the machine at a time (a file lock), so two experiments can never
    restore each other's values in the wrong order. The original values reach the disk
    before the first write; :func:`restore_host` puts them back after a crash.

    Inside a guard this process holds, a second guard nests (a test that sets stock limits
    for a whole path whose own guard raises one of them): it takes no lock, adds to the
    record only the keys no outer guard had saved (the record keeps the machine's true
    values), and puts back the values it found when it exits. Nested guards exit in reverse
    order, as ``with`` blocks do. A guard held by a process this one descends from encloses
    it the same way: the course run with stock limits for all its notebooks, each of whose
    kernels raises a limit for one path (the notebooks run one at a time).
    """

    def __init__(self, settings: Mapping[str, object], *, wait: float = 600.0) -> None:
        self.settings = {}
        for name, value in settings.items():
            key = key_of(name)
            if key not in HOST_GLOBAL:
                raise ParameterError(name, value, "one of " + ", ".join(HOST_GLOBAL),
                                     "not a host-global setting; set it per namespace")
            if not _path(key).exists():
                raise ParameterError(name, value, "a sysctl this kernel has", "unknown sysctl")
            self.settings[key] = format_value(value)
        self.wait = wait
        self._lock_fd: int | None = None

    def __enter__(self) -> "HostGuard":
        self._inherited = False
        if _held and _held[0]._owner == os.getpid():
            return self._nest()
        if _held_by_an_ancestor():
            self._inherited = True
            return self._nest()
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(GUARD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self._lock_fd)
                    raise TimeoutError("another tcplab run holds the host-global settings") from None
                time.sleep(0.1)
        # A previous holder that crashed left its record: restore first so "old" is truly old.
        restore_host()
        original = {key: read(key) for key in self.settings}
        _write_atomic(GUARD_RECORD, {"pid": os.getpid(), "time": time.time(), "original": original})
        return self._apply()

    def _apply(self) -> "HostGuard":
        """Hold the guard and write the settings; a failed write exits it (restoring) at once."""
        self._owner = os.getpid()
        _held.append(self)
        try:
            for key, value in self.settings.items():
                write(key, value)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _nest(self) -> "HostGuard":
        self._found = {key: read(key) for key in self.settings}
        record = json.loads(GUARD_RECORD.read_text())
        self._added = [key for key in self.settings if key not in record["original"]]
        record["original"].update({key: self._found[key] for key in self._added})
        _write_atomic(GUARD_RECORD, record)
        return self._apply()

    def __exit__(self, *exc: object) -> None:
        if self not in _held:
            return
        if _held[-1] is not self:
            raise RuntimeError("host guards must exit in reverse order of entry")
        if _held[0] is not self or self._inherited:  # nested: back to the values the enclosing guard set
            try:
                for key, value in self._found.items():
                    write(key, value)
                record = json.loads(GUARD_RECORD.read_text())
                for key in self._added:
                    record["original"].pop(key, None)
                _write_atomic(GUARD_RECORD, record)
            finally:
                _held.pop()
            return
        try:
            restore_host()
        finally:
            _held.pop()
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None


def _held_by_an_ancestor() -> bool:
    """Whether the guard's record belongs to a process this one descends from."""
    try:
        holder = json.loads(GUARD_RECORD.read_text())["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return holder in state.ancestors()


def restore_host() -> dict[str, str]:
    """Put back host-global values from the guard's record, if there is one; return them."""
    if not GUARD_RECORD.exists():
        return {}
    original = json.loads(GUARD_RECORD.read_text())["original"]
    for key, value in original.items():
        write(key, value)
    GUARD_RECORD.unlink()
    return original


def _write_atomic(path: Path, data: object) -> None:
    write_atomically(path, json.dumps(data), sync=True)


@contextlib.contextmanager
def host_settings(settings: Mapping[str, object] | None) -> Iterator[None]:
    """``with host_settings({...}):`` — a no-op for an empty mapping."""
    if not settings:
        yield
        return
    with HostGuard(settings):
        yield
