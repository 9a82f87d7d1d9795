"""make bench: run every benchmark in this folder, print its table, keep its result file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Order: the path first (everything rests on it), then capture, the pcap engine, reports.
ORDER = ["bench_fidelity.py", "bench_uml.py", "bench_capture.py", "bench_pcap.py", "bench_report.py", "bench_course.py"]


def main() -> int:
    scripts = [HERE / name for name in ORDER if (HERE / name).exists()]
    scripts += sorted(p for p in HERE.glob("bench_*.py") if p.name not in ORDER)
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        start = time.monotonic()
        code = subprocess.run([sys.executable, str(script)], cwd=HERE).returncode
        print(f"--- {script.name}: {'ok' if code == 0 else f'exit {code}'} in {time.monotonic() - start:.0f} s")
        if code:
            failed.append(script.name)
    print(f"\nresults in {HERE / 'results'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
