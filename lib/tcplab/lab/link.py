"""Link shaping on the router: one parameter set (LinkShape) and two backends behind it.

A :class:`LinkShape` says what one direction of the path does to packets: delay, jitter,
loss, a rate limit and the queue in front of that limit. Two backends make it real:

* ``netem`` — the kernel's netem qdisc (delay, jitter, loss) with tbf as its child (rate,
  queue), configured through pyroute2. Used where the kernel has sch_netem.
* ``delayline`` — for kernels without sch_netem: iptables sends the direction's packets to
  an NFQUEUE and a userspace process (:mod:`tcplab.lab.delayline`) releases each one after
  its delay, or drops it; tbf does rate and queue in the kernel exactly as with netem.

In both, packets are delayed first and queued at the rate limit second, so the queue the
course talks about is always the tbf queue, and its size means the same thing. Where ``aqm``
names an active queue management qdisc (fq_codel, cake), it replaces tbf's own FIFO as tbf's
child, on a kernel that has it; tbf still sets the rate.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2.netlink.exceptions import NetlinkError

from ..params import Params, param
from ..units import ParameterError, format_duration, format_size, parse_size
from . import lateness, netns, state

BACKENDS = ("auto", "netem", "delayline")
#: Active queue management the bottleneck may use in place of tbf's FIFO: each a qdisc the lab
#: kernel may or may not have (Debian's UML 6.1 loads both as modules; a kernel built without
#: them refuses the kind).
AQMS = ("fq_codel", "cake")

#: Upper bound of a veth's speed used to size netem's queue when no rate is set: netem
#: holds every packet for the whole delay, so its limit must cover delay × the fastest rate.
_UNSHAPED_RATE = 20e9
#: Ethernet header bytes that tbf counts on top of the IP MTU.
_L2_HEADER = 14


@dataclass(frozen=True)
class LinkShape(Params):
    """What one direction of the path does to packets."""

    delay: float = param("duration", 0.0, "one-way delay added by the router", low=0.0, high=10.0)
    jitter: float = param("duration", 0.0, "random variation of the delay, uniform in ±jitter",
                          low=0.0, high=10.0)
    loss: float = param("percent", 0.0, "share of packets dropped at random", low=0.0, high=100.0)
    rate: float | None = param("rate", None, "bottleneck rate (unset: as fast as veth goes)",
                               low=0.0, low_open=True, high=10e9, optional=True)
    queue: str | None = param("str", None,
                              "bottleneck queue: packets (100) or bytes (64KB); unset: one BDP, at least 64KB",
                              optional=True)
    aqm: str | None = param("choice", None, "active queue management at the bottleneck in place of its FIFO "
                            "(the kernel must have the qdisc); unset: a FIFO of queue bytes",
                            choices=AQMS, optional=True)

    def validate(self) -> None:
        if self.jitter > self.delay:
            raise ParameterError("jitter", format_duration(self.jitter), f"at most the delay ({format_duration(self.delay)})",
                                 "jitter larger than the delay would need negative delays")
        if self.queue is not None:
            self.queue_limit(1500)  # parse now so a bad value fails before anything is built
        if self.aqm is not None and self.rate is None:
            raise ParameterError("aqm", self.aqm, "unset, or a rate with it",
                                 "an AQM manages the queue of the rate limit: set rate too")
        if self.aqm is not None and self.queue is not None:
            raise ParameterError("queue", self.queue, "unset when aqm is set", f"{self.aqm} sizes its own queue")

    @property
    def shaped(self) -> bool:
        return bool(self.delay or self.jitter or self.loss or self.rate)

    def queue_limit(self, mtu: int) -> int:
        """The bottleneck queue in bytes, as tbf's ``limit`` counts them (L2 frames)."""
        accepted = "a number of packets (100, 100p) or a size (64KB); at least one packet"
        text = self.queue
        if text is None:
            bdp = (self.rate or 0) / 8 * 2 * self.delay
            return max(int(bdp), 64 * 1024)
        stripped = str(text).strip().lower()
        for suffix in ("packets", "pkts", "pkt", "p"):
            if stripped.endswith(suffix) and stripped[: -len(suffix)].strip().isdigit():
                stripped = stripped[: -len(suffix)].strip()
                break
        if stripped.isdigit():
            packets = int(stripped)
            if packets < 1:
                raise ParameterError("queue", text, accepted, "out of range")
            return packets * (mtu + _L2_HEADER)
        size = parse_size("queue", text)
        if size < mtu + _L2_HEADER:
            raise ParameterError("queue", text, accepted,
                                 f"smaller than one {mtu + _L2_HEADER}-byte frame")
        return size


