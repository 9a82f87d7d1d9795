"""``tcplab doctor``: which kernels can run the lab for this user (the host's as root, the
host's in a user namespace, UML), which one the course takes and why, what it can do, and a
short fidelity check of a path (:mod:`tcplab.lab.doctor` measures)."""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any, Sequence

from ..lab.kernels import KERNELS
from ..units import format_duration, format_rate
from .common import EXIT_CANNOT, EXIT_OK, EXIT_PROBLEM


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab doctor", description="What this machine can do, and a short "
                                     "fidelity check.")
    parser.add_argument("--no-fidelity", action="store_true", help="only list capabilities")
    parser.add_argument("--rtt", default="20ms")
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--backend", default="auto", choices=("auto", "netem", "delayline"))
    parser.add_argument("--kernel", default="auto", choices=KERNELS,
                        help="which lab kernel to examine (auto: the one the course would use)")
    parser.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str]) -> int:
    from ..lab import doctor
    from ..lab.kernels import call_in, choose_kernel

    args = build_parser().parse_args(list(argv))
    where = doctor.lab_kernels()
    result: dict[str, Any] = {"lab_kernels": where}
    if not args.json:
        print(f"lab kernels for this user (uid {where['uid']}):")
        for name in ("host", "userns", "uml"):
            row = where[name]
            print(f"  {name:<6} {row['release']:<16} {'can run the lab' if row['ok'] else 'no: ' + row['why']}")
    choice = choose_kernel(args.kernel)
    result["kernel"] = choice.kernel
    if choice.kernel is None:
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"PROBLEM: no live lab for this user: {choice.why}; the course replays recorded runs")
        return EXIT_CANNOT
    in_lab = functools.partial(call_in, choice.kernel)
    if not args.json:
        print(f"the lab runs on   {choice.kernel} ({choice.why})")
    if choice.kernel == "uml" and not args.json:
        from ..lab import uml

        booted = uml.shared_kernel()
        print(f"UML kernel        {booted.release}, booted in {booted.boot_seconds:.1f} s; modules loaded: "
              f"{' '.join(booted.info['modules_loaded'])}; not loaded: {' '.join(booted.info['modules_failed']) or 'none'}")
    if choice.kernel == "userns":
        from ..lab import userns

        started = userns.shared_kernel()
        result["userns_limits"] = doctor.userns_limits()
        if not args.json:
            print(f"user namespace    started in {started.boot_seconds:.1f} s; the lab is root of its own namespaces "
                  "there, on this machine's kernel")
            for limit in result["userns_limits"]:
                print(f"  it {limit}")
    caps = in_lab(doctor.capabilities)
    result["capabilities"] = caps.as_dict()
    if not args.json:
        print(f"kernel            {caps.kernel}")
        print(f"root              {('yes, of its user namespace' if choice.kernel == 'userns' else 'yes') if caps.root else 'NO'}")
        print(f"netem qdisc       {'yes' if caps.netem else 'no (the userspace delay line will be used)'}")
        print(f"link backend      {caps.backend}")
        print(f"tracefs           {'yes' if caps.tracefs else 'no (tracepoints will be recorded as not available)'}")
        print(f"congestion ctl    default {caps.default_cc}; available {' '.join(caps.available_cc)}; "
              f"allowed in namespaces {' '.join(caps.allowed_cc)}")
        for key, value in caps.host_sysctls.items():
            print(f"{key:<40} {value}")
        for tool, found in caps.tools.items():
            print(f"tool {tool:<12} {found or 'missing'}")
        for problem in caps.problems:
            print(f"PROBLEM: {problem}")
    if caps.problems:
        if args.json:
            print(json.dumps(result, indent=2))
        return EXIT_CANNOT
    if not args.no_fidelity:
        check = in_lab(doctor.fidelity_check, rtt=args.rtt, rate=args.rate, backend=args.backend)
        result["fidelity"] = {
            "backend": check.backend, "rtt_configured_s": check.rtt_configured,
            "rtt_measured_s": check.rtt_measured, "rtt_loopback_s": check.rtt_loopback,
            "rtt_kernel_min_s": check.rtt_kernel_min,
            "rate_configured_bps": check.rate_configured, "goodput_bps": check.goodput, "cc": check.cc,
            "rtt_ok": check.rtt_ok, "rate_ok": check.rate_ok,
        }
        if not args.json:
            print(f"fidelity ({check.backend}): RTT configured {format_duration(check.rtt_configured)}, "
                  f"measured over TCP {format_duration(check.rtt_measured)} "
                  f"less {format_duration(check.rtt_loopback)} of the kernel's own (loopback) "
                  f"(kernel min_rtt {format_duration(check.rtt_kernel_min)}) "
                  f"{'ok' if check.rtt_ok else 'OFF'}")
            print(f"fidelity ({check.backend}): rate configured {format_rate(check.rate_configured)}, "
                  f"goodput {format_rate(check.goodput)} ({check.rate_share:.1%}, {check.cc}) "
                  f"{'ok' if check.rate_ok else 'LOW'}")
        if not (check.rtt_ok and check.rate_ok):
            if args.json:
                print(json.dumps(result, indent=2))
            return EXIT_PROBLEM
    if args.json:
        print(json.dumps(result, indent=2))
    return EXIT_OK
