"""The fault matrix: a run killed with -9 at each phase, then ``tcplab cleanup``.

Each run stops itself at its phase (``$TCPLAB_STOP_AT``, see ``lab.state.checkpoint``), so
the kill lands exactly there; the test first sees the phase's own traces on the machine
(namespaces, the qdisc, the delay line and its iptables rule, tcpdump, a live connection,
chromium), kills the run as a user's ``kill -9`` would, runs ``tcplab cleanup`` and then
finds nothing left: no namespace, qdisc, iptables rule, process, trace instance or guard
record, and the host's sysctls as they were before the run. The autouse fixture of
conftest.py checks the host's qdiscs and iptables rules besides. Host kernel, delay line:
the backend this machine runs (netem has no module here; UML has its own kill tests in
tests/lab/test_uml.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tcplab.lab import netns, sysctl
from tcplab.lab.state import PHASES, STOP_AT_ENV, processes, stat_fields
from tcplab.runs import COMPLETE, list_runs

WMEM_MAX = "net.core.wmem_max"
TRACE_INSTANCES = Path("/sys/kernel/tracing/instances")
TCPLAB = Path(sys.executable).with_name("tcplab")
CASE = "fault-matrix"

#: A run that reaches every phase of the lab: a host guard (wmem_max), a delay-line path, a
#: capture, tracepoints and a transfer long enough to be killed in the middle of.
RUN = textwrap.dedent(f"""
    import sys
    from tcplab.experiment import Experiment
    from tcplab.lab import NetPath, PathSpec
    from tcplab.observe import ObserveSpec
    from tcplab.traffic import Bulk

    spec = PathSpec(rtt="10ms", rate="20mbit", backend="delayline", host={{"{WMEM_MAX}": sys.argv[1]}})
    with NetPath(spec) as path:
        Experiment(path, Bulk(size="200MB"), case="{CASE}", observe=ObserveSpec(tracepoints=True)).run()
""")


def _marked(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker``: the run and everything it
    started, wherever they went (a namespace, a new session, a re-parenting)."""
    found = []
    for pid, fields in processes():
        if fields[0] == "Z":
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(pid)
    return found


def _commands(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120])
        except OSError:
            pass
    return out


def _wait(what: str, condition, timeout: float, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := condition()):
            return value
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}: {out[-3000:]}")
        time.sleep(0.05)
    pytest.fail(f"no {what} within {timeout:g} s")


def _new_namespaces(before: set[str]) -> set[str]:
    return set(netns.listed()) - before


def _router(names: set[str]) -> str:
    return next(n for n in names if n.endswith("-router"))


def _evidence(phase: str, before_ns: set[str], marker: str, proc: subprocess.Popen) -> str:
    """What the machine shows of ``phase`` while the run is stopped there."""
    names = _new_namespaces(before_ns)
    commands = " | ".join(_commands(_marked(marker)))
    if phase == "rendering":
        assert "chrom" in commands, commands
        return "chromium printing"
    assert len(names) == 3, names
    router = _router(names)
    qdiscs = netns.run(router, ["tc", "qdisc", "show"]).stdout
    rules = netns.run(router, ["iptables-save"], check=False).stdout
    if phase == "path-built":
        assert "tbf" not in qdiscs
        return "3 namespaces"
    assert "tbf" in qdiscs, qdiscs
    if phase == "shaping-applied":
        return "tbf on the router"
    assert "NFQUEUE" in rules and "tcplab.lab.delayline" in commands, (rules, commands)
    if phase == "delay-line-started":
        return "delay line and its NFQUEUE rule"
    assert "tcpdump" in commands, commands
    if phase == "capture-listening":
        return "tcpdump listening"
    # The run stops itself once the workload is launched; its programs go on, so the kill
    # lands after the first bytes arrived.
    client = next(n for n in names if n.endswith("-client"))
    _wait("bytes arriving", lambda: "bytes_received:" in netns.run(client, ["ss", "-tinH"]).stdout, 20, proc)
    return "a transfer under way"


def _start(phase: str, marker: str, tmp_path: Path, wmem: str) -> subprocess.Popen:
    env = {**os.environ, STOP_AT_ENV: phase, "TCPLAB_FAULT_MARKER": marker, "TCPLAB_DATA": str(tmp_path / "data")}
    if phase == "rendering":
        argv = [str(TCPLAB), "report", "--cases", "00", "--mode", "replay", "--formats", "pdf",
                "--reports-dir", str(tmp_path / "reports")]
    else:
        argv = [sys.executable, "-c", RUN, wmem]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


@pytest.mark.kernel
@pytest.mark.parametrize("phase", PHASES)
def test_a_run_killed_at_each_phase_leaves_nothing_after_cleanup(root, tmp_path, phase):
    marker = uuid.uuid4().hex
    before_ns = set(netns.listed())
    before_wmem = sysctl.read(WMEM_MAX)
    before_trace = {p.name for p in TRACE_INSTANCES.glob("tcplab*")}
    proc = _start(phase, marker, tmp_path, str(int(before_wmem) + 4096))
    try:
        _wait(f"stop at {phase}", lambda: (stat_fields(proc.pid) or ["?"])[0] == "T", 120, proc)
        seen = _evidence(phase, before_ns, marker, proc)
        if phase != "rendering":
            assert sysctl.read(WMEM_MAX) == str(int(before_wmem) + 4096)  # the guard had raised it
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

    cleaned = subprocess.run([str(TCPLAB), "cleanup"], capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    if phase != "rendering":  # the run's namespaces and the raised wmem_max were still there for it to undo
        assert cleaned.stdout.count("removed namespace") == 3 and f"restored {WMEM_MAX}" in cleaned.stdout, \
            cleaned.stdout

    # Helpers get SIGTERM when their parent dies (and cleanup kills what ran in the
    # namespaces); give the last of them a moment to exit.
    deadline = time.monotonic() + 10
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"killed at {phase} ({seen}): processes left: {_commands(left)}"
    assert not _new_namespaces(before_ns), f"killed at {phase}: namespaces left"
    assert sysctl.read(WMEM_MAX) == before_wmem and not sysctl.GUARD_RECORD.exists()
    assert {p.name for p in TRACE_INSTANCES.glob("tcplab*")} == before_trace
    if phase != "rendering":
        runs = list_runs(CASE, runs_dir=tmp_path / "data" / "runs")
        assert all(r.status != COMPLETE for r in runs)  # a killed run is never taken for a result
    else:
        reports = tmp_path / "reports"
        assert not list(reports.glob("*.pdf")) and not (reports / "summary.json").exists()
