"""Network namespaces: create, remove, run code and processes inside them.

Namespaces are registered under /var/run/netns (pyroute2 does it the way iproute2 does),
so users can inspect a running lab with ``ip netns exec tcplab-…-server ss -tin``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

from pyroute2 import config as _pr_config
from pyroute2 import netns as _pr_netns

from . import state
from .state import process_alive

PREFIX = "tcplab-"
NETNS_DIR = "/var/run/netns"
_CLONE_NEWNET = 0x40000000

#: How long pyroute2 waits for the child it forks to make a namespace (or a socket in one) to
#: answer: 2 s by default, which a slow UML kernel's fork of this process overran (2026-11-29:
#: system calls of 130 µs there), leaving the namespace made and unreported.
_pr_config.default_communicate_timeout = max(_pr_config.default_communicate_timeout, 30)

T = TypeVar("T")
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


#: Who built each namespace, so ``tcplab cleanup`` can tell a live run from a dead one.
OWNERS_DIR = str(state.OWNERS_DIR)


def create(name: str) -> None:
    os.makedirs(OWNERS_DIR, exist_ok=True)
    with open(os.path.join(OWNERS_DIR, name), "w") as fh:
        fh.write(str(os.getpid()))
    try:
        _pr_netns.create(name)
    except BaseException:
        remove(name)  # a child that made it but did not answer in time leaves it behind
        raise


def owner_of(name: str) -> int | None:
    try:
        with open(os.path.join(OWNERS_DIR, name)) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def forget_owner(name: str) -> None:
    try:
        os.unlink(os.path.join(OWNERS_DIR, name))
    except FileNotFoundError:
        pass


def exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def listed(prefix: str = PREFIX) -> list[str]:
    return sorted(n for n in _pr_netns.listnetns() if n.startswith(prefix))


def pids(name: str) -> list[int]:
    """Processes whose network namespace is ``name``."""
    return sorted(_pr_netns.ns_pids().get(name, []))


def kill_all(name: str, grace: float = 1.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process still inside the namespace; returns their pids."""
    victims = pids(name)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(process_alive(p) for p in victims):
            time.sleep(0.02)
        if not any(process_alive(p) for p in victims):
            break
    return victims


def remove(name: str) -> None:
    if exists(name):
        _pr_netns.remove(name)
    forget_owner(name)


def run_in(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``fn`` inside namespace ``name`` and return its result.

    setns(2) changes the namespace of the calling thread only, so a short-lived thread
    does the work and the rest of the process never leaves the initial namespace.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
            try:
                if _libc.setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {name}: {os.strerror(err)}")
            finally:
                os.close(fd)
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"netns-{name}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def command(name: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` inside namespace ``name``.

    ``ip netns exec`` is used rather than a setns in a fork hook: it also remounts /sys
    for the namespace, is safe in a threaded parent, and prints as a command a user can
    copy to reproduce what tcplab ran.
    """
    return ["ip", "netns", "exec", name, *argv]


def popen(name: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(command(name, argv), **kwargs)


def run(name: str, argv: Sequence[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(name, argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout, check=check,
    )


#: The iptables front ends, in the order tried: a kernel built without nf_tables' IPv4 family
#: (Debian's UML kernel) lists rules through iptables-nft but refuses to add any, and takes
#: the legacy one.
IPTABLES = ("iptables", "iptables-legacy")
_iptables_that_works: list[str] = []


def iptables(name: str, args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess:
    """``iptables -w args`` in namespace ``name``, with the front end this kernel accepts
    (found at the first rule added, then kept, so a rule is deleted by the one that added it)."""
    for binary in _iptables_that_works or IPTABLES:
        done = run(name, [binary, "-w", *args], check=False)
        if done.returncode == 0:
            _iptables_that_works[:] = [binary]
            break
        if "not supported" not in done.stderr.lower():
            break  # a real error (a rule that is not there, say), not the wrong front end
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done


def outside_event_loop(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` in a worker thread when the caller's thread runs an asyncio loop.

    pyroute2's synchronous API drives an event loop of its own, which cannot start inside
    a running one — and a Jupyter kernel runs every cell inside one.
    """
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return fn(*args, **kwargs)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = fn(*args, **kwargs)
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"pyroute2-{fn.__name__}")
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    return wrapper


def iproute(name: str):
    """A pyroute2 IPRoute bound to namespace ``name``.

    ``flags=0``: pyroute2 would otherwise *create* a missing namespace of that name and
    configure an empty one without a word; we want an error instead.
    """
    from pyroute2 import IPRoute

    return IPRoute(netns=name, flags=0)
