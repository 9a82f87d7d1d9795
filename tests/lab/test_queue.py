"""The machine's measurement queue, which every user joins: two learners (system users) and root
measure one at a time, first come first served; the one waiting is told its place and who is
ahead; one that cannot wait longer runs anyway and its turn says so (its runs are then marked
disturbed, never trusted); a holder that dies releases the machine and leaves no ticket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import learners
import pytest

from tcplab.lab import state
from tcplab.observe.health import judged

pytestmark = pytest.mark.kernel

PYTHON = sys.executable
LEARNERS = learners.LEARNERS

#: Takes the machine's turn as its user, says so, holds it until stdin closes (or the limit
#: passes), and prints every place it was told while waiting, as JSON lines.
HOLDER = textwrap.dedent("""
    import json, sys
    from tcplab.lab.state import exclusive_measurement
    say = lambda **kw: print(json.dumps(kw), flush=True)
    with exclusive_measurement(lambda place: say(ahead=place.ahead, text=place.text()), what=sys.argv[1],
                               limit_s=float(sys.argv[2]), poll_s=0.05) as turn:
        say(turn=True, alone=turn.alone, beside=turn.beside, health=turn.health())
        sys.stdin.readline()
""")


def _start(user: str | None, what: str, limit_s: float = 600) -> subprocess.Popen:
    argv = [PYTHON, "-c", HOLDER, what, str(limit_s)]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")


def _said(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    assert line, f"{process.args} said nothing (exit {process.poll()})"
    return json.loads(line)


def _end(*processes: subprocess.Popen) -> None:
    for process in processes:
        if process.poll() is None:
            process.stdin.close()
            process.wait(timeout=30)


@pytest.fixture(name="learners")
def learner_names():
    """The learners' names, checked to be accounts (``make test-users``)."""
    for name in LEARNERS:
        learners.account(name)
    return LEARNERS


def test_learners_and_root_take_turns_first_come_first_served_and_see_their_place(learners):
    first = _start(learners[0], "case 01")
    assert _said(first)["alone"] is True
    second = _start(learners[1], "case 03")
    told = _said(second)
    assert told["ahead"] == [f"{learners[0]}'s case 01"]
    assert "1 measurement ahead of this one" in told["text"]
    third = _start(None, "case 05")  # root queues behind both learners
    told = _said(third)
    assert told["ahead"] == [f"{learners[0]}'s case 01", f"{learners[1]}'s case 03"]
    try:
        _end(first)
        assert _said(second)["alone"] is True  # the second in line, not root, is next
        assert _said(third)["ahead"] == [f"{learners[1]}'s case 03"]
        _end(second)
        assert _said(third)["alone"] is True
    finally:
        _end(first, second, third)
    assert [t for t in state.queue() if t.pid in (first.pid, second.pid, third.pid)] == []


def test_a_measurement_that_cannot_wait_runs_marked_as_not_alone(learners):
    holder = _start(learners[0], "case 06")
    try:
        assert _said(holder)["alone"] is True
        impatient = _start(learners[1], "case 00", limit_s=1.0)
        _said(impatient)  # its place, once
        turn = _said(impatient)
        assert turn["alone"] is False and turn["beside"] == [f"{learners[0]}'s case 06"]
        health = judged({}, measured_beside=turn["health"])
        assert health["disturbed"] and health["disturbed"][0].startswith(
            f"could not wait for the machine: ran beside {learners[0]}'s case 06 after ")
        _end(impatient)
    finally:
        _end(holder)


def test_a_holder_killed_releases_the_machine_and_its_ticket_is_dropped(learners):
    holder = _start(learners[0], "case 09")
    assert _said(holder)["alone"] is True
    waiting = _start(learners[1], "case 02")
    try:
        _said(waiting)
        # The learner's own Python (runuser stays in between): kill -9 it, as a culled server's is.
        victim = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == holder.pid)
        os.kill(victim, signal.SIGKILL)
        holder.wait(timeout=30)
        deadline = time.monotonic() + 10
        turn = _said(waiting)
        assert turn["alone"] is True and time.monotonic() < deadline
        assert not [t for t in state.queue() if t.pid == victim]
    finally:
        _end(holder, waiting)


def _parent(pid: int) -> int | None:
    fields = state.stat_fields(pid)
    return int(fields[1]) if fields else None
