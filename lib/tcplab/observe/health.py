"""How much the machine disturbed a run: the emulation's own lateness and the CPU it waited for.

On 2 cores a userspace delay line, or a UML kernel carrying the whole path, that gets its CPU
late delays packets late: the run then measures the machine as much as the path. Readings
taken before and after the run say how much:

- **the delay line's lateness**, in the lab's kernel: how late it released each packet against
  its due time (a histogram the process keeps; snapshots on SIGUSR1), as mean/p50/p99 of this
  run's packets. netem keeps no such record;
- **a UML kernel's wait for a host CPU**, read on the host: how long its processes waited,
  runnable, for a CPU (``run_delay`` in ``/proc/PID/task/TID/schedstat``), per second of the
  run. A UML kernel carries netem, the path and both ends in host processes: while they wait,
  netem's timers and every packet wait too;
- **the lab's programs' lateness**, in the lab's kernel: the share of the workload's time (its
  first write to its last read) by which the ss sampler's dumps, due every ``interval``, started
  late (:meth:`~tcplab.observe.ss.SsSampler.late_share`). It is the one reading of a lab kernel
  that cannot run its own programs on time: a UML kernel whose one CPU the run saturates waits
  for no host CPU, yet its programs, timers and netem wait;
- **CPU pressure** (``/proc/pressure/cpu``, PSI "some"): the share of the run's time in which at
  least one runnable task waited for a CPU; and **steal** (``/proc/stat``): time a hypervisor
  gave this machine's CPUs to someone else. Either is absent where the kernel does not offer it.

:func:`verdict` compares them with :data:`LIMITS` and says why a run is *disturbed* (an empty
list: it was not). The record keeps the readings and the reasons, so a page can say how
trustworthy its numbers are.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..lab.state import processes

__all__ = ["CpuReading", "read_cpu", "cpu_shares", "group_run_delay", "wait_share", "late_quantiles", "late_worst_s", "RunHealth",
           "verdict", "judged", "reasons_of", "base_rtt", "health_around", "LIMITS"]

PSI_CPU = "/proc/pressure/cpu"
PROC_STAT = "/proc/stat"
#: A UML kernel's processes waiting for a host CPU, in s per s of the run. Measured here (cases 06
#: and 07 in UML, every run): 22–51 ms/s on a quiet machine, 110–311 ms/s with two nice-19 loops
#: beside it, where case 06's lossless goodput fell to 8.4 MB/s against a floor of 10.8.
UML_WAIT_LIMIT = 0.1

#: Above these a run is disturbed. The delay line's mean lateness per direction: beyond it the
#: round trips the run measures stretch by more than the course's checks allow on a 20 ms path
#: (5 %, shared by two directions); its rare spikes (p99 of a few ms with two nice-19 loops
#: beside it, on a quiet machine too) leave those checks unchanged, so they are recorded but do
#: not count. Steal: a sizeable share means the hypervisor, not this machine's load, decided
#: when packets moved. CPU pressure is recorded, not judged: a nice-19 loop keeps it high while
#: the lab's own processes, at normal priority, still get their CPU on time. A UML kernel's
#: wait: see UML_WAIT_LIMIT.
#: The lab's programs' lateness, over the workload's time: past half of it, a median over the
#: run (the probes' delay, a round trip) is taken over times the machine held, not the path. CI
#: on 2026-11-30 (a VM whose hypervisor took 6–35 % of the CPU): case 12's fq_codel run in UML
#: ~0.85 (from its ss samples' times), its probes held up to 1.3 s, while the kernel's wait for
#: a host CPU read 3 ms/s and steal inside UML reads 0. Live here that day: host runs 0.01–0.02,
#: the same UML run 0.33 with its probes on time (docs/using-the-lab.md).
PROGRAMS_LATE_LIMIT = 0.5
LIMITS = {"delay_line_late_mean_s": 0.5e-3, "uml_cpu_wait_share": UML_WAIT_LIMIT, "cpu_steal_share": 0.05,
          "programs_late_share": PROGRAMS_LATE_LIMIT}

#: The kernel's lowest round trip of a run (ss ``minrtt``) may exceed the configured one by one
#: full-sized packet's transmission each way at the bottleneck rate, and by this much more: the
#: emulation's own floor (the delay line +0.09–0.48 ms, UML's netem +0.26–0.82 ms in
#: bench/results/fidelity.json) with room to spare. Beyond it not a single round trip of the
#: run was as short as the path asked: the one reading netem on a host kernel has.
BASE_RTT_SLACK_S, BASE_RTT_SLACK_SHARE = 1e-3, 0.10


@dataclass(frozen=True)
class CpuReading:
    time: float                 # time.monotonic() of the reading
    psi_some_us: int | None     # PSI "some" total, microseconds; None without PSI
    steal: int | None           # /proc/stat steal, jiffies
    total: int | None           # /proc/stat all CPU time, jiffies


def _psi_some_us() -> int | None:
    try:
        with open(PSI_CPU) as fh:
            for line in fh:
                if line.startswith("some "):
                    return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):  # no PSI in this kernel, or switched off (psi=0)
        return None
    return None


def _stat_cpu() -> tuple[int | None, int | None]:
    try:
        with open(PROC_STAT) as fh:
            fields = fh.readline().split()
    except OSError:
        return None, None
    if not fields or fields[0] != "cpu":
        return None, None
    values = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice: guests are inside user.
    steal = values[7] if len(values) > 7 else None
    return steal, sum(values[:8])


def read_cpu() -> CpuReading:
    steal, total = _stat_cpu()
    return CpuReading(time.monotonic(), _psi_some_us(), steal, total)


def cpu_shares(before: CpuReading, after: CpuReading) -> dict[str, float | None]:
    """The share of the time between two readings in which some task waited for a CPU (PSI),
    and the share of all CPU time that was stolen."""
    wall = after.time - before.time
    waiting = None
    if before.psi_some_us is not None and after.psi_some_us is not None and wall > 0:
        waiting = min(max((after.psi_some_us - before.psi_some_us) / 1e6 / wall, 0.0), 1.0)
    stolen = None
    if None not in (before.steal, after.steal, before.total, after.total) and after.total > before.total:
        stolen = (after.steal - before.steal) / (after.total - before.total)
    return {"cpu_waiting_share": waiting, "cpu_steal_share": stolen}


def group_run_delay(pgid: int) -> dict[int, int]:
    """Per host process of process group ``pgid``: how long its threads have waited, runnable,
    for a CPU (ns, summed ``run_delay``). Processes that exit take theirs with them."""
    waits = {}
    for pid, fields in processes():
        if int(fields[2]) != pgid:  # state, ppid, pgrp
            continue
        try:
            total = 0
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    total += int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):  # gone meanwhile, or no schedstat in this kernel
            continue
        waits[pid] = total
    return waits


def wait_share(before: Mapping[int, int], after: Mapping[int, int], wall_s: float) -> float | None:
    """Seconds waited for a CPU per second of ``wall_s``, over processes alive at the second
    reading (one that started in between counts whole); None without a reading."""
    if not after or wall_s <= 0:
        return None
    return sum(ns - before.get(pid, 0) for pid, ns in after.items()) / 1e9 / wall_s


def late_quantiles(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float] | None:
    """The mean, p50, p99 and worst bucket of the lateness of the packets one delay line
    released between two snapshots: s, a quantile being its histogram bucket's upper edge (the
    last edge beyond the histogram); None without both snapshots."""
    if not before or not after or "late_hist" not in after:
        return None
    edges = after["late_edges_s"]
    counts = [a - b for a, b in zip(after["late_hist"], before.get("late_hist", [0] * len(after["late_hist"])))]
    released = sum(counts)
    if released <= 0:
        return {"count": 0}

    def quantile(q: float) -> float:
        seen = 0
        for i, count in enumerate(counts):
            seen += count
            if seen >= q * released:
                return edges[min(i, len(edges) - 1)]
        return edges[-1]

    worst = max(i for i, count in enumerate(counts) if count)
    total = after.get("late_total_s", 0.0) - before.get("late_total_s", 0.0)
    return {"count": released, "late_mean_s": total / released, "late_p50_s": quantile(0.5),
            "late_p99_s": quantile(0.99), "late_worst_s": edges[min(worst, len(edges) - 1)]}


def base_rtt(spec: Any, telemetry: Any) -> dict[str, float] | None:
    """The path's configured round trip (``spec``, a PathSpec) beside the lowest one the kernel
    measured in the run (the smaller of both ends' ``minrtt`` in the ss samples ``telemetry``),
    and how far above the configured one that may be (see BASE_RTT_SLACK_S); None without
    samples."""
    if telemetry is None or "minrtt" not in getattr(telemetry, "columns", ()):
        return None
    measured = float(telemetry["minrtt"].min())
    if not math.isfinite(measured):
        return None
    shapes = spec.shapes().values()
    configured = sum(shape.delay for shape in shapes)
    frames = sum(8 * spec.mtu / shape.rate for shape in shapes if shape.rate)  # the slack covers framing
    allowed = configured + frames + max(BASE_RTT_SLACK_S, BASE_RTT_SLACK_SHARE * configured)
    return {"configured_s": configured, "min_rtt_s": measured, "allowed_s": allowed}


def late_worst_s(health: Mapping[str, Any]) -> float:
    """The latest any of a run's delay-line queues released a packet past its due time (s, from
    :func:`late_quantiles`): 0 where no delay line ran, and nothing from a queue that did not
    answer for its counters (a run :func:`verdict` already calls disturbed)."""
    queues = (health.get("delay_line") or {}).values()
    return max((float(late.get("late_worst_s") or 0.0) for late in queues if late), default=0.0)


def verdict(health: Mapping[str, Any]) -> list[str]:
    """Why the run counts as disturbed, one reason per reading beyond :data:`LIMITS`."""
    reasons = []
    limit = LIMITS["delay_line_late_mean_s"]
    for direction, late in (health.get("delay_line") or {}).items():
        if late is None:
            reasons.append(f"delay line {direction}: did not answer for its counters (starved of CPU)")
        elif late.get("count") and late["late_mean_s"] > limit:
            reasons.append(f"delay line {direction}: packets released {late['late_mean_s'] * 1e3:.2g} ms late "
                           f"on average (limit {limit * 1e3:g} ms)")
    waited = health.get("uml_cpu_wait_share")
    if waited is not None and waited > LIMITS["uml_cpu_wait_share"]:
        reasons.append(f"the UML kernel's processes waited {waited * 1e3:.0f} ms per second for a host CPU "
                       f"(limit {LIMITS['uml_cpu_wait_share'] * 1e3:.0f} ms)")
    steal = health.get("cpu_steal_share")
    if steal is not None and steal > LIMITS["cpu_steal_share"]:
        reasons.append(f"{steal:.0%} of CPU time stolen by the hypervisor (limit {LIMITS['cpu_steal_share']:.0%})")
    late = health.get("programs_late_share")
    if late is not None and late > LIMITS["programs_late_share"]:
        reasons.append(f"the lab kernel ran its programs late for {late:.0%} of the run (the ss sampler's "
                       f"schedule; limit {LIMITS['programs_late_share']:.0%})")
    beside = health.get("measured_beside")
    if beside:  # the measurement queue's turn never came (lab.state.exclusive_measurement)
        reasons.append(f"could not wait for the machine: ran beside {', '.join(beside['beside'])} after "
                       f"{beside['waited_s']:.0f} s in the measurement queue")
    base = health.get("base_rtt")
    if base and base["min_rtt_s"] > base["allowed_s"]:
        reasons.append(f"no round trip of the run was below {base['min_rtt_s'] * 1e3:.3g} ms on a path of "
                       f"{base['configured_s'] * 1e3:.3g} ms (limit {base['allowed_s'] * 1e3:.3g} ms)")
    return reasons


class RunHealth:
    """Readings around one run, in the kernel the lab runs in: ``with RunHealth(path) as h:``
    … then :meth:`summary` (the record's ``observe["health"]``)."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self._cpu: list[CpuReading] = []
        self._lines: list[dict[str, dict[str, Any]]] = []

    def _read(self) -> None:
        self._lines.append(self.path.emulation_snapshot())
        self._cpu.append(read_cpu())

    def __enter__(self) -> "RunHealth":
        self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        self._read()

    def summary(self, telemetry: Any = None, programs_late_share: float | None = None) -> dict[str, Any]:
        """The readings and the verdict; ``telemetry``: the run's ss samples, for the kernel's
        lowest round trip against the configured one (:func:`base_rtt`); ``programs_late_share``:
        its sampler's lateness (:meth:`~tcplab.observe.ss.SsSampler.late_share`)."""
        if len(self._cpu) < 2:
            return {}
        readings: dict[str, Any] = {"wall_s": self._cpu[1].time - self._cpu[0].time,
                                    **cpu_shares(self._cpu[0], self._cpu[1])}
        if programs_late_share is not None:
            readings["programs_late_share"] = programs_late_share
        if (base := base_rtt(self.path.spec, telemetry)) is not None:
            readings["base_rtt"] = base
        before, after = self._lines
        if before or after:
            readings["delay_line"] = {d: late_quantiles(before.get(d, {}), after.get(d, {}))
                                      for d in sorted(set(before) | set(after))}
        return judged(readings)


def health_around(path: Any, compute: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``compute()`` with a run's health readings around it, in the lab's kernel: for a
    measurement made outside a run record (case 00's ping-pong and short transfers). Returns
    (its value, the readings with their verdict)."""
    with RunHealth(path) as readings:
        value = compute()
    return value, readings.summary()


def reasons_of(run: Any) -> list[str]:
    """Why the machine disturbed a recorded run (its ``observe.health``); empty when it did
    not, or for runs recorded before runs kept their health."""
    return list((run.observe.get("health") or {}).get("disturbed", []))


def judged(health: Mapping[str, Any], **readings: Any) -> dict[str, Any]:
    """``health`` with readings taken outside the run's process (a UML kernel's wait for a host
    CPU, read on the host around it; ``measured_beside``, the measurement queue's turn that
    never came) and the verdict over all of them."""
    merged = {**health, **readings}
    merged["disturbed"] = verdict(merged)
    return merged
