"""make bench: run every benchmark in this folder, print its table, keep its result file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Order: the path first (everything rests on it), then capture, the pcap engine and the
#: diagnosis of every flow of a busy capture, reports, and
#: how often the diagnosis is right on a labelled corpus, the course's wall time per case on
#: each lab kernel (course-host.json beside course-uml.json), and last the full profile on one
#: runner against a matrix of shards (the longest, ~1 h).
ORDER = [("bench_fidelity.py",), ("bench_uml.py",), ("bench_capture.py",), ("bench_pcap.py",),
         ("bench_diagnose_all.py",), ("bench_report.py",),
         ("bench_verdicts.py",), ("bench_course.py", "--kernel", "host"), ("bench_course.py", "--kernel", "uml"),
         ("bench_shards.py",)]


def main() -> int:
    runs = [(HERE / name, *args) for name, *args in ORDER if (HERE / name).exists()]
    named = {name for name, *_ in ORDER}
    runs += [(p,) for p in sorted(HERE.glob("bench_*.py")) if p.name not in named]
    failed = []
    for script, *args in runs:
        title = " ".join([script.name, *args])
        print(f"\n=== {title} ===", flush=True)
        start = time.monotonic()
        code = subprocess.run([sys.executable, str(script), *args], cwd=HERE).returncode
        print(f"--- {title}: {'ok' if code == 0 else f'exit {code}'} in {time.monotonic() - start:.0f} s")
        if code:
            failed.append(title)
    print(f"\nresults in {HERE / 'results'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
