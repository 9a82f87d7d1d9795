"""Shared fixtures. Every test must leave the machine as it found it: no namespace, qdisc,
iptables rule, host sysctl change, trace instance or stray process. An autouse fixture
checks that after each test, so a leak fails the test that caused it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tcplab.lab import cleanup, netns, sysctl
from tcplab.lab.state import process_alive, processes
from tcplab.lab.tracefs import instance_owner

HOST_KEYS = sysctl.HOST_GLOBAL
TRACE_INSTANCES = Path("/sys/kernel/tracing/instances")


def _host_state() -> dict:
    def run(argv):
        return subprocess.run(argv, capture_output=True, text=True).stdout

    return {
        "namespaces": set(netns.listed()),
        "sysctls": {k: sysctl.read(k) for k in HOST_KEYS},
        "iptables": _rules(run(["iptables-save"])) if _have("iptables-save") else "",
        "qdiscs": run(["tc", "qdisc", "show"]),
        "trace_instances": {p.name for p in TRACE_INSTANCES.glob("tcplab*")} if TRACE_INSTANCES.exists() else set(),
        "children": _children(),
        "guard_record": sysctl.GUARD_RECORD.exists(),
    }


def _rules(saved: str) -> str:
    """iptables-save's rules without what changes while nothing does: its comment lines carry
    the time they were written, and a chain's packet and byte counters count traffic. A machine
    with rules of its own (Docker's, podman's netavark) prints them on every call."""
    return "\n".join(re.sub(r" \[\d+:\d+\]$", "", line) for line in saved.splitlines() if not line.startswith("#"))


def _have(tool: str) -> bool:
    return any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":"))


def _children() -> set[int]:
    """Live (non-zombie) descendants of this test process."""
    me = os.getpid()
    parents: dict[int, int] = {}
    for pid, fields in processes():
        if fields[0] != "Z":
            parents[pid] = int(fields[1])
    found, frontier = set(), {me}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _owned_elsewhere(name: str) -> bool:
    return cleanup.owner_alive(name) and netns.owner_of(name) not in _children()


def _alive_elsewhere(pid: int | None) -> bool:
    return pid is not None and pid != os.getpid() and process_alive(pid) and pid not in _children()


@pytest.fixture(autouse=True)
def leaves_nothing_behind(request):
    if os.geteuid() != 0:
        yield
        return
    before = _host_state()
    yield
    after = _host_state()
    problems = []
    # A namespace whose recorded owner is another live process (a parallel test run, a
    # user's `tcplab lab`) is not this test's doing.
    new_ns = {n for n in after["namespaces"] - before["namespaces"] if not _owned_elsewhere(n)}
    if new_ns:
        problems.append(f"namespaces left: {sorted(new_ns)}")
    for key in ("sysctls", "iptables", "qdiscs", "guard_record"):
        if after[key] != before[key]:
            problems.append(f"{key} changed: {before[key]!r} -> {after[key]!r}")
    # Likewise a trace instance of another live process (a user's `tcplab run` beside the suite).
    new_trace = {name for name in after["trace_instances"] - before["trace_instances"]
                 if not _alive_elsewhere(instance_owner(name))}
    if new_trace:
        problems.append(f"trace instances left: {sorted(new_trace)}")
    new_children = after["children"] - before["children"]
    if new_children:
        problems.append(f"processes left: {sorted(new_children)}")
    if problems:
        pytest.fail("test left traces on the machine: " + "; ".join(problems))


@pytest.fixture(scope="session")
def root():
    if os.geteuid() != 0:
        pytest.fail("kernel tests need root: run `make test` as root")


@pytest.fixture(scope="session")
def replay_report(tmp_path_factory):
    """The whole course from its shipped replay data, HTML only: one run for every test that reads
    a replayed course (its pages, and the reference run a class's worksheets are graded against)."""
    reports = tmp_path_factory.mktemp("replay")
    out = subprocess.run([sys.executable, "-m", "tcplab.commands", "report", "--cases", "all", "--mode", "replay",
                          "--formats", "html", "--reports-dir", str(reports)], capture_output=True, text=True,
                         timeout=60 * 60)
    return out, reports
