"""When a workload goes wrong: a server that never answers is killed at the timeout, a side
that dies fails the run; either way the failure is recorded and nothing is left running."""

from __future__ import annotations

import math
import os
import signal
import time

import pytest

from tcplab.lab import netns
from tcplab.traffic import WORKLOADS, WorkloadFailed, WorkloadTimeout

from .test_workloads import QUICK

pytestmark = [pytest.mark.kernel, pytest.mark.lifecycle]


@pytest.fixture(scope="module")
def timeout(path, tmp_path_factory) -> float:
    """A workload timeout that a stalled run reaches, but that its start does not: 1 s on a
    fast kernel; more where programs start slowly (in a UML kernel each Python program
    imports through hostfs, 0.7 s idle, longer under load), measured here as twice the
    time a 1 KB transfer takes from launch to its report, rounded up to whole seconds."""
    began = time.monotonic()
    WORKLOADS["bulk"](size="1KB", timeout="60s").run(path, tmp_path_factory.mktemp("startup"))
    return float(max(1, math.ceil(2 * (time.monotonic() - began))))


def _nothing_left(path, running):
    assert all(p.returncode is not None for p in running.processes.values())
    assert not netns.pids(path.server.ns) and not netns.pids(path.client.ns)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_server_that_never_answers_is_killed_at_the_timeout(path, tmp_path, name, timeout):
    settings, _ = QUICK[name]
    running = WORKLOADS[name](**settings, timeout=f"{timeout}s").launch(path, tmp_path)
    # Frozen: the kernel still completes the handshake, but the application never reads nor writes.
    os.kill(running.processes["server"].pid, signal.SIGSTOP)
    began = time.monotonic()
    with pytest.raises(WorkloadTimeout) as caught:
        running.wait()
    waited = time.monotonic() - began
    assert waited < timeout + 3, "killed at the timeout, not long after"
    partial = caught.value.result
    assert not partial.ok and f"timed out after {timeout:g} s" in partial.error
    workload = WORKLOADS[name](**settings)
    assert partial.workload == name and partial.bytes < (workload.expected_bytes() or workload.size)
    assert set(caught.value.logs) == {"server", "client"}
    assert all(log.exists() for log in caught.value.logs.values())
    _nothing_left(path, running)
    running.stop()  # idempotent


def test_a_stopped_side_still_reports_how_far_it_got(path, tmp_path, timeout):
    """SIGTERM makes tcplab's programs print a partial report: the bytes read before the stall."""
    # The reader must read its 64 KB before the timeout and pause past it. The module's timeout
    # follows how slowly a 1 KB transfer starts here, so this run, which reads more first, gets
    # twice it; its pause outlasts that (a fixed 30 s pause did not in a UML kernel on a slow
    # day, where the timeout came to 38 s: the run finished).
    stall_timeout = 2 * timeout
    workload = WORKLOADS["slowreader"](size="1MB", pause_after="64KB", pause_for=f"{stall_timeout + 30:g}s",
                                       timeout=f"{stall_timeout:g}s")
    with pytest.raises(WorkloadTimeout) as caught:
        workload.run(path, tmp_path)
    partial = caught.value.result
    assert 65536 <= partial.bytes < 1048576
    assert "stopped by signal SIGTERM" in partial.error
    assert partial.sockets["client"]["cc"] == "bbr"


@pytest.mark.parametrize("name", ["bulk", "reqresp", "http", "iperf"])
def test_a_side_that_dies_fails_the_run_and_stops_the_other(path, tmp_path, name):
    settings, _ = QUICK[name]
    running = WORKLOADS[name](**settings, timeout="20s").launch(path, tmp_path)
    os.kill(running.processes["server"].pid, signal.SIGKILL)
    began = time.monotonic()
    with pytest.raises(WorkloadFailed) as caught:
        running.wait()
    assert time.monotonic() - began < 5, "the failure ends the run, not the timeout"
    assert "server exited -9" in caught.value.result.error
    assert not caught.value.result.ok
    _nothing_left(path, running)
