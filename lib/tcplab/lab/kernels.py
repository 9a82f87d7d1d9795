"""Which kernel runs the lab: this machine's own (``host``), a User-mode Linux kernel (``uml``), or ``auto``.

``host`` needs root and the lab's tools on this machine. ``uml`` needs the UML kernel
(:mod:`tcplab.lab.uml`), not root: inside it the lab is root of its own kernel. ``auto``
takes the host when it can run the lab, else UML, else nothing (the course then replays
recorded runs). The choice and its reason are shown on every page.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from ..units import ParameterError

KERNELS = ("host", "uml", "auto")
#: How a case's variants are had: measured on a live lab, or read from recorded runs.
MODES = ("live", "replay")
#: What a user may ask for: a mode, or ``auto`` (live where a kernel can run the lab, else replay).
MODE_CHOICES = ("auto", *MODES)
#: Tools without which no experiment can run on the host.
REQUIRED_TOOLS = ("ip", "iptables", "tcpdump", "ss")


@dataclass(frozen=True)
class KernelChoice:
    """``kernel`` is "host", "uml", or None (no live lab possible); ``why`` says why in words."""

    kernel: str | None
    why: str


def host_can_run() -> tuple[bool, str]:
    """Whether this machine's own kernel can run the lab for this user, and if not, why."""
    if os.geteuid() != 0:
        return False, "not root"
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        return False, "missing " + ", ".join(missing)
    return True, ""


def uml_can_run() -> tuple[bool, str]:
    from . import uml

    if inside():
        return True, ""
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:  # the UML kernel runs the host's own tools through hostfs
        return False, "missing " + ", ".join(missing)
    if uml.find_install() is None:
        return False, "no User-mode Linux kernel installed"
    return True, ""


def lab_kernel() -> dict[str, str]:
    """The kernel this process's lab runs on, for run records: kind (host or uml) and release."""
    import platform

    return {"kind": "uml" if inside() else "host", "release": platform.release()}


def choose_kernel(requested: str | None) -> KernelChoice:
    """``requested`` (host, uml, auto or None = auto) → the kernel that will run the lab.

    Inside a UML kernel's agent every request means that kernel: it is the host there.
    """
    requested = requested or "auto"
    if requested not in KERNELS:
        raise ParameterError("kernel", requested, "one of " + ", ".join(KERNELS))
    host_ok, host_why = host_can_run()
    if inside():  # this kernel is the lab's; there is no other to fall back on
        if host_ok:
            return KernelChoice("host", "inside the UML kernel")
        if requested == "auto":
            return KernelChoice(None, f"the UML kernel cannot run the lab ({host_why})")
        raise ParameterError("kernel", requested, "auto", f"the UML kernel cannot run the lab: {host_why}")
    if requested == "host":
        if not host_ok:
            raise ParameterError("kernel", requested, "uml or auto", f"the host kernel cannot run the lab: {host_why}")
        return KernelChoice("host", "as requested")
    uml_ok, uml_why = uml_can_run()
    if requested == "uml":
        if not uml_ok:
            from . import uml

            why = uml_why if uml.find_install() else uml.INSTALL_HINT.format(why=uml_why, folder=uml.cache_dir())
            raise ParameterError("kernel", requested, "host or auto", why)
        return KernelChoice("uml", "as requested")
    if host_ok:
        return KernelChoice("host", "root on this machine")
    if uml_ok:
        return KernelChoice("uml", f"the host kernel cannot run the lab ({host_why}); the UML kernel can")
    return KernelChoice(None, f"the host kernel cannot run the lab ({host_why}) and no UML kernel ({uml_why})")


@dataclass(frozen=True)
class ModeChoice:
    """``mode`` is "live" or "replay"; ``kernel`` the lab's kernel when live; ``why`` in words."""

    mode: str
    kernel: str | None
    why: str

    @property
    def where(self) -> str:
        """Where the variants come from, for a progress line: "the UML kernel: as requested"."""
        if self.mode == "replay":
            return self.why
        return f"{'the UML kernel' if self.kernel == 'uml' else 'the host kernel'}: {self.why}"


def choose_mode(requested: str, kernel: str | None = "auto", *, parameter: str = "mode") -> ModeChoice:
    """Live where a kernel can run the lab (the host's as root, else the UML kernel), else replay.

    ``live`` where no kernel can run the lab is a :class:`ParameterError` naming ``parameter``
    (``MODE`` for ``make report``, ``mode`` for a notebook).
    """
    if requested not in MODE_CHOICES:
        raise ParameterError(parameter, requested, "one of " + ", ".join(MODE_CHOICES))
    if requested == "replay":
        return ModeChoice("replay", None, "as requested")
    choice = choose_kernel(kernel)
    if choice.kernel is None:
        if requested == "live":
            raise ParameterError(parameter, requested, "replay or auto", f"live mode impossible here: {choice.why}")
        return ModeChoice("replay", None, f"live impossible: {choice.why}")
    return ModeChoice("live", choice.kernel, choice.why)


def call_in(kernel: str | None, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in the lab kernel ``kernel``: here, or in the process's UML
    kernel (booted on first use)."""
    if kernel != "uml":
        return fn(*args, **kwargs)
    from . import uml

    return uml.shared_kernel().call(fn, *args, **kwargs)


class InKernel:
    """The host's stand-in for an object held in the UML kernel: inside any function sent
    there (:func:`call_in`) it is that object; here it only names it."""

    def __init__(self, ident: str, what: str) -> None:
        self.ident, self.what = ident, what

    def __reduce__(self):
        return held, (self.ident,)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{self.what} lives in the UML kernel: use it in a function run there "
                             f"(call_in, CaseLab.in_lab or keep), not here (asked for .{name})")

    def __repr__(self) -> str:
        return f"<{self.what} in the UML kernel>"


@contextlib.contextmanager
def held_in(kernel: str | None, factory: Callable[..., ContextManager[Any]], *args: Any) -> Iterator[Any]:
    """``factory(*args)``, a context manager, entered in the lab kernel ``kernel`` for the
    ``with`` block: what it gives here, or in UML its :class:`InKernel` stand-in."""
    if kernel != "uml":
        with factory(*args) as entered:
            yield entered
        return
    from . import uml

    shared = uml.shared_kernel()
    ident = shared.call(hold, factory, args)
    try:
        yield InKernel(ident, getattr(factory, "__name__", repr(factory)))
    finally:
        if shared.alive:
            shared.call(let_go, ident)


# --- inside the UML kernel's agent: what the host keeps there, by id ------------------------------

def inside() -> bool:
    """Whether this process is the agent of a UML lab kernel (then "uml" means this kernel)."""
    return os.environ.get("TCPLAB_UML_AGENT") == "1"


#: Objects the host keeps in this kernel for a while (a ballast of TCP memory), by id: the
#: context manager and what its ``__enter__`` gave. Paths are kept by :mod:`.path`.
HELD: dict[str, tuple[Any, Any]] = {}


def hold(factory: Any, args: tuple) -> str:
    """Enter ``factory(*args)`` (a context manager) here and keep it; its id."""
    manager = factory(*args)
    entered = manager.__enter__()
    ident = f"held-{id(manager):x}"
    HELD[ident] = (manager, entered)
    return ident


def held(ident: str) -> Any:
    try:
        return HELD[ident][1]
    except KeyError:
        raise LookupError(f"nothing held as {ident} in this UML kernel (it was let go, or the kernel rebooted)") from None


def let_go(ident: str) -> None:
    manager, _ = HELD.pop(ident, (None, None))
    if manager is not None:
        manager.__exit__(None, None, None)
