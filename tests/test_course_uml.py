"""The course with its lab in a User-mode Linux kernel (6.1, netem, stock sysctl limits):
the notebooks run here, every variant's path, traffic and capture run in that kernel.

It runs each case's own runs, checks and answers, not the exercises (``--exercises skip``):
their runs score nothing and took a third of this leg's time, and the host leg runs them
live (``test_course``); every cell they leave unrun says so on the page.

``UML_CASES`` are the cases whose scored checks are about the kernel rather than the line
rate; docs/lab-kernels.md's table says what the others do there and why they are not in this leg.
"""

from __future__ import annotations

import pytest

from test_course import assert_live_course_held, tcplab_report
from tcplab.lab import uml

#: The cases whose checks are about what the kernel does (buffers under stock limits, window
#: rules, timers, memory pressure, pacing, ss fields), not about how fast it forwards. The
#: others (00, 03, 06, 07, 08) hold throughput floors near the 100 Mbit/s line or time a
#: restart to a few ms, which one UML process carrying the whole path reaches only on a good
#: day: on 2026-11-27, quiet, it forwarded 58 Mbit/s in case 00's path check (floor 86.1),
#: cubic's lossless steady rate read 6.3 MB/s in 06 (floor 9.0) and 56 Mbit/s in 07 (floor
#: 71.7), with no run waiting for a CPU. They run live in the host leg (``test_course``) and in
#: UML on demand (``make report KERNEL=uml``); docs/lab-kernels.md's table says what each does there.
UML_CASES = ("01-send-buffer", "02-receive-buffer", "04-nagle-delayed-ack", "05-zero-window", "09-tcp-mem",
             "10-rate-limiting", "11-reading-ss")
#: These cases without their exercises took 1004 s of notebook time in UML on 2026-11-27 (the
#: whole course with its exercises 35.7 min before, and more than 44 min on a CI machine,
#: which ran out of its 90). The limit leaves room for a slower machine while the three legs
#: of ``make test`` stay well inside CI's 90 minutes, and ends a stuck run with its output
#: rather than CI's kill.
REPORT_TIMEOUT_S = 30 * 60


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(REPORT_TIMEOUT_S + 2 * 60)  # the report's own limit ends it first, with its output
def test_the_course_runs_live_in_the_uml_kernel_and_its_checks_hold(tmp_path_factory):
    if uml.find_install() is None:
        pytest.fail(uml.missing_message())
    reports = tmp_path_factory.mktemp("reports-uml")
    data = tmp_path_factory.mktemp("data-uml")
    result = tcplab_report("--cases", ",".join(c[:2] for c in UML_CASES), "--profile", "quick", "--mode", "live",
                           "--exercises", "skip",
                           "--kernel", "uml", "--formats", "html", "--reports-dir", str(reports), data_dir=data,
                           timeout_s=REPORT_TIMEOUT_S)
    summary = assert_live_course_held(result, reports)
    assert [c["case_id"] for c in summary["cases"]] == list(UML_CASES) and summary["exercises"] == "skip"
    release = uml.find_install().release
    # The lab ran in UML on netem; case 02's side-by-side adds the host kernel (delay line here).
    assert summary["backend"].split(",")[0] == "netem" and summary["kernel"].split(", ")[0] == f"{release} (UML)"
    assert all(case["checks"] for case in summary["cases"])
    page = (reports / "handout.html").read_text()
    assert f"{release} (UML)" in page and "User-mode Linux" in page
