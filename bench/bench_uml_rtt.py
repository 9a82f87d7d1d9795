"""Where the round trip of a UML lab goes above the configured one (not make bench).

bench/results/fidelity.json finds the UML kernel's netem path 0.26–0.56 ms "high" at 1–20 ms
(the TCP ping-pong's median against the configured RTT; goal max(2 %, 0.2 ms)). This splits
that offset, for each configured RTT, in each lab kernel a learner can have (UML with netem;
the host's kernel in a user namespace and, as root, the host's own, both with the delay line):

* ``app_ms``: what the measurement itself costs, the same ping-pong over the client's own
  loopback (no path): the kernel's system calls and wake-ups (in UML every system call goes
  through ptrace);
* ``kernel_ms``: the kernel's own lowest round trip on the path (tcpi_min_rtt) less the
  configured one: what the emulation adds, seen by TCP with no application in between;
* ``icmp_ms``: ping's median (kernel receive timestamps) less the configured RTT;
* ``residual_ms``: the ping-pong's median less the configured RTT less ``app_ms``.

Also each kernel's timer: the high-resolution clock event device and its resolution
(/proc/timer_list), and HZ (from the length of a jiffy, /proc/timer_list).

    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_uml_rtt.py [--rtts 0,1,2,5,10,20,50]
    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_uml_rtt.py --kernels uml --rtts 20 --busy 3
                                 # → bench/results/uml-rtt-busy.json
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from common import run_alone, save, table

from tcplab.lab import NetPath, fidelity, kernels


def timer_facts() -> dict:
    """The kernel's clock event device and hrtimer resolution, from /proc/timer_list."""
    try:
        text = Path("/proc/timer_list").read_text()
    except OSError as exc:
        return {"error": str(exc)}
    resolution = re.search(r"\.resolution: (\d+) nsecs", text)
    device = re.search(r"Clock Event Device: (\S+)", text)
    return {"hrtimer_resolution_ns": int(resolution.group(1)) if resolution else None,
            "clock_event_device": device.group(1) if device else None,
            "high_res": bool(re.search(r"\.hres_active\s*: 1", text))}


def _icmp_median_ms(path: NetPath, count: int) -> float | None:
    done = path.client.run(["ping", "-n", "-q", "-c", str(count), "-i", "0.05", path.server.address],
                           timeout=count * 2 + 10, check=False)
    times = re.search(r"= [\d.]+/([\d.]+)/", done.stdout)
    return float(times.group(1)) if times else None


def measure(rtt_ms: float, count: int, busy: bool = False) -> dict:
    """One configured RTT, in the kernel this runs in (its own lab backend); with ``busy``, a
    busy loop at nice 19 runs in that kernel meanwhile (does the offset come from the kernel
    idling between packets?)."""
    import subprocess

    spinner = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with NetPath(rtt=f"{rtt_ms}ms", rate="100mbit") as path:
            loop = fidelity.tcp_rtt(path, count=count, loopback=True)
            ping_pong = fidelity.tcp_rtt(path, count=count)
            icmp = _icmp_median_ms(path, count)
            backend = path.backend
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    configured = rtt_ms
    app = loop.median * 1e3
    median = ping_pong.median * 1e3
    return {"kernel": kernels.lab_kernel()["kind"], "release": kernels.lab_kernel()["release"], "backend": backend,
            "busy_loop": busy, "rtt_ms": rtt_ms, "median_ms": median, "error_ms": median - configured, "app_ms": app,
            "kernel_ms": ping_pong.kernel_min_rtt * 1e3 - configured,
            "icmp_ms": None if icmp is None else icmp - configured,
            "residual_ms": median - configured - app,
            "goal_ms": max(0.02 * configured, 0.2),
            "samples_spread_ms": statistics.quantiles([s * 1e3 for s in ping_pong.samples], n=10)[-1] - median}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtts", default="0,1,2,5,10,20,50")
    parser.add_argument("--kernels", default="uml,userns,host")
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="also N rounds, alternating, with a nice-19 busy loop in the lab kernel and without")
    args = parser.parse_args()
    rows, timers = [], {}
    for kernel in args.kernels.split(","):
        if kernel != "host" and not kernels.CAN_RUN[kernel]()[0]:
            print(f"  {kernel}: cannot run here, left out", file=sys.stderr)
            continue
        timers[kernel] = kernels.call_in(kernel, timer_facts)
        plan = [False] + [busy for _ in range(args.busy) for busy in (True, False)]
        for rtt in (float(x) for x in args.rtts.split(",")):
            for busy in plan:
                row = kernels.call_in(kernel, measure, rtt, args.count, busy)
                rows.append(row)
            print(f"  {kernel} {row['backend']} {rtt:g} ms: median +{row['error_ms']:.3f}, app {row['app_ms']:.3f}, "
                  f"kernel +{row['kernel_ms']:.3f}, residual {row['residual_ms']:+.3f} ms", file=sys.stderr)
    print(table(rows, [("kernel", "kernel", ""), ("backend", "backend", ""), ("busy_loop", "busy", ""),
                       ("rtt_ms", "RTT ms", "g"),
                       ("error_ms", "median − RTT", "+.3f"), ("app_ms", "loopback", ".3f"),
                       ("residual_ms", "less loopback", "+.3f"), ("kernel_ms", "min_rtt − RTT", "+.3f"),
                       ("icmp_ms", "ping − RTT", "+.3f"), ("goal_ms", "goal", ".2f")]))
    for kernel, facts in timers.items():
        print(f"{kernel}: {facts}")
    name = "uml-rtt-busy" if args.busy else "uml-rtt"
    path = save(name, rows, timers=timers, command=" ".join(["bench/bench_uml_rtt.py", *sys.argv[1:]]))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    run_alone(main)
