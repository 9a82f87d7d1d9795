"""Which kernel runs the lab: this machine's own as root (``host``), this machine's own in the
user's own user namespace (``userns``), a User-mode Linux kernel (``uml``), or ``auto``.

``host`` needs root and the lab's tools on this machine. ``userns`` needs neither root nor a
second kernel, only a kernel that lets an unprivileged user make a user namespace
(:mod:`tcplab.lab.userns`); it cannot change host-global settings. ``uml`` needs the UML
kernel (:mod:`tcplab.lab.uml`), not root: inside it the lab is root of its own kernel.
``auto`` takes the host as root, else a user namespace, else UML, else nothing (the course
then replays recorded runs). The choice and its reason are shown on every page; a path that
needs a host-global setting changed which a user namespace cannot make runs in the UML
kernel instead, and says so (:func:`path_kernel`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from ..units import ParameterError

KERNELS = ("host", "uml", "userns", "auto")
#: The lab kernels that run in a process of their own, driven by calls (:mod:`.agent_kernel`).
AGENT_KERNELS = ("uml", "userns")
#: How a case's variants are had: measured on a live lab, or read from recorded runs.
MODES = ("live", "replay")
#: What a user may ask for: a mode, or ``auto`` (live where a kernel can run the lab, else replay).
MODE_CHOICES = ("auto", *MODES)
#: Tools without which no experiment can run on the host.
REQUIRED_TOOLS = ("ip", "iptables", "tcpdump", "ss")
#: How pages and messages name each lab kernel.
TITLES = {"host": "the host kernel", "uml": "the UML kernel", "userns": "the host kernel in a user namespace"}
#: What a path's user may ask of the kernel that the kernel grants only to the machine's
#: administrator, never to a user namespace's root, by the name a path is opened with
#: (``CaseLab.path(spec, needs=[...])``): why, in words. A path that needs one runs in the UML
#: kernel on a user namespace's lab, as one needing a host-global setting does (:func:`path_kernel`).
ADMIN_ONLY = {
    "tcp_metrics flush": "ip tcp_metrics flush, which the kernel allows only the machine's administrator "
                         "(TCP_METRICS_CMD_DEL is an admin-only netlink command)",
}


@dataclass(frozen=True)
class KernelChoice:
    """``kernel`` is "host", "userns", "uml", or None (no live lab possible); ``why`` says why in words."""

    kernel: str | None
    why: str


def _capable() -> bool:
    """Whether this process holds what the lab needs in its user namespace (the agent of a
    user-namespace lab: CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN there)."""
    from .userns import NEEDED_CAPS

    try:
        with open("/proc/self/status") as fh:
            effective = next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    return all(effective >> bit & 1 for bit in NEEDED_CAPS.values())


def privileged() -> bool:
    """Whether this process may build the lab in the kernel it runs in: root, or the agent of
    a user-namespace lab with that namespace's capabilities."""
    return os.geteuid() == 0 or (agent_kind() == "userns" and _capable())


def host_can_run() -> tuple[bool, str]:
    """Whether this machine's own kernel can run the lab for this user, and if not, why."""
    if not privileged():
        return False, "not root"
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        return False, "missing " + ", ".join(missing)
    return True, ""


def userns_can_run() -> tuple[bool, str]:
    """Whether this user can run the lab on this machine's kernel in a user namespace."""
    from . import userns

    if inside():
        return False, "already inside a lab kernel"
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        return False, "missing " + ", ".join(missing)
    return userns.probe()


def uml_can_run() -> tuple[bool, str]:
    from . import uml

    if inside():
        return True, ""
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:  # the UML kernel runs the host's own tools through hostfs
        return False, "missing " + ", ".join(missing)
    if uml.find_install() is None:
        return False, "no User-mode Linux kernel installed"
    return uml.ptrace_allowed()


def lab_kernel() -> dict[str, str]:
    """The kernel this process's lab runs on, for run records: kind (host, userns or uml) and release."""
    import platform

    return {"kind": agent_kind() or "host", "release": platform.release()}


def _refused(requested: str, why: str) -> ParameterError:
    others = ", ".join(k for k in KERNELS if k != requested)
    return ParameterError("kernel", requested, others, f"{TITLES[requested]} cannot run the lab: {why}")