# --- the kernel part shared by both backends -------------------------------------------

@dataclass(frozen=True)
class TcRequest:
    """One ``tc`` call, kept as data so tests can check exactly what would be sent."""

    command: str
    kind: str
    ifname: str
    args: dict[str, Any]


def tbf_request(ifname: str, shape: LinkShape, mtu: int, parent: str | None) -> TcRequest:
    """tbf for rate and queue. ``burst`` must hold a few frames or tbf throttles below rate."""
    assert shape.rate is not None
    frame = mtu + _L2_HEADER
    burst = max(4 * frame, int(shape.rate / 8 * 0.001))  # 1 ms of traffic at least
    args: dict[str, Any] = {"rate": f"{int(shape.rate)}bit", "burst": burst,
                            "limit": shape.queue_limit(mtu), "mtu": frame + 64}
    if parent is None:
        args["handle"] = "1:"
    else:
        args["parent"] = parent
        args["handle"] = "10:"
    return TcRequest("add", "tbf", ifname, args)


def aqm_request(ifname: str, shape: LinkShape, tbf: TcRequest) -> TcRequest:
    """The AQM qdisc in place of tbf's FIFO: tbf's one class is its parent, and its own
    defaults hold (fq_codel: 5 ms target, 100 ms interval, 10240 packets; cake: no shaper of
    its own, as tbf paces it)."""
    assert shape.aqm is not None
    return TcRequest("add", shape.aqm, ifname, {"parent": tbf.args["handle"] + "1", "handle": "20:"})


def bottleneck_requests(ifname: str, shape: LinkShape, mtu: int, parent: str | None) -> list[TcRequest]:
    """tbf for rate and queue, and the AQM that replaces its FIFO where one is asked for."""
    tbf = tbf_request(ifname, shape, mtu, parent)
    return [tbf, aqm_request(ifname, shape, tbf)] if shape.aqm else [tbf]


def netem_limit(shape: LinkShape, mtu: int) -> int:
    """netem's queue limit in packets, sized so it never caps throughput by itself.

    netem holds every packet for the whole delay; its default limit of 1000 packets
    silently drops beyond 1000 × 1500 B per delay (≈ 600 Mbit/s at 20 ms, 60 Mbit/s at
    200 ms). We size it for the fastest the link can go, plus the bottleneck queue.
    """
    rate = shape.rate or _UNSHAPED_RATE
    in_flight = rate / 8 * (shape.delay + shape.jitter) / (mtu + _L2_HEADER)
    queued = shape.queue_limit(mtu) / (mtu + _L2_HEADER) if shape.rate else 0
    return int(min(max(1000, math.ceil(2 * in_flight + queued + 64)), 2**31 - 1))


def netem_requests(ifname: str, shape: LinkShape, mtu: int) -> list[TcRequest]:
    """The requests of the netem backend: netem at the root, tbf as its child."""
    requests = []
    if shape.delay or shape.jitter or shape.loss:
        requests.append(TcRequest("add", "netem", ifname, {
            "handle": "1:",
            "delay": int(round(shape.delay * 1e6)),   # µs; pyroute2 converts to ticks
            "jitter": int(round(shape.jitter * 1e6)),
            "loss": shape.loss,                        # percent; pyroute2 scales to u32
            "limit": netem_limit(shape, mtu),
        }))
    if shape.rate:
        requests += bottleneck_requests(ifname, shape, mtu, parent="1:1" if requests else None)
    return requests


@netns.outside_event_loop
def send(router_ns: str, requests: list[TcRequest]) -> None:
    with netns.iproute(router_ns) as ipr:
        for req in requests:
            index = ipr.link_lookup(ifname=req.ifname)[0]
            ipr.tc(req.command, req.kind, index, **req.args)


