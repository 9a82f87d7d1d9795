"""What the UML lab kernel costs (make bench): boot, a call into it, a program start there.

    .venv/bin/python bench/bench_uml.py [--boots 3] [--calls 20]

Boot: from starting ``linux.uml`` to its agent answering (init, module loads, Python start).
Call: a trivial function sent to the agent and its answer read back (the price of every
``Host.run``/``call`` of a UML path). Program start: ``python -c pass`` and ``ss`` started
from Python, here and inside UML (why the lab reads sockets through inet_diag rather than
forking ``ss`` per sample). Where no UML kernel is installed it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from common import run_alone, save, table

from tcplab.lab import uml


def program_starts(count: int) -> dict[str, float]:
    """Median seconds to start and finish small programs from this process."""
    result = {}
    for name, argv in (("python", [sys.executable, "-c", "pass"]), ("ss", ["ss", "-tinm"])):
        times = []
        for _ in range(count):
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        result[name] = statistics.median(times)
    return result


def nothing() -> None:
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    install = uml.find_install()
    if install is None:
        print("no UML kernel installed: " + uml.missing_message())
        return 0
    rows = []
    for boot in range(args.boots):
        start = time.perf_counter()
        with uml.UmlKernel() as kernel:
            booted = time.perf_counter() - start
            calls = []
            for _ in range(args.calls):
                t0 = time.perf_counter()
                kernel.call(nothing)
                calls.append(time.perf_counter() - t0)
            inside = kernel.call(program_starts, 5)
        here = program_starts(5)
        rows.append({"boot": boot + 1, "release": install.release, "boot_s": booted,
                     "call_median_ms": statistics.median(calls) * 1e3,
                     "python_start_here_s": here["python"], "python_start_uml_s": inside["python"],
                     "ss_start_here_s": here["ss"], "ss_start_uml_s": inside["ss"]})
    print(table(rows, [("boot", "boot", "d"), ("release", "UML kernel", ""), ("boot_s", "boot s", ".2f"),
                       ("call_median_ms", "call ms", ".1f"), ("python_start_here_s", "python here s", ".3f"),
                       ("python_start_uml_s", "python UML s", ".3f"), ("ss_start_here_s", "ss here s", ".3f"),
                       ("ss_start_uml_s", "ss UML s", ".3f")]))
    print(f"saved {save('uml', rows)}")
    return 0


if __name__ == "__main__":
    run_alone(main)
