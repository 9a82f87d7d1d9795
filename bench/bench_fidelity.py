"""Fidelity of the emulated path (make bench).

For round-trip delays {1, 10, 20, 50, 100} ms × rates {10, 100} Mbit/s, in each lab kernel
this machine has (the host's as root, the host's in a user namespace as a learner has it, and
the UML kernel's) and each backend that kernel allows (the delay line where there is no
sch_netem, netem in UML): the TCP-measured RTT error, less what the measurement itself costs in
that kernel (the same ping-pong over loopback; bench_uml_rtt.py shows why), against the goal
max(2 %, 0.2 ms), and bulk goodput with autotuned buffers as a share of the
configured rate (goal ≥ 95 % of what TCP can carry: 1448/1514 of the line rate). For the
delay line, its CPU per 10 k packets/s and the packet rate at which it stops keeping up.
"""

from __future__ import annotations

import argparse
import sys

from common import run_alone, save, table

from tcplab.lab import NetPath, fidelity, kernels
from tcplab.lab.link import netem_available

TCP_SHARE = 1448 / 1514  # the most TCP payload a 1514-byte frame can carry


def backends_here() -> list[str]:
    """The backends the kernel this runs in can use."""
    return ["delayline"] + (["netem"] if netem_available() else [])


def measure_cell(backend: str, rtt: int, rate: int, seconds: float) -> dict:
    """One grid cell, measured in the kernel this function runs in."""
    with NetPath(rtt=f"{rtt}ms", rate=f"{rate}mbit", backend=backend) as path:
        # The ping-pong's own cost, over the client's loopback (no path): the kernel's socket
        # calls and wake-ups, which every round trip an application measures carries (about
        # 0.1 ms on this host, 0.2–0.4 ms in UML, whose system calls go through ptrace).
        loopback = fidelity.tcp_rtt(path, count=40, loopback=True)
        rtt_result = fidelity.tcp_rtt(path, count=max(10, min(40, int(2000 / rtt))))
        # Long RTTs need more time to leave slow start before counting.
        put = fidelity.goodput(path, seconds=seconds, skip=max(1.0, rtt * 0.03))
    # The path's error is the measured round trip less that cost (as case 00's check takes it).
    raw = rtt_result.median - rtt / 1e3
    err = raw - loopback.median
    goal = max(0.02 * rtt / 1e3, 0.0002)
    share = put.bits_per_second / (rate * 1e6)
    stats = path.link_stats
    packets = sum(q.get("received", 0) for q in stats.values())
    cpu = sum(q.get("cpu_s", 0.0) for q in stats.values())
    wall = max([q.get("wall_s", 0.0) for q in stats.values()] or [0.0])
    return {
        "kernel": kernels.lab_kernel()["kind"], "release": kernels.lab_kernel()["release"],
        "backend": path.backend, "rtt_ms": rtt, "rate_mbit": rate,
        "rtt_median_ms": rtt_result.median * 1e3, "rtt_min_ms": rtt_result.minimum * 1e3,
        "kernel_min_rtt_ms": rtt_result.kernel_min_rtt * 1e3,
        "rtt_loopback_ms": loopback.median * 1e3, "rtt_error_raw_ms": raw * 1e3,
        "rtt_error_ms": err * 1e3, "rtt_goal_ms": goal * 1e3, "rtt_ok": abs(err) <= goal,
        "goodput_mbit": put.bits_per_second / 1e6, "share_of_rate": share,
        "share_of_tcp_max": share / TCP_SHARE, "rate_ok": share / TCP_SHARE >= 0.95,
        "cc": put.cc,
        "delayline_cpu_per_10k_pps": (cpu / (packets / wall) * 1e4 / wall) if packets and wall else None,
    }


def fidelity_rows(lab_kernels: list[str], rtts: list[int], rates: list[int], seconds: float) -> list[dict]:
    rows = []
    for kernel in lab_kernels:
        for backend in kernels.call_in(kernel, backends_here):
            for rate in rates:
                for rtt in rtts:
                    row = kernels.call_in(kernel, measure_cell, backend, rtt, rate, seconds)
                    rows.append(row)
                    print(f"  {kernel} {row['backend']} {rtt} ms {rate} Mbit/s: RTT {row['rtt_median_ms']:.2f} ms, "
                          f"goodput {row['goodput_mbit']:.1f} Mbit/s", file=sys.stderr)
    return rows


def capacity_rows(rates: list[str]) -> list[dict]:
    """Push the delay line harder until it stops keeping up (lateness or goodput gives way)."""
    rows = []
    for rate in rates:
        with NetPath(rtt="10ms", rate=None if rate == "none" else rate, backend="delayline") as path:
            put = fidelity.goodput(path, seconds=2, skip=1.0)
        stats = path.link_stats
        data = max(stats.values(), key=lambda q: q.get("received", 0))
        pps = sum(q["received"] for q in stats.values()) / max(q["wall_s"] for q in stats.values())
        rows.append({
            "rate": rate, "goodput_mbit": put.bits_per_second / 1e6, "packets_per_s": pps,
            "late_mean_ms": data["late_mean_s"] * 1e3, "late_max_ms": data["late_max_s"] * 1e3,
            "cpu_share": sum(q["cpu_s"] for q in stats.values()) / max(q["wall_s"] for q in stats.values()),
        })
        print(f"  capacity {rate}: {put.bits_per_second / 1e6:.0f} Mbit/s, {pps:.0f} pkt/s", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtts", default="1,10,20,50,100")
    parser.add_argument("--rates", default="10,100")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--capacity", default="200mbit,400mbit,800mbit,none")
    parser.add_argument("--kernels", default="host,userns,uml",
                        help="lab kernels to measure in (userns and uml are left out where they cannot run)")
    args = parser.parse_args()
    lab_kernels = [k for k in args.kernels.split(",") if k == "host" or kernels.CAN_RUN[k]()[0]]
    rows = fidelity_rows(lab_kernels, [int(x) for x in args.rtts.split(",")],
                         [int(x) for x in args.rates.split(",")], args.seconds)
    print("\nPath fidelity (goal: RTT error ≤ max(2 %, 0.2 ms); goodput ≥ 95 % of the TCP maximum)")
    print(table(rows, [("kernel", "kernel", ""), ("backend", "backend", ""), ("rtt_ms", "RTT ms", "d"), ("rate_mbit", "Mbit/s", "d"),
                       ("rtt_median_ms", "measured ms", ".2f"), ("rtt_loopback_ms", "loopback ms", ".2f"),
                       ("rtt_error_ms", "error ms", "+.2f"),
                       ("rtt_ok", "ok", ""), ("goodput_mbit", "goodput", ".1f"),
                       ("share_of_tcp_max", "of TCP max", ".1%"), ("rate_ok", "ok", ""),
                       ("delayline_cpu_per_10k_pps", "CPU s/s per 10k pkt/s", ".3f")]))
    capacity = capacity_rows(args.capacity.split(",")) if args.capacity else []
    if capacity:
        print("\nDelay line capacity at 10 ms RTT (where lateness or goodput gives way)")
        print(table(capacity, [("rate", "tbf rate", ""), ("goodput_mbit", "goodput Mbit/s", ".0f"),
                               ("packets_per_s", "pkt/s", ".0f"), ("late_mean_ms", "late mean ms", ".3f"),
                               ("late_max_ms", "late max ms", ".2f"), ("cpu_share", "CPU", ".0%")]))
    path = save("fidelity", rows, capacity=capacity)
    print(f"\nsaved {path}")
    return 0


if __name__ == "__main__":
    run_alone(main)