@netns.outside_event_loop
def netem_counters(router_ns: str, ifname: str) -> dict[str, int]:
    """The netem qdisc's own counters on ``ifname``, named like the delay line's:
    ``received`` packets, of which ``dropped`` by the loss model (netem counts a loss as a
    drop and a forwarded packet as sent)."""
    with netns.iproute(router_ns) as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        for msg in ipr.get_qdiscs(index=index):
            if msg.get_attr("TCA_KIND") == "netem":
                counters = msg.get_attr("TCA_STATS")
                return {"received": counters["packets"] + counters["drop"],
                        "dropped": counters["drop"], "sent": counters["packets"]}
    return {}


# --- what this kernel has ---------------------------------------------------------------------

#: Qdisc kinds probed so far in this process's kernel: kind -> whether it has it.
_QDISCS: dict[str, bool] = {}
#: What a probe passes to a kind that needs a setting to be added at all.
_PROBE_ARGS: dict[str, dict[str, Any]] = {"netem": {"delay": 1000}}


@netns.outside_event_loop
def qdiscs_available(kinds: tuple[str, ...]) -> dict[str, bool]:
    """Whether this kernel has each qdisc kind: try to add one at the root of a throwaway
    namespace's loopback (a kernel without it refuses the kind); asked once per process."""
    unknown = [kind for kind in kinds if kind not in _QDISCS]
    if unknown:
        name = f"{netns.PREFIX}probe-{os.getpid()}"
        netns.create(name)
        try:
            with netns.iproute(name) as ipr:
                lo = ipr.link_lookup(ifname="lo")[0]
                ipr.link("set", index=lo, state="up")
                for kind in unknown:
                    try:
                        ipr.tc("add", kind, lo, handle="1:", **_PROBE_ARGS.get(kind, {}))
                        ipr.tc("del", kind, lo, handle="1:")
                        _QDISCS[kind] = True
                    except NetlinkError as exc:
                        if exc.code not in (2, 95):  # ENOENT / EOPNOTSUPP: no such qdisc kind
                            raise
                        _QDISCS[kind] = False
        finally:
            netns.remove(name)
    return {kind: _QDISCS[kind] for kind in kinds}


def netem_available() -> bool:
    """Whether this kernel has sch_netem."""
    return qdiscs_available(("netem",))["netem"]


def aqms_available() -> list[str]:
    """The AQM qdiscs (:data:`AQMS`) this kernel has."""
    return [kind for kind, has in qdiscs_available(AQMS).items() if has]


def check_aqm(shapes: list[LinkShape]) -> None:
    """Refuse an AQM this kernel does not have, naming the parameter and the kernel, before a
    path is built."""
    have = aqms_available()
    for shape in shapes:
        if shape.aqm is not None and shape.aqm not in have:
            accepted = ("unset (a FIFO), or one of " + ", ".join(have)) if have else \
                       "unset (a FIFO): this kernel has none of " + ", ".join(AQMS)
            raise ParameterError("aqm", shape.aqm, accepted,
                                 f"this kernel ({platform.release()}) has no sch_{shape.aqm} qdisc")


# --- backend choice ----------------------------------------------------------------------


def choose_backend(requested: str) -> str:
    if requested not in BACKENDS:
        raise ParameterError("backend", requested, "one of " + ", ".join(BACKENDS))
    if requested == "auto":
        return "netem" if netem_available() else "delayline"
    if requested == "netem" and not netem_available():
        raise ParameterError("backend", requested, "delayline or auto",
                             "this kernel has no sch_netem qdisc")
    return requested


# --- the delay line backend -----------------------------------------------------------------

