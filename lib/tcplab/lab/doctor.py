"""What can this machine do? Capabilities, then a short fidelity check on a fresh path."""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import asdict, dataclass, field
from typing import Any

from . import sysctl
from .link import netem_available
from .tracefs import ensure_tracefs

TOOLS = ("ip", "tc", "iptables", "tcpdump", "ss", "ethtool", "tshark", "curl", "iperf3", "chromium")
#: Tools without which no experiment can run; the rest only disable some features.
REQUIRED_TOOLS = ("ip", "iptables", "tcpdump", "ss")


@dataclass
class Capabilities:
    root: bool
    kernel: str
    netem: bool
    backend: str
    tracefs: bool
    default_cc: str
    available_cc: list[str]
    allowed_cc: list[str]
    offload_control: bool
    tools: dict[str, str | None]
    host_sysctls: dict[str, str]
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def capabilities() -> Capabilities:
    from .kernels import privileged

    root = privileged()  # root, or the root of a user namespace's lab
    tools = {t: shutil.which(t) for t in TOOLS}
    problems = []
    if not root:
        problems.append("not root: namespaces, tc and tcpdump need root (run with sudo), or a user namespace")
    problems += [f"missing tool: {t} (make setup installs it)" for t in REQUIRED_TOOLS if tools[t] is None]
    netem = netem_available() if root else False
    if root and not netem and tools["iptables"] is None:
        problems.append("no sch_netem and no iptables: no link emulation backend can run")
    return Capabilities(
        root=root,
        kernel=platform.release(),
        netem=netem,
        backend="netem" if netem else "delayline",
        tracefs=ensure_tracefs(),
        default_cc=sysctl.default_cc(),
        available_cc=sysctl.available_cc(),
        allowed_cc=sysctl.allowed_cc(),
        offload_control=tools["ethtool"] is not None or root,
        tools=tools,
        host_sysctls={k: " ".join(sysctl.read_or_empty(k).split()) for k in sysctl.HOST_GLOBAL},
        problems=problems,
    )


def lab_kernels() -> dict[str, Any]:
    """For this user: can the host kernel run the lab (as root), can it in a user namespace,
    can the UML kernel, and which releases."""
    from . import uml
    from .kernels import host_can_run, userns_can_run, uml_can_run

    host_ok, host_why = host_can_run()
    userns_ok, userns_why = userns_can_run()
    uml_ok, uml_why = uml_can_run()
    install = uml.find_install()
    return {"uid": os.getuid(),
            "host": {"ok": host_ok, "why": host_why, "release": platform.release()},
            "userns": {"ok": userns_ok, "why": userns_why, "release": platform.release()},
            "uml": {"ok": uml_ok, "why": uml_why, "release": install.release if install else "-",
                    "binary": str(install.binary) if install else None}}


def userns_limits() -> list[str]:
    """What the lab cannot do in a user namespace on this machine, with the values in force:
    host-global settings (read-only there), module loading, tracefs."""
    values = {k: " ".join(sysctl.read_or_empty(k).split()) or "?" for k in sysctl.HOST_GLOBAL}
    return [f"cannot change host-global settings ({', '.join(f'{k} = {v}' for k, v in values.items())}): a path "
            "that needs one changed runs in the UML kernel where it can (auto), else is refused by name",
            "cannot load kernel modules: netem only where the kernel has sch_netem already (else the delay line)",
            "cannot read tracefs: tracepoints are recorded as not available"]


@dataclass
class FidelityCheck:
    backend: str
    rtt_configured: float
    rtt_measured: float
    rtt_kernel_min: float
    rate_configured: float
    goodput: float
    cc: str
    #: The same ping-pong over the client's own loopback: what the lab kernel's socket calls and
    #: wake-ups add to every round trip an application measures (0.1 ms on this host, about
    #: 0.3 ms in UML, whose system calls go through ptrace), not the path's.
    rtt_loopback: float = 0.0

    @property
    def rtt_error(self) -> float:
        """The path's error: the measured round trip less the measurement's own cost (loopback)."""
        return self.rtt_measured - self.rtt_loopback - self.rtt_configured

    @property
    def rtt_ok(self) -> bool:
        return abs(self.rtt_error) <= max(0.02 * self.rtt_configured, 0.0002)

    @property
    def rate_share(self) -> float:
        return self.goodput / self.rate_configured

    @property
    def rate_ok(self) -> bool:
        # TCP goodput over Ethernet framing tops out at 1448/1514 ≈ 95.6 % of the line rate.
        return self.rate_share >= 0.90


def fidelity_check(rtt: str = "20ms", rate: str = "100mbit", backend: str = "auto",
                   seconds: float = 2.0) -> FidelityCheck:
    from . import fidelity
    from .path import NetPath

    with NetPath(rtt=rtt, rate=rate, backend=backend) as path:
        loopback = fidelity.tcp_rtt(path, count=40, loopback=True)
        rtts = fidelity.tcp_rtt(path, count=40)
        put = fidelity.goodput(path, seconds=seconds)
        spec = path.spec
        return FidelityCheck(path.backend, spec.rtt or 0.0, rtts.median, rtts.kernel_min_rtt,
                             spec.rate or 0.0, put.bits_per_second, put.cc, loopback.median)
