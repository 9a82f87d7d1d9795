"""The emulated path: client ── router ── server, three network namespaces joined by veths.

::

    with NetPath(rtt="20ms", rate="100mbit") as path:
        path.server.popen([...]); path.client.run([...])

The router shapes each direction (:mod:`tcplab.lab.link`); client and server get the TCP
settings asked for. Everything is built with pyroute2 and torn down on exit, on an
exception and on SIGINT/SIGTERM; ``tcplab cleanup`` removes what a killed run left.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pyroute2.ethtool import Ethtool

from ..params import Params, param
from ..units import ParameterError, format_duration
from . import netns, state, sysctl
from .kernels import lab_kernel
from .link import AQMS, BACKENDS, LinkEmulator, LinkShape, check_aqm, choose_backend

# The two subnets live only inside the lab's namespaces, so every run may reuse them.
CLIENT_NET = "10.201.1."
SERVER_NET = "10.201.2."
#: The kernel's state of a neighbour entry that never expires (linux/neighbour.h).
NUD_PERMANENT = 0x80
#: A route metric's bit in RTAX_LOCK (include/uapi/linux/rtnetlink.h).
RTAX_SSTHRESH = 6
#: Offloads that let the stack hand veth 64 KB super-segments; every tx-tcp*-segmentation
#: variant counts too (6.18 added tx-tcp-accecn-segmentation, for example).
OFFLOADS = ("tx-generic-segmentation", "rx-gro", "rx-gro-list")
#: NFQUEUE numbers of the delay line, one per direction.
QUEUE_TO_SERVER, QUEUE_TO_CLIENT = 1, 2
#: IPv4 total lengths of a segment that carries only an ACK: no options, and timestamps.
BARE_ACK_BYTES = (40, 52)


@dataclass(frozen=True)
class PathSpec(Params):
    """Everything that defines a path. Symmetric unless ``to_server``/``to_client`` are given."""

    rtt: float | None = param("duration", None, "round-trip delay added by the router (half each way)",
                              low=0.0, high=20.0, optional=True)
    delay: float | None = param("duration", None, "one-way delay, each direction (alternative to rtt)",
                                low=0.0, high=10.0, optional=True)
    jitter: float = param("duration", 0.0, "delay variation each way, uniform ±jitter", low=0.0, high=10.0)
    loss: float = param("percent", 0.0, "random loss each way", low=0.0, high=100.0)
    rate: float | None = param("rate", None, "bottleneck rate each way (unset: veth speed)",
                               low=0.0, low_open=True, high=10e9, optional=True)
    queue: str | None = param("str", None, "bottleneck queue: packets (100) or bytes (64KB)",
                              optional=True)
    aqm: str | None = param("choice", None, "active queue management in place of the bottleneck's FIFO, each way: "
                            "fq_codel or cake, where the lab kernel has the qdisc (unset: a FIFO of queue)",
                            choices=AQMS, optional=True)
    backend: str = param("choice", "auto", "link emulation: netem, delayline, or auto", choices=BACKENDS)
    mtu: int = param("int", 1500, "MTU of every veth", low=576, high=9000)
    offloads: bool = param("bool", False, "keep TSO/GSO/GRO on (off: captures show wire-sized segments)")
    cc: str | None = param("str", None, "default congestion control of client and server namespaces",
                           optional=True)
    initcwnd: int | None = param("int", None, "initial congestion window (segments) on client and server routes",
                                 low=1, high=1000, optional=True)
    initrwnd: int | None = param("int", None, "initial receive window (segments) on client and server routes",
                                 low=1, high=1000, optional=True)
    ssthresh: int | None = param("int", None, "slow-start threshold (segments) locked on client and server routes "
                                 "(ip route … ssthresh lock N)", low=2, high=100000, optional=True)
    drop_bare_acks_to: str | None = param("choice", None, "the router drops segments that carry only an ACK (no "
                                          "payload, no SYN/FIN/RST) on their way to this side: client or server, "
                                          "as a middlebox that lets zero-window probes die", choices=("client", "server"),
                                          optional=True)
    seed: int = param("int", 1, "seed of the delay line's random loss and jitter", low=0, high=2**31 - 1)
    kernel: str | None = param("choice", None, "kernel that runs the lab: host, userns (the host's in a user "
                               "namespace, no root), uml (User-mode Linux), or auto (unset: host when root, else "
                               "userns where allowed, else uml)", choices=("host", "userns", "uml"), optional=True)
    #: Per-namespace sysctls for client and server, e.g. {"tcp_window_scaling": 0}.
    sysctls: Mapping[str, Any] = field(default_factory=dict)
    #: Per-namespace sysctls for one side only, on top of ``sysctls``, e.g.
    #: {"server": {"tcp_window_scaling": 0}} (keys: "client", "server").
    side_sysctls: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Host-global sysctls (rmem_max, wmem_max, tcp_mem) changed under a HostGuard.
    host: Mapping[str, Any] = field(default_factory=dict)
    #: Per-direction overrides; when given they replace the symmetric settings for that direction.
    to_server: LinkShape | None = None
    to_client: LinkShape | None = None

    def validate(self) -> None:
        if self.rtt is not None and self.delay is not None and abs(self.rtt - 2 * self.delay) > 1e-9:
            raise ParameterError("delay", format_duration(self.delay), f"unset, or half of rtt ({format_duration(self.rtt / 2)})",
                                 "rtt and delay disagree")
        # Build the shapes now: their own checks (jitter ≤ delay, queue) run before any system change.
        self.shapes()
        for side in self.side_sysctls:
            if side not in ("client", "server"):
                raise ParameterError("side_sysctls", side, "client or server")
        for key in self.host:
            if sysctl.key_of(key) not in sysctl.HOST_GLOBAL:
                raise ParameterError(key, self.host[key], "one of " + ", ".join(sysctl.HOST_GLOBAL),
                                     "not a host-global setting; use sysctls")

    def check_machine(self) -> None:
        # Per-namespace sysctls this kernel knows, and none of the host-global ones.
        sysctl.check_namespace_settings(self.namespace_sysctls())
        for settings in self.side_sysctls.values():
            sysctl.check_namespace_settings(dict(settings))
        if self.cc is not None and not self.elsewhere():
            available = sysctl.available_cc()
            if available and self.cc not in available:  # empty: no /proc/sys (replay off Linux)
                raise ParameterError("cc", self.cc, "one of " + ", ".join(available),
                                     "not available in this kernel")

    @classmethod
    def of_run(cls, run: Any) -> "PathSpec":
        """The spec of the path a run record (:class:`tcplab.runs.Run`) was made on."""
        return cls.from_record(run.params.get("path", {}))

    @classmethod
    def from_record(cls, values: Mapping[str, Any]) -> "PathSpec":
        """The spec a run record stored (:meth:`to_dict`), with its sysctls and, where a
        direction was shaped on its own, that direction's shape."""
        extras: dict[str, Any] = {name: dict(values[name]) for name in ("sysctls", "host") if values.get(name)}
        if values.get("side_sysctls"):
            extras["side_sysctls"] = {side: dict(v) for side, v in values["side_sysctls"].items()}
        spec = super().from_record(values, **extras)
        symmetric = spec.shapes()
        # Compared as stored text: the run's key is made of it (an override's 0 is not 0.0). A field
        # a record made before it existed does not store (aqm) is its default, unset.
        own = {direction: LinkShape.from_record(stored) for direction, stored in (values.get("shapes") or {}).items()
               if direction in symmetric and _json(stored) != _json(_as_stored(symmetric[direction], stored))}
        return super().from_record(values, **extras, **own) if own else spec

    def elsewhere(self) -> bool:
        """Whether the path is built in another kernel than this process's (UML): what this
        kernel offers (congestion controls, sysctl limits) says nothing about that one."""
        from .kernels import choose_kernel

        return self.kernel == "uml" and choose_kernel("uml").kernel == "uml"

    def restricted_cc(self) -> str | None:
        """``cc`` where the host does not let a namespace make it its default (it is not in
        tcp_allowed_congestion_control): the host's root adds it to that list for the run
        (:meth:`host_settings`); a user namespace sets it on the lab's routes instead."""
        if self.cc is None or self.cc in sysctl.allowed_cc():
            return None
        return self.cc

    @property
    def one_way_delay(self) -> float:
        if self.delay is not None:
            return self.delay
        return (self.rtt or 0.0) / 2

    def shapes(self) -> dict[str, LinkShape]:
        symmetric = LinkShape.from_stored(delay=self.one_way_delay, jitter=self.jitter, loss=self.loss,
                              rate=self.rate, queue=self.queue, aqm=self.aqm)
        return {"to_server": self.to_server or symmetric, "to_client": self.to_client or symmetric}

    def namespace_sysctls(self) -> dict[str, Any]:
        settings = dict(self.sysctls)
        if self.cc is not None:
            settings.setdefault("net.ipv4.tcp_congestion_control", self.cc)
        return settings

    def host_settings(self) -> dict[str, Any]:
        """Host-global changes the path needs, including letting namespaces pick ``cc``.

        A namespace may only choose a congestion control the host lists in
        tcp_allowed_congestion_control (EPERM otherwise), so a ``cc`` outside that list is
        added to it for the run, under the guard that restores it.
        """
        settings = {sysctl.key_of(k): v for k, v in self.host.items()}
        key = sysctl.ALLOWED_CC
        allowed = str(settings.get(key, " ".join(sysctl.allowed_cc()))).split()
        if self.cc is not None and self.cc not in allowed:
            settings[key] = " ".join(allowed + [self.cc])
        return settings

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["sysctls"] = dict(self.sysctls)
        out["host"] = dict(self.host)
        if self.side_sysctls:  # only when used, so runs recorded before it keep their keys
            out["side_sysctls"] = {side: dict(v) for side, v in self.side_sysctls.items()}
        else:
            out.pop("side_sysctls", None)
        out["shapes"] = {k: v.to_dict() for k, v in self.shapes().items()}
        return out


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class Host:
    """One end of the path (or the router): a namespace with an address."""

    name: str
    ns: str
    address: str
    ifname: str

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        return netns.popen(self.ns, argv, **kwargs)

    def shell(self) -> list[str] | None:
        """A command that opens a shell in this host's namespace from a user's own shell (None:
        there is none, the path lives in a UML kernel)."""
        return netns.command(self.ns, ["bash"])

    def run(self, argv: Sequence[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        return netns.run(self.ns, argv, timeout=timeout, check=check)

    def sysctl(self, key: str) -> str:
        return sysctl.read_in(self.ns, sysctl.key_of(key))

    def call(self, fn, *args: Any, **kwargs: Any) -> Any:
        """Run a Python function with this host's network namespace (sockets, /proc/sys/net)."""
        return netns.run_in(self.ns, fn, *args, **kwargs)

    def lab_kind(self) -> str | None:
        """The lab kernel of its own this host lives in ("uml", "userns"; None: this process's)."""
        from .kernels import agent_kind

        return agent_kind()

    # pyroute2 has no tcp_metrics netlink family, so these two go through iproute2.
    def tcp_metrics(self) -> list[dict[str, str]]:
        """What the kernel remembers per destination (``ip tcp_metrics show``): one dict per
        destination, e.g. {"address": "10.201.2.2", "ssthresh": "12", "cwnd": "20", "rtt": "20123us"}."""
        text = self.run(["ip", "tcp_metrics", "show"]).stdout
        return [parse_tcp_metrics_line(line) for line in text.splitlines() if line.strip()]

    def flush_tcp_metrics(self) -> None:
        """Forget every destination's cached ssthresh/cwnd/rtt (``ip tcp_metrics flush all``).
        Only the machine's administrator may (:data:`~.kernels.ADMIN_ONLY`): in a user
        namespace's lab a PermissionError says how to get a path that can."""
        from .kernels import ADMIN_ONLY

        if self.lab_kind() == "userns":
            raise PermissionError(f"{ADMIN_ONLY['tcp_metrics flush']}: not in a user namespace's lab. Open the path "
                                  "with CaseLab.path(spec, needs=['tcp_metrics flush']), which runs it in the UML "
                                  "kernel, or run as root.")
        self.run(["ip", "tcp_metrics", "flush", "all"])


class AgentHost(Host):
    """A host of a path built inside a lab kernel of its own (UML, a user namespace): the same
    calls, done there by its agent."""

    def __init__(self, kernel: Any, path_id: str, name: str, ns: str, address: str, ifname: str) -> None:
        super().__init__(name, ns, address, ifname)
        self.kernel = kernel
        self.path_id = path_id

    def __reduce__(self):
        return opened_host, (self.path_id, self.name)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        raise TypeError(f"a process inside {self.kernel.title} cannot be handed to this one: use run(), or call() "
                        "with a function that starts and waits for it there")

    def run(self, argv: Sequence[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        return self.kernel.call(Host.run, self, argv, timeout=timeout, check=check)

    def shell(self) -> list[str] | None:
        make = getattr(self.kernel, "shell", None)
        return make(self.ns) if make is not None else None

    def sysctl(self, key: str) -> str:
        return self.kernel.call(Host.sysctl, self, key)

    def call(self, fn, *args: Any, **kwargs: Any) -> Any:
        return self.kernel.call(Host.call, self, fn, *args, **kwargs)

    def lab_kind(self) -> str | None:
        return self.kernel.kind


def parse_tcp_metrics_line(line: str) -> dict[str, str]:
    """``10.201.2.2 age 1.5sec ssthresh 12 cwnd 20 rtt 20us source 10.201.1.2`` → a dict."""
    words = line.split()
    entry = {"address": words[0]}
    entry.update(zip(words[1::2], words[2::2]))
    return entry


def _emulation_snapshot_of(path_id: str) -> dict[str, dict[str, Any]]:
    """Inside a lab kernel's agent: the live path's emulation counters (see :meth:`NetPath.emulation_snapshot`)."""
    return opened_for_host(path_id).emulation_snapshot()


class NetPath:
    """A live client–router–server path. Use as a context manager."""

    def __init__(self, spec: PathSpec | None = None, /, **settings: Any) -> None:
        if spec is not None and settings:
            raise TypeError("give a PathSpec or keyword settings, not both")
        self.spec = spec if spec is not None else PathSpec(**settings)
        self.id = secrets.token_hex(3)
        prefix = f"{netns.PREFIX}{self.id}-"
        self.client = Host("client", prefix + "client", CLIENT_NET + "2", "eth0")
        self.router = Host("router", prefix + "router", CLIENT_NET + "1", "to-client")
        self.server = Host("server", prefix + "server", SERVER_NET + "2", "eth0")
        self.backend: str | None = None
        self.link_stats: dict[str, Any] = {}
        self._emulator: LinkEmulator | None = None
        self._host_guard: sysctl.HostGuard | None = None
        self._old_handlers: dict[int, Any] = {}
        self._up = False
        self._owner = os.getpid()
        #: The lab kernel of its own the path lives in (UML, a user namespace; None: this process's
        #: kernel); see :meth:`_start_in_agent`.
        self.remote: Any = None
        self.kernel = "host"

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> "NetPath":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "NetPath":
        from .kernels import AGENT_KERNELS, agent_kind, choose_kernel, on_kernel, privileged

        self.kernel = choose_kernel(self.spec.kernel).kernel or "host"
        if self.spec.kernel is None and self.kernel == "userns":  # auto: what it cannot make runs in UML
            self.spec, _ = on_kernel(self.spec, self.kernel)
            self.kernel = self.spec.kernel
        if self.kernel in AGENT_KERNELS:
            return self._start_in_agent(self.kernel)
        if not privileged():
            raise PermissionError("tcplab needs root to build network namespaces (run with sudo), or a user "
                                  "namespace: kernel=userns or auto")
        in_userns = agent_kind() == "userns"
        host_settings = self._userns_settings() if in_userns else self.spec.host_settings()
        self.backend = choose_backend(self.spec.backend)
        check_aqm(list(self.spec.shapes().values()))  # this kernel's qdiscs, before anything is built
        self._install_signal_handlers()
        atexit.register(self.stop)
        self._up = True
        try:
            if host_settings:
                self._host_guard = sysctl.HostGuard(host_settings)
                self._host_guard.__enter__()
            for host in (self.client, self.router, self.server):
                netns.create(host.ns)
            self._wire()
            self._tune()
            state.checkpoint("path-built")
            self._shape()
            self._drop_bare_acks()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def release(self) -> str:
        """The release of the kernel the path lives in."""
        return self.remote.release if self.remote is not None else platform.release()

    def emulation_snapshot(self) -> dict[str, dict[str, Any]]:
        """The link emulation's own counters now, by direction, where it keeps any (the delay
        line: packets released and how late)."""
        if self.remote is not None:
            return self.remote.call(_emulation_snapshot_of, self.id)
        return self._emulator.snapshot() if self._emulator is not None else {}

    def _userns_settings(self) -> dict[str, Any]:
        """In a user namespace's agent: the host-global changes this path needs, which it cannot
        make, refused by name before anything is built (none: nothing to guard). A congestion
        control the host restricts goes on the routes instead (:meth:`_route_metrics`)."""
        from .kernels import HostGlobalError, host_global_needs
        from .userns import blockers_text

        blockers = host_global_needs(self.spec)
        if blockers:
            raise HostGlobalError(f"{blockers_text(blockers)}: host-global settings, which a user namespace can read "
                                  "but not change. kernel=auto runs such a path in the UML kernel; or ask the "
                                  "machine's administrator to set them, or run as root.")
        return {}

    def _start_in_agent(self, kernel_name: str) -> "NetPath":
        """Build the path inside the process's lab kernel of that name (UML, or a user
        namespace; started on first use); this object and its hosts become stand-ins whose
        calls its agent does."""
        from .kernels import agent_of

        kernel = agent_of(kernel_name)
        built = kernel.call(open_for_host, self.spec)
        self.remote, self.id, self.backend = kernel, built["id"], built["backend"]
        self.client, self.router, self.server = (
            AgentHost(kernel, self.id, name, **built["hosts"][name]) for name in ("client", "router", "server"))
        self._up = True
        atexit.register(self.stop)
        return self

    def __reduce__(self):
        if self.remote is None:
            raise TypeError("a path of this kernel cannot travel to another process")
        return opened_for_host, (self.id,)

    def stop(self) -> None:
        # pyroute2 forks helper processes that may run our atexit hook when they exit: only
        # the process that built the path may tear it down.
        if not self._up or os.getpid() != self._owner:
            return
        self._up = False
        if self.remote is not None:
            atexit.unregister(self.stop)
            if self.remote.alive:
                self.link_stats = self.remote.call(close_for_host, self.id)
            return
        errors = []
        if self._emulator is not None:
            try:
                self.link_stats = self._emulator.stop()
            except Exception as exc:  # keep tearing down; report at the end
                errors.append(exc)
            self._emulator = None
        for host in (self.client, self.server, self.router):
            netns.kill_all(host.ns)
            try:
                netns.remove(host.ns)
            except Exception as exc:
                errors.append(exc)
        if self._host_guard is not None:
            self._host_guard.__exit__(None, None, None)
            self._host_guard = None
        self._restore_signal_handlers()
        atexit.unregister(self.stop)
        if errors:
            raise errors[0]

    def _install_signal_handlers(self) -> None:
        def handler(signum, frame):
            if os.getpid() != self._owner:
                # A forked helper (pyroute2 forks some) inherited this handler: die as it would have.
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
                return
            self.stop()
            previous = self._old_handlers.get(signum)
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, handler)
        except ValueError:
            pass  # not the main thread: the with-block and atexit still tear down

    def _restore_signal_handlers(self) -> None:
        for sig, previous in self._old_handlers.items():
            try:
                signal.signal(sig, previous)
            except (ValueError, TypeError):
                pass
        self._old_handlers.clear()

    # --- building ----------------------------------------------------------------------------
    @netns.outside_event_loop
    def _wire(self) -> None:
        # One netlink socket per namespace for the whole build: pyroute2 forks a helper to open
        # each one inside its namespace, which in a UML kernel costs about 0.3 s a time.
        with contextlib.ExitStack() as stack:
            sockets = {host.name: stack.enter_context(netns.iproute(host.ns))
                       for host in (self.router, self.client, self.server)}
            self._wire_with(sockets)
        if not self.spec.offloads:
            for host, ifnames in ((self.client, ["eth0"]), (self.server, ["eth0"]),
                                  (self.router, ["to-client", "to-server"])):
                host.call(_offloads_off, ifnames)

    def _wire_with(self, sockets: dict[str, Any]) -> None:
        """The veths, addresses, routes and neighbours, through ``sockets``: an IPRoute per
        host's namespace, by host name."""
        mtu = self.spec.mtu
        ipr = sockets[self.router.name]
        # Both veth pairs are born in the router namespace, so their names never meet
        # another run's in the host namespace.
        ipr.link("add", ifname="to-client", kind="veth",
                 peer={"ifname": "eth0", "net_ns_fd": self.client.ns})
        ipr.link("add", ifname="to-server", kind="veth",
                 peer={"ifname": "eth0", "net_ns_fd": self.server.ns})
        for ifname, address in (("to-client", CLIENT_NET + "1"), ("to-server", SERVER_NET + "1")):
            index = ipr.link_lookup(ifname=ifname)[0]
            ipr.addr("add", index=index, address=address, prefixlen=24)
            ipr.link("set", index=index, mtu=mtu, state="up")
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        sysctl.apply_in(self.router.ns, {"net.ipv4.ip_forward": "1"})
        for host, gateway in ((self.client, CLIENT_NET + "1"), (self.server, SERVER_NET + "1")):
            ipr = sockets[host.name]
            lo = ipr.link_lookup(ifname="lo")[0]
            ipr.link("set", index=lo, state="up")
            index = ipr.link_lookup(ifname="eth0")[0]
            ipr.addr("add", index=index, address=host.address, prefixlen=24)
            ipr.link("set", index=index, mtu=mtu, state="up")
            ipr.route("add", dst="default", gateway=gateway, **self._route_metrics())
        self._pin_neighbours(sockets)

    def _pin_neighbours(self, sockets: dict[str, Any]) -> None:
        """Permanent ARP entries on both links, both ends. netem delays every packet leaving
        its interface, ARP included: without them the first packets after a neighbour entry
        is (re)resolved wait one emulated delay more per hop, so a connection's handshake,
        the receiver's only round-trip sample, would read 40 ms on a 20 ms path."""
        macs, indexes = {}, {}
        for host, ifnames in ((self.router, ("to-client", "to-server")), (self.client, ("eth0",)),
                              (self.server, ("eth0",))):
            ipr = sockets[host.name]
            for ifname in ifnames:
                index = ipr.link_lookup(ifname=ifname)[0]
                indexes[host.name, ifname] = index
                macs[host.name, ifname] = ipr.get_links(index)[0].get_attr("IFLA_ADDRESS")
        links = ((self.client, "to-client", CLIENT_NET + "1"), (self.server, "to-server", SERVER_NET + "1"))
        for host, router_if, gateway in links:
            sockets[host.name].neigh("add", dst=gateway, lladdr=macs[self.router.name, router_if],
                                     ifindex=indexes[host.name, "eth0"], state=NUD_PERMANENT)
            sockets[self.router.name].neigh("add", dst=host.address, lladdr=macs[host.name, "eth0"],
                                            ifindex=indexes[self.router.name, router_if], state=NUD_PERMANENT)

    def _route_metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {}
        if (cc := self._route_cc()) is not None:
            metrics["cc_algo"] = cc
        if self.spec.initcwnd is not None:
            metrics["initcwnd"] = self.spec.initcwnd
        if self.spec.initrwnd is not None:
            metrics["initrwnd"] = self.spec.initrwnd
        if self.spec.ssthresh is not None:
            # Locked, as `ip route … ssthresh lock N` sets it: closing connections then leave the
            # value in the destination's tcp_metrics entry as it is (tcp_update_metrics).
            metrics["ssthresh"] = self.spec.ssthresh
            metrics["lock"] = 1 << RTAX_SSTHRESH
        return {"metrics": metrics} if metrics else {}

    def _route_cc(self) -> str | None:
        """The congestion control set on the client's and server's routes (``ip route …
        congctl``) rather than as their namespaces' default: in a user namespace, for one the
        host does not allow as a namespace's default (a route has no such restriction, and its
        connections, both ends, take it); None elsewhere."""
        from .kernels import agent_kind

        return self.spec.restricted_cc() if agent_kind() == "userns" else None

    def connection_cc(self) -> dict[str, str]:
        """The congestion control a new connection of client and server gets: its route's
        (:meth:`_route_cc`), else its namespace's default."""
        if self.remote is not None:
            return self.remote.call(NetPath.connection_cc, self)
        route = self._route_cc()
        return {h.name: route or h.sysctl("net.ipv4.tcp_congestion_control") for h in (self.client, self.server)}

    def _tune(self) -> None:
        settings = sysctl.check_namespace_settings(self.spec.namespace_sysctls())
        if self._route_cc() is not None:
            settings.pop("net.ipv4.tcp_congestion_control", None)
        for host in (self.client, self.server):
            own = sysctl.check_namespace_settings(dict(self.spec.side_sysctls.get(host.name, {})))
            sysctl.apply_in(host.ns, {**settings, **own})

    def _shape(self) -> None:
        self._emulator = LinkEmulator(self.router.ns, self.backend, self.spec.mtu, seed=self.spec.seed)
        shapes = self.spec.shapes()
        for key, in_if, out_if, queue in (("to_server", "to-client", "to-server", QUEUE_TO_SERVER),
                                          ("to_client", "to-server", "to-client", QUEUE_TO_CLIENT)):
            if shapes[key].shaped:
                self._emulator.apply(in_if, out_if, shapes[key], queue)

    def _drop_bare_acks(self) -> None:
        side = self.spec.drop_bare_acks_to
        if side is None:
            return
        # Filter FORWARD sees a packet after the delay line (raw PREROUTING) has let it go. An
        # ACK-only IPv4 segment is 40 bytes, 52 with the timestamps option the lab keeps on; one
        # with payload under timestamps is longer. u32 reads the IP total length: the UML
        # kernel loads xt_u32 (uml.WANTED_MODULES), not xt_length.
        netns.iptables(self.router.ns, ["-I", "FORWARD", "1", "-o", f"to-{side}", "-p", "tcp",
                                        "--tcp-flags", "SYN,FIN,RST,ACK", "ACK",
                                        "-m", "u32", "--u32", f"0&0xFFFF={BARE_ACK_BYTES[0]}:{BARE_ACK_BYTES[1]}",
                                        "-j", "DROP"])

    def dropped_bare_acks(self) -> int:
        """Packets the router's bare-ACK filter dropped so far (0 without one)."""
        if self.remote is not None:
            return self.remote.call(NetPath.dropped_bare_acks, self)
        if self.spec.drop_bare_acks_to is None:
            return 0
        listed = netns.iptables(self.router.ns, ["-L", "FORWARD", "-v", "-x", "-n"]).stdout
        return sum(int(line.split()[0]) for line in listed.splitlines() if " DROP " in f" {line} ")

    # --- describing -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What was built, for run records and reports."""
        if self.remote is not None:
            return self.remote.call(NetPath.describe, self)
        return {
            "id": self.id,
            "kernel": lab_kernel(),
            "backend": self.backend,
            "namespaces": {h.name: h.ns for h in (self.client, self.router, self.server)},
            "addresses": {"client": self.client.address, "server": self.server.address},
            "spec": self.spec.to_dict(),
            "link_stats": self.link_stats,
        }

    def sysctl_snapshot(self) -> dict[str, dict[str, str]]:
        if self.remote is not None:
            return self.remote.call(NetPath.sysctl_snapshot, self)
        return {h.name: sysctl.snapshot_in(h.ns) for h in (self.client, self.router, self.server)}


def _offloads_off(ifnames: list[str]) -> None:
    with Ethtool() as eth:
        for ifname in ifnames:
            features = eth.get_features(ifname)
            for name, feature in features.features.items():
                tcp_tso = name.startswith("tx-tcp") and name.endswith("segmentation")
                if (tcp_tso or name in OFFLOADS) and feature.available:
                    feature.enable = False
            eth.set_features(ifname, features)


# --- inside a lab kernel's agent: the paths opened for the host, by id -----------------------------
# The host's NetPath and AgentHost stand-ins travel to the agent as references to these.

#: Paths opened for the host, by id.
OPENED_FOR_HOST: dict[str, NetPath] = {}


def open_for_host(spec: PathSpec) -> dict[str, Any]:
    """Build a path in this kernel and keep it; what the host's stand-in needs to know."""
    spec.validate()  # against this kernel: its congestion controls, its modules
    path = NetPath(spec).start()
    OPENED_FOR_HOST[path.id] = path
    return {"id": path.id, "backend": path.backend,
            "hosts": {h.name: {"ns": h.ns, "address": h.address, "ifname": h.ifname}
                      for h in (path.client, path.router, path.server)}}


def close_for_host(path_id: str) -> dict[str, Any]:
    path = OPENED_FOR_HOST.pop(path_id, None)
    if path is None:
        return {}
    path.stop()
    return path.link_stats


def close_all_for_host() -> None:
    """Every path still open for the host, closed (the kernel is powering off)."""
    import traceback

    for path_id in list(OPENED_FOR_HOST):
        try:
            close_for_host(path_id)
        except Exception:
            traceback.print_exc()


def opened_for_host(path_id: str) -> NetPath:
    try:
        return OPENED_FOR_HOST[path_id]
    except KeyError:
        raise LookupError(f"no live path {path_id} in this lab kernel (it was closed, or the kernel ended)") from None


def opened_host(path_id: str, name: str) -> Host:
    return getattr(opened_for_host(path_id), name)


def _as_stored(shape: "LinkShape", stored: Mapping[str, Any]) -> dict[str, Any]:
    """``shape`` as a record that stored ``stored``'s fields would hold it: a field it lacks and
    ``shape`` leaves unset is left out."""
    return {k: v for k, v in shape.to_dict().items() if k in stored or v is not None}