def choose_kernel(requested: str | None) -> KernelChoice:
    """``requested`` (host, userns, uml, auto or None = auto) → the kernel that will run the lab.

    Inside a lab kernel's agent every request means that kernel: it is the host there.
    """
    requested = requested or "auto"
    if requested not in KERNELS:
        raise ParameterError("kernel", requested, "one of " + ", ".join(KERNELS))
    host_ok, host_why = host_can_run()
    if inside():  # this kernel is the lab's; there is no other to fall back on
        if host_ok:
            return KernelChoice("host", f"inside {TITLES[agent_kind() or 'host']}")
        if requested == "auto":
            return KernelChoice(None, f"this lab kernel cannot run the lab ({host_why})")
        raise ParameterError("kernel", requested, "auto", f"this lab kernel cannot run the lab: {host_why}")
    if requested == "host":
        if not host_ok:
            raise _refused("host", host_why)
        return KernelChoice("host", "as requested")
    if requested == "userns":
        ok, why = userns_can_run()
        if not ok:
            raise _refused("userns", why)
        return KernelChoice("userns", "as requested")
    if requested == "uml":
        uml_ok, uml_why = uml_can_run()
        if not uml_ok:
            from . import uml

            why = uml_why if uml.find_install() else uml.INSTALL_HINT.format(why=uml_why, folder=uml.cache_dir())
            raise _refused("uml", why)
        return KernelChoice("uml", "as requested")
    if host_ok:
        return KernelChoice("host", "root on this machine")
    userns_ok, userns_why = userns_can_run()
    if userns_ok:
        return KernelChoice("userns", f"{host_why}; this user may make user namespaces")
    uml_ok, uml_why = uml_can_run()
    if uml_ok:
        return KernelChoice("uml", f"the host kernel cannot run the lab ({host_why}), nor in a user namespace "
                                   f"({userns_why}); the UML kernel can")
    return KernelChoice(None, f"the host kernel cannot run the lab ({host_why}), nor in a user namespace "
                              f"({userns_why}), and no UML kernel ({uml_why})")


class HostGlobalError(PermissionError):
    """A path needs a host-global setting changed, which its lab kernel (a user namespace)
    cannot do, and no other lab kernel can take the path; the message names the setting."""


def check_needs(needs: Any) -> tuple[str, ...]:
    """``needs`` as a tuple of :data:`ADMIN_ONLY` names, or a :class:`ParameterError`."""
    if isinstance(needs, str):
        needs = (needs,)
    needs = tuple(needs or ())
    for need in needs:
        if need not in ADMIN_ONLY:
            raise ParameterError("needs", need, "a list of: " + ", ".join(ADMIN_ONLY))
    return needs


def path_kernel(spec: Any, kernel: str | None, needs: tuple[str, ...] = ()) -> KernelChoice:
    """The kernel that runs a path of ``spec`` where the lab's kernel is ``kernel``: that one,
    unless it is a user namespace and the path needs a host-global setting changed (a
    limit raised or lowered, ``tcp_mem``, a congestion control the host restricts for a
    namespace's default... see :func:`host_global_needs`) or an action only the machine's
    administrator may do (``needs``, :data:`ADMIN_ONLY`): then the UML kernel, which is its
    own, where it can run; else :class:`HostGlobalError`."""
    if kernel != "userns":
        return KernelChoice(kernel, "")
    from . import userns

    blockers = host_global_needs(spec)
    if not blockers and not needs:
        return KernelChoice("userns", "")
    reasons = "; ".join(([f"{userns.blockers_text(blockers)}: host-global, which a user namespace can read but "
                          "not change"] if blockers else []) + [ADMIN_ONLY[need] for need in needs])
    uml_ok, uml_why = uml_can_run()
    if not uml_ok:
        raise HostGlobalError(f"this path needs what a user namespace may not do: {reasons}; and no UML kernel can "
                              f"run the path instead ({uml_why}). Ask the machine's administrator, or run as root.")
    return KernelChoice("uml", f"{reasons}; so the paths that need it ran in the UML kernel, where the lab is "
                               "the administrator")


def on_kernel(spec: Any, kernel: str | None, needs: tuple[str, ...] = ()) -> tuple[Any, str]:
    """``spec`` as a lab whose kernel is ``kernel`` runs it, and why where it runs elsewhere:
    the kernel of :func:`path_kernel` written into it. A path sent from a user namespace to
    the UML kernel takes the host's buffer limits along (``wmem_max``, ``rmem_max``, unless
    the spec sets them), so that it meets the limits the case read and planned its buffers by
    (the host's), not UML's stock ones."""
    choice = path_kernel(spec, kernel, needs)
    if kernel == "userns" and choice.kernel == "uml":
        from . import sysctl

        own = {sysctl.key_of(k) for k in spec.host}
        limits = {key: value for key in sysctl.BUFFER_LIMIT_KEYS
                  if key not in own and (value := sysctl.read_or_empty(key))}
        spec = spec.replaced(host={**limits, **spec.host})
    return spec.replaced(kernel=choice.kernel), choice.why


