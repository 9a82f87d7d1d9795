"""The ``tcplab`` command: doctor | lab | run | diagnose | report | replay | cleanup.

Each subcommand is a thin shell over a library function; exit codes:
0 success, 1 the thing ran and found a problem (a failed check or assertion),
2 bad input (a parameter error: nothing was touched), 3 the machine cannot do it
(not root, missing tool), 4 (``report``) no case failed but the machine was too busy to
trust some (``course.EXIT_BUSY``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import Any, Sequence

from .lab.uml import UmlError
from .units import ParameterError, format_duration, format_rate

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT, EXIT_CANNOT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    """``["rtt=20ms", "rate=100mbit"]`` → dict; a malformed pair is a ParameterError."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParameterError("--set", pair, "key=value, e.g. --set rtt=20ms")
        out[key.strip()] = value.strip()
    return out


# --- doctor ------------------------------------------------------------------------------

def cmd_doctor(args: argparse.Namespace) -> int:
    from .lab import doctor
    from .lab.kernels import call_in, choose_kernel

    where = doctor.lab_kernels()
    result: dict[str, Any] = {"lab_kernels": where}
    if not args.json:
        print(f"lab kernels for this user (uid {where['uid']}):")
        for name in ("host", "uml"):
            row = where[name]
            print(f"  {name:<5} {row['release']:<12} {'can run the lab' if row['ok'] else 'no: ' + row['why']}")
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
        from .lab import uml

        booted = uml.shared_kernel()
        print(f"UML kernel        {booted.release}, booted in {booted.boot_seconds:.1f} s; modules loaded: "
              f"{' '.join(booted.info['modules_loaded'])}; not loaded: {' '.join(booted.info['modules_failed']) or 'none'}")
    caps = in_lab(doctor.capabilities)
    result["capabilities"] = caps.as_dict()
    if not args.json:
        print(f"kernel            {caps.kernel}")
        print(f"root              {'yes' if caps.root else 'NO'}")
        print(f"netem qdisc       {'yes' if caps.netem else 'no (the userspace delay line will be used)'}")
        print(f"link backend      {caps.backend}")
        print(f"tracefs           {'yes' if caps.tracefs else 'no (tracepoints will be recorded as not available)'}")
        print(f"congestion ctl    default {caps.default_cc}; available {' '.join(caps.available_cc)}; "
              f"allowed in namespaces {' '.join(caps.allowed_cc)}")
        for key, value in caps.host_sysctls.items():
            print(f"{key:<40} {value}")
        for tool, where in caps.tools.items():
            print(f"tool {tool:<12} {where or 'missing'}")
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
            "rtt_measured_s": check.rtt_measured, "rtt_kernel_min_s": check.rtt_kernel_min,
            "rate_configured_bps": check.rate_configured, "goodput_bps": check.goodput, "cc": check.cc,
            "rtt_ok": check.rtt_ok, "rate_ok": check.rate_ok,
        }
        if not args.json:
            print(f"fidelity ({check.backend}): RTT configured {format_duration(check.rtt_configured)}, "
                  f"measured over TCP {format_duration(check.rtt_measured)} "
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


# --- uml ---------------------------------------------------------------------------------------

def cmd_uml(args: argparse.Namespace) -> int:
    """``tcplab uml fetch``: unpack the kernel into the user's cache (no root).
    ``tcplab uml run -- CMD …``: boot the kernel, run CMD in it as its root, print its
    output, power off; the exit status is CMD's (the test suite's UML leg runs this way)."""
    from .lab import uml

    if args.action == "fetch":
        install = uml.fetch_install()
        print(f"UML kernel {install.release}: {install.binary}")
        return EXIT_OK
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise ParameterError("command", "", "a command after --, e.g. tcplab uml run -- uname -r")
    with uml.UmlKernel(mem=os.environ.get("TCPLAB_UML_MEM", "1G")) as kernel:
        kernel.echo = lambda line: print(line, flush=True)
        status = kernel.call(uml.run_command, argv)
        kernel.echo = None  # the power-off messages are not the command's
        return status


# --- lab ---------------------------------------------------------------------------------------

def cmd_lab(args: argparse.Namespace) -> int:
    from .lab import Path, PathSpec

    spec = PathSpec.from_settings(parse_sets(args.set))
    with Path(spec) as path:
        print(f"path {path.id} is up ({path.backend}); Ctrl-C tears it down.")
        for host in (path.client, path.router, path.server):
            print(f"  {host.name:<7} {host.address:<12} ip netns exec {host.ns} bash")
        try:
            if args.seconds:
                time.sleep(args.seconds)
            else:
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            pass
    print("path torn down")
    return EXIT_OK


# --- cleanup -------------------------------------------------------------------------------------

def cmd_cleanup(args: argparse.Namespace) -> int:
    from .lab.cleanup import cleanup

    report = cleanup(force=args.force)
    for line in report.lines():
        print(line)
    return EXIT_OK


# --- replay ------------------------------------------------------------------------------------------

def cmd_replay(args: argparse.Namespace) -> int:
    from .cases import replay
    from .course import select_cases

    for case in select_cases(args.cases):
        print(f"{case}: saved {replay.save(case)}")
    return EXIT_OK


# --- delegated subcommands ---------------------------------------------------------------------------

def cmd_run(argv: list[str]) -> int:
    from .experiment import main_run

    return main_run(argv)


def cmd_diagnose(argv: list[str]) -> int:
    from .analysis.cli import main_diagnose

    return main_diagnose(argv)


def cmd_report(argv: list[str]) -> int:
    from .course import main_report

    return main_report(argv)


DELEGATED = {"run": cmd_run, "diagnose": cmd_diagnose, "report": cmd_report}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="what this machine can do, and a short fidelity check")
    p.add_argument("--no-fidelity", action="store_true", help="only list capabilities")
    p.add_argument("--rtt", default="20ms")
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--backend", default="auto", choices=("auto", "netem", "delayline"))
    p.add_argument("--kernel", default="auto", choices=("auto", "host", "uml"),
                   help="which lab kernel to examine (auto: the one the course would use)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("uml", help="the User-mode Linux lab kernel: fetch it without root, run a command in it")
    p.add_argument("action", choices=("fetch", "run"))
    p.add_argument("argv", nargs=argparse.REMAINDER, help="with run: the command, after --")
    p.set_defaults(func=cmd_uml)

    p = sub.add_parser("lab", help="build a path and keep it up for exploring by hand")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="path parameter, e.g. --set rtt=20ms --set rate=100mbit")
    p.add_argument("--seconds", type=float, default=0, help="tear down after this long (0: on Ctrl-C)")
    p.set_defaults(func=cmd_lab)

    p = sub.add_parser("cleanup", help="remove what killed runs left behind; restore host settings")
    p.add_argument("--force", action="store_true", help="also remove namespaces of runs still alive")
    p.set_defaults(func=cmd_cleanup)

    p = sub.add_parser("replay", help="ship the last live runs of cases as replay data (data/replay/)")
    p.add_argument("action", choices=("save",))
    p.add_argument("cases", nargs="?", default="all", help="all, or e.g. 01,04 (default: all)")
    p.set_defaults(func=cmd_replay)

    for name, text in (("run", "run one experiment (tcplab run --help)"),
                       ("diagnose", "diagnose a pcap (tcplab diagnose --help)"),
                       ("report", "execute notebooks and render reports (tcplab report --help)")):
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DELEGATED:
            return DELEGATED[argv[0]](argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except ParameterError as exc:
        print(f"tcplab: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermissionError as exc:
        print(f"tcplab: {exc}", file=sys.stderr)
        return EXIT_CANNOT
    except UmlError as exc:
        print(f"tcplab: {exc}", file=sys.stderr)
        return EXIT_CANNOT
    except KeyboardInterrupt:
        print("tcplab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