class DelayLine:
    """One userspace delay process for one direction, fed by one NFQUEUE."""

    def __init__(self, router_ns: str, in_ifname: str, queue_num: int, shape: LinkShape,
                 *, seed: int, workdir: Path, python: str = sys.executable) -> None:
        self.router_ns = router_ns
        self.in_ifname = in_ifname
        self.queue_num = queue_num
        self.shape = shape
        self.seed = seed
        self.stats_file = workdir / f"delayline-{queue_num}.json"
        self.log_file = workdir / f"delayline-{queue_num}.log"
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.stats: dict[str, Any] = {}

    @property
    def rule(self) -> list[str]:
        # raw PREROUTING sees the packet before conntrack and routing: the least work per packet.
        return ["-t", "raw", "PREROUTING", "-i", self.in_ifname, "-j", "NFQUEUE",
                "--queue-num", str(self.queue_num)]

    def start(self, timeout: float = 10.0) -> None:
        ready = self.stats_file.with_suffix(".ready")
        argv = [self.python, "-m", "tcplab.lab.delayline",
                "--queue", str(self.queue_num),
                "--delay", repr(self.shape.delay), "--jitter", repr(self.shape.jitter),
                "--loss", repr(self.shape.loss), "--seed", str(self.seed),
                "--ready-file", str(ready), "--stats-file", str(self.stats_file)]
        log = open(self.log_file, "w")
        self.proc = netns.popen(self.router_ns, argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"delay line for queue {self.queue_num} did not start: "
                                   + self.log_file.read_text()[-2000:])
            time.sleep(0.01)
        # Bind first, then divert: a packet must never reach a queue nobody listens on.
        rule = self.rule
        netns.iptables(self.router_ns, [rule[0], rule[1], "-A", *rule[2:]])

    def stop(self) -> dict[str, Any]:
        rule = self.rule
        netns.iptables(self.router_ns, [rule[0], rule[1], "-D", *rule[2:]], check=False)
        lateness.stop_helper(self.proc)
        self.proc = None
        if self.stats_file.exists():
            self.stats = json.loads(self.stats_file.read_text())
        return self.stats

    def snapshot(self) -> dict[str, Any]:
        """Its counters now (see :func:`lateness.request_snapshot`)."""
        return lateness.request_snapshot(self.proc, self.stats_file)


class LinkEmulator:
    """Applies a LinkShape per direction on the router with the chosen backend."""

    def __init__(self, router_ns: str, backend: str, mtu: int, *, seed: int = 1) -> None:
        self.router_ns = router_ns
        self.backend = backend
        self.mtu = mtu
        self.seed = seed
        self.delay_lines: list[DelayLine] = []
        self._netem_ifnames: list[str] = []
        # Logs and counters of the delay processes; `tcplab cleanup` removes leftovers.
        self._workdir = state.WORK_DIR / router_ns
        self._workdir.mkdir(parents=True, exist_ok=True)

    def plan(self, out_ifname: str, shape: LinkShape) -> list[TcRequest]:
        """The kernel requests for one direction (leaving the router on ``out_ifname``)."""
        if self.backend == "netem":
            return netem_requests(out_ifname, shape, self.mtu)
        return bottleneck_requests(out_ifname, shape, self.mtu, parent=None) if shape.rate else []

    def apply(self, in_ifname: str, out_ifname: str, shape: LinkShape, queue_num: int) -> None:
        requests = self.plan(out_ifname, shape)
        send(self.router_ns, requests)
        if any(r.kind == "netem" for r in requests):
            self._netem_ifnames.append(out_ifname)
        state.checkpoint("shaping-applied")
        if self.backend == "delayline" and (shape.delay or shape.loss or shape.jitter):
            line = DelayLine(self.router_ns, in_ifname, queue_num, shape,
                             seed=self.seed + queue_num, workdir=self._workdir)
            self.delay_lines.append(line)
            line.start()
            state.checkpoint("delay-line-started")

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Each delay line's counters now, by direction (``queueN``); {} with netem, which keeps
        no record of how late it released packets."""
        return {f"queue{line.queue_num}": line.snapshot() for line in self.delay_lines}

    def stop(self) -> dict[str, Any]:
        stats = {}
        for line in self.delay_lines:
            stats[f"queue{line.queue_num}"] = line.stop()
        self.delay_lines.clear()
        for ifname in self._netem_ifnames:
            stats[ifname] = netem_counters(self.router_ns, ifname)
        self._netem_ifnames.clear()
        shutil.rmtree(self._workdir, ignore_errors=True)
        return stats


def describe_requests(requests: list[TcRequest]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(r) for r in requests]


__all__ = ["LinkShape", "LinkEmulator", "TcRequest", "netem_requests", "tbf_request", "aqm_request",
           "bottleneck_requests", "netem_available", "qdiscs_available", "aqms_available", "check_aqm",
           "choose_backend", "BACKENDS", "AQMS", "format_size"]
