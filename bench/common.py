"""What every benchmark result file carries, so a table can be remade and compared later."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

from tcplab.runs import package_version, tool_version

RESULTS = Path(__file__).resolve().parent / "results"

#: ``python -c CHILD_TIMER OUT CMD...``: runs CMD with its output in OUT and prints its exit code,
#: wall seconds and peak RSS in bytes, measured from a parent that does nothing else.
CHILD_TIMER = r"""
import resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t0 = time.perf_counter()
    code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode
    t1 = time.perf_counter()
print(code, t1 - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def environment() -> dict:
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "packages": {p: package_version(p) for p in ("tcplab", "pyroute2", "numpy", "pandas", "numba", "NetfilterQueue")},
        "tools": {"tcpdump": tool_version(["tcpdump", "--version"]), "tshark": tool_version(["tshark", "--version"])},
    }


def save(name: str, rows: list[dict], **extra) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"environment": environment(), "rows": rows, **extra}, indent=2))
    os.replace(tmp, path)
    return path


def save_to(out: Path, rows: list[dict], **extra) -> Path:
    """The result where a bench's ``--out`` points: into ``results/`` as :func:`save` writes
    it (named after ``out``), or to any other file with the same content."""
    if out.resolve().parent == RESULTS.resolve():
        return save(out.stem, rows, **extra)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"environment": environment(), "rows": rows, **extra}, indent=2))
    return out


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Plain-text table; columns are (key, heading, format)."""
    head = [h for _, h, _ in columns]
    body = [[("" if r.get(k) is None else format(r[k], f)) for k, _, f in columns] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def run_alone(main) -> None:
    """Run a benchmark's ``main`` holding the measurement lock and exit with its code: no
    other tcplab measurement shares the CPU with it (they wait their turn, as it does)."""
    from tcplab.lab.state import exclusive_measurement

    with exclusive_measurement(lambda place: print(place.text(), flush=True)):
        sys.exit(main())