def host_global_needs(spec: Any) -> dict[str, tuple[str, str]]:
    """{key: (wanted, in force)} for each host-global setting a path of ``spec`` would change
    here: read on this machine now (any user may read them)."""
    from . import sysctl, userns

    wanted = dict(spec.host_settings())
    # A congestion control outside tcp_allowed_congestion_control is set per route in a user
    # namespace (route option congctl, which has no such restriction): no host change needed.
    wanted.pop(sysctl.ALLOWED_CC, None)
    in_force = {key: sysctl.read_or_empty(key) for key in wanted}
    return userns.host_global_blockers(wanted, in_force)


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
        return f"{TITLES[self.kernel or 'host']}: {self.why}"


def choose_mode(requested: str, kernel: str | None = "auto", *, parameter: str = "mode") -> ModeChoice:
    """Live where a kernel can run the lab (the host's as root, else in a user namespace, else
    the UML kernel), else replay.

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


def agent_of(kernel: str) -> Any:
    """The process's lab kernel of that name ("uml", "userns"), started on first use."""
    if kernel == "uml":
        from . import uml

        return uml.shared_kernel()
    from . import userns

    return userns.shared_kernel()


def call_in(kernel: str | None, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in the lab kernel ``kernel``: here, or in the process's UML
    kernel or user-namespace lab (started on first use)."""
    if kernel not in AGENT_KERNELS:
        return fn(*args, **kwargs)
    return agent_of(kernel).call(fn, *args, **kwargs)


class InKernel:
    """The host's stand-in for an object held in a lab kernel of its own (UML, a user
    namespace): inside any function sent there (:func:`call_in`) it is that object; here it
    only names it."""

    def __init__(self, ident: str, what: str, where: str = "the UML kernel") -> None:
        self.ident, self.what, self.where = ident, what, where

    def __reduce__(self):
        return held, (self.ident,)

    def __getattr__(self, name: str) -> Any:
        if name in ("ident", "what", "where"):  # before __init__ (copy, pickle): not there yet
            raise AttributeError(name)
        raise AttributeError(f"{self.what} lives in {self.where}: use it in a function run there "
                             f"(call_in, CaseLab.in_lab or keep), not here (asked for .{name})")

    def __repr__(self) -> str:
        return f"<{self.what} in {self.where}>"


@contextlib.contextmanager
def held_in(kernel: str | None, factory: Callable[..., ContextManager[Any]], *args: Any) -> Iterator[Any]:
    """``factory(*args)``, a context manager, entered in the lab kernel ``kernel`` for the
    ``with`` block: what it gives here, or in a lab kernel of its own its :class:`InKernel`
    stand-in. In a user namespace's lab it is held in the UML kernel too, where one can run:
    the paths a user namespace cannot make run there (:func:`path_kernel`), and what a case
    holds (another application's TCP memory, say) belongs beside its runs."""
    if kernel not in AGENT_KERNELS:
        with factory(*args) as entered:
            yield entered
        return
    with contextlib.ExitStack() as stack:
        if kernel == "userns" and uml_can_run()[0]:
            stack.enter_context(_held_by(agent_of("uml"), "uml", factory, args))
        yield stack.enter_context(_held_by(agent_of(kernel), kernel, factory, args))


@contextlib.contextmanager
def _held_by(shared: Any, kernel: str, factory: Callable[..., ContextManager[Any]], args: tuple) -> Iterator[Any]:
    ident = shared.call(hold, factory, args)
    try:
        yield InKernel(ident, getattr(factory, "__name__", repr(factory)), TITLES[kernel])
    finally:
        if shared.alive:
            shared.call(let_go, ident)


# --- inside a lab kernel's agent: what the host keeps there, by id ------------------------------

def agent_kind() -> str | None:
    """The kind of lab kernel ("uml", "userns") whose agent this process is (None: not one)."""
    return os.environ.get("TCPLAB_LAB_AGENT") or None


def inside() -> bool:
    """Whether this process is the agent of a lab kernel (then every kernel means this one)."""
    return agent_kind() is not None


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
        raise LookupError(f"nothing held as {ident} in this lab kernel (it was let go, or the kernel ended)") from None


def let_go(ident: str) -> None:
    manager, _ = HELD.pop(ident, (None, None))
    if manager is not None:
        manager.__exit__(None, None, None)
