"""Where a report's time goes, stage by stage, on the test fixture (no lab needed).

    .venv/bin/python bench/bench_report.py [--cases N]

Prints one line per stage with seconds; the lab's own cases add their measurement time
to "execute" and nothing else.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tcplab.report import Case, build_report
from tcplab.report.context import ReportContext
from tcplab.report.execute import execute_notebook
from tcplab.report.html import write_case_html
from tcplab.report.pdf import html_to_pdf

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "report" / "fixtures" / "case_ok.ipynb"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3, help="cases in the whole-report run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tcplab-bench-") as tmp:
        out = Path(tmp)
        stages = []
        start = time.perf_counter()
        execute_notebook(FIXTURE, out / "one.ipynb", progress=False)
        stages.append(("execute (1 case)", time.perf_counter() - start))
        start = time.perf_counter()
        write_case_html(out / "one.ipynb", out / "one.html", context=ReportContext(),
                        base_dir=FIXTURE.parent)
        stages.append(("html (1 case)", time.perf_counter() - start))
        start = time.perf_counter()
        html_to_pdf(out / "one.html", out / "one.pdf")
        stages.append(("pdf (1 case)", time.perf_counter() - start))
        start = time.perf_counter()
        build_report([Case(f"c{i}", notebook=FIXTURE) for i in range(args.cases)],
                     reports_dir=out / "all", progress=False)
        stages.append((f"build_report ({args.cases} cases, html+pdf)", time.perf_counter() - start))
    for name, seconds in stages:
        print(f"{name:<40} {seconds:7.2f} s")


if __name__ == "__main__":
    main()
