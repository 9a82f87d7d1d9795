"""A learner's machine that lacks what a lab road needs: each says what is missing, by name, and
which road the lab takes instead; nothing is left behind. The learner is a system user (``make
test-users``); a container's seccomp profile is played by a small filter that refuses the
named system calls (helpers/seccomp_deny.c, built here with cc), a small /dev/shm by a 64 MB
tmpfs, an unwritable home by HOME=/proc."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import learners
import pytest

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
LEARNER = learners.LEARNERS[0]
HELPERS = Path(__file__).with_name("helpers")

#: What a learner's process sees of the lab's roads, as JSON.
ROADS = textwrap.dedent("""
    import json
    from tcplab.lab import uml, userns
    from tcplab.lab.kernels import choose_kernel, choose_mode
    from tcplab.units import ParameterError
    mode = choose_mode("auto")
    try:
        choose_kernel("uml")
        uml_refused = None
    except ParameterError as exc:
        uml_refused = str(exc)
    print(json.dumps({"kernel": choose_kernel("auto").kernel, "mode": mode.mode, "why": mode.why,
                      "userns": userns.probe(), "ptrace": uml.ptrace_allowed(), "uml_refused": uml_refused}))
""")


@pytest.fixture(scope="module")
def shared_dir():
    """A folder the learner can enter (pytest's are root's alone)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tcplab-faults-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def seccomp_deny(shared_dir):
    built = shared_dir / "seccomp_deny"
    done = subprocess.run(["cc", "-O2", "-o", str(built), str(HELPERS / "seccomp_deny.c")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return built


@pytest.fixture(scope="module")
def learner():
    return learners.account(LEARNER)


def _roads(learner, *prefix: str, env: dict | None = None) -> dict:
    settings = [f"{k}={v}" for k, v in (env or {}).items()]
    done = subprocess.run(["runuser", "-u", learner.pw_name, "--", "env", *settings, *prefix, PYTHON, "-c", ROADS],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_container_profile_that_forbids_user_namespaces_leaves_uml_and_says_why(learner, seccomp_deny):
    roads = _roads(learner, str(seccomp_deny), "unshare", "--")
    assert roads["kernel"] == "uml" and roads["mode"] == "live"
    assert not roads["userns"][0] and "unshare failed: Operation not permitted" in roads["userns"][1]
    assert "seccomp filter" in roads["userns"][1]
    assert "nor in a user namespace (" in roads["why"] and "the UML kernel can" in roads["why"]


def test_no_ptrace_and_no_user_namespaces_leave_replay_and_say_both(learner, seccomp_deny):
    roads = _roads(learner, str(seccomp_deny), "ptrace,unshare", "--")
    assert roads["kernel"] is None and roads["mode"] == "replay"
    assert roads["ptrace"][0] is False and "PTRACE_TRACEME (EPERM" in roads["ptrace"][1]
    assert "live impossible" in roads["why"] and "no ptrace" in roads["why"] and "unshare failed" in roads["why"]
    assert "the UML kernel cannot run the lab: no ptrace" in roads["uml_refused"]
    done = subprocess.run(["runuser", "-u", learner.pw_name, "--", str(seccomp_deny), "ptrace,unshare", "--",
                           str(Path(PYTHON).with_name("tcplab")), "doctor", "--no-fidelity"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "PROBLEM: no live lab for this user" in done.stdout and "the course replays recorded runs" in done.stdout


def test_no_ptrace_alone_keeps_the_user_namespace(learner, seccomp_deny):
    roads = _roads(learner, str(seccomp_deny), "ptrace", "--")
    assert roads["kernel"] == "userns" and roads["userns"] == [True, ""]
    assert roads["ptrace"][0] is False


SMALL_TMPDIR = textwrap.dedent("""
    import json, os
    from tcplab.lab import agent_kernel, uml
    before = {r.umid for r in agent_kernel.AgentRecord.all()}
    try:
        uml.UmlKernel().start()
        said = None
    except uml.UmlError as exc:
        said = str(exc)
    print(json.dumps({"said": said, "records": sorted({r.umid for r in agent_kernel.AgentRecord.all()} - before),
                      "left": [n for n in os.listdir(os.environ["TMPDIR"]) if n.startswith("tcplab-")]}))
""")


def test_a_small_memory_folder_for_uml_is_named_with_what_it_needs(learner, shared_dir):
    """A container's 64 MB /dev/shm as the UML kernel's memory folder (TMPDIR): refused before
    anything starts, saying where, how much and what to set."""
    small = shared_dir / "shm"
    small.mkdir()
    script = (f"mount -t tmpfs -o size=64m,mode=1777 tcplab-test-shm {small} && "
              f"exec runuser -u {learner.pw_name} -- env TMPDIR={small} {PYTHON} -c '{SMALL_TMPDIR}'")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["said"] and f"the UML kernel keeps its memory in {small}, which has 6" in said["said"]
    assert "it needs at least 256 MiB (set TMPDIR to a folder with room)" in said["said"]
    assert said["records"] == [] and said["left"] == []


UNWRITABLE_HOME = textwrap.dedent("""
    import json, os
    from tcplab.lab import uml
    from tcplab.runs import runs_root
    print(json.dumps({"cache": str(uml.cache_dir()), "runs": str(runs_root())}))
""")


def test_an_unwritable_home_sends_the_labs_files_to_tmp_and_says_so(learner):
    done = subprocess.run(["runuser", "-u", learner.pw_name, "--", "env", "HOME=/proc", "XDG_CACHE_HOME=",
                           PYTHON, "-c", UNWRITABLE_HOME], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    uid = learner.pw_uid
    assert said["cache"] == f"/tmp/tcplab-{uid}/cache/uml" and said["runs"] == f"/tmp/tcplab-{uid}/runs"
    assert f"tcplab: /proc/.cache cannot be written by this user (uid {uid}): the UML kernel's files go to " \
           f"/tmp/tcplab-{uid}/cache/uml instead" in done.stderr
