"""The host's kernel without root, for real: an unprivileged learner (a system user made by
``make test-users``) runs the lab in a user namespace of their own — namespaces, veths, the
delay line with its NFQUEUE inside, tbf, capture, ss, per-namespace sysctls — and what a user
namespace cannot do is said by name. Nothing is left behind when the learner's process dies.

The learner's code runs through ``runuser`` (this suite runs as root), from the checkout and
its .venv, which every user can read (``make setup`` builds the .venv from /usr/bin/python3).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import learners
import pytest

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
LEARNER = learners.LEARNERS[0]


@pytest.fixture(scope="module")
def learner():
    """The learner's account, checked able to read the checkout and its .venv."""
    account = learners.account(LEARNER)
    readable = subprocess.run(["runuser", "-u", LEARNER, "--", str(PYTHON), "-c", "import tcplab"], cwd=ROOT,
                              capture_output=True, text=True)
    if readable.returncode != 0:
        pytest.fail(f"{LEARNER} cannot run the checkout's Python ({PYTHON}) from {ROOT}: clone it where other users "
                    f"can read it, and `make setup PYTHON=/usr/bin/python3`.\n{readable.stderr[-600:]}")
    yield account
    assert learners.processes(account.pw_uid) == [], "a learner's process outlived its test"


def as_learner(code: str, *args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """``code`` run by the learner with the checkout's Python; its stdout's last line is JSON."""
    return subprocess.run(["runuser", "-u", LEARNER, "--", "env", *(f"{k}={v}" for k, v in (env or {}).items()),
                           str(PYTHON), "-c", textwrap.dedent(code), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _answer(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def learner_dir(learner):
    """A folder of the learner's own (pytest's are root's, which the learner cannot enter)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tcplab-learner-"))
    os.chown(folder, learner.pw_uid, learner.pw_gid)
    yield folder
    shutil.rmtree(folder)


def test_auto_takes_the_user_namespace_and_says_why(learner):
    said = _answer(as_learner("""
        import json
        from tcplab.lab.kernels import choose_kernel, choose_mode
        choice, mode = choose_kernel("auto"), choose_mode("auto")
        print(json.dumps({"kernel": choice.kernel, "why": choice.why, "where": mode.where}))
    """))
    assert said["kernel"] == "userns"
    assert said["why"] == "not root; this user may make user namespaces"
    assert said["where"].startswith("the host kernel in a user namespace: ")


def test_a_delay_line_path_in_the_users_namespace_measures_as_on_the_host(learner, learner_dir):
    """RTT over TCP and goodput through the delay line and tbf, a capture of both ends, ss
    telemetry and a congestion control the host restricts (set per route) — all without root."""
    runs = learner_dir
    said = _answer(as_learner("""
        import json, socket, sys, threading
        from tcplab.analysis.packets import read_packets
        from tcplab.experiment import Experiment
        from tcplab.lab import NetPath, fidelity, netns, sysctl
        from tcplab.traffic import AppResult, Bulk

        def plain_connection_cc(path):
            # The congestion control both ends of a connection that asks for none get (curl's, iperf's).
            got, ready = {}, threading.Event()
            def serve():
                with socket.create_server((path.server.address, 5999)) as server:
                    ready.set()
                    conn, _ = server.accept()
                    got["server"] = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0").decode()
                    conn.close()
            def connect():
                with socket.create_connection((path.server.address, 5999)) as conn:
                    return conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0").decode()
            listener = threading.Thread(target=netns.run_in, args=(path.server.ns, serve))
            listener.start()
            ready.wait(10)
            got["client"] = netns.run_in(path.client.ns, connect)
            listener.join(10)
            return got

        # A congestion control the host does not let a namespace make its default, if there is one.
        restricted = [c for c in sysctl.available_cc() if c not in sysctl.allowed_cc()]
        cc = restricted[0] if restricted else sysctl.available_cc()[0]
        with NetPath(rtt="20ms", rate="100mbit", cc=cc, kernel="userns") as path:
            rtt = path.remote.call(fidelity.tcp_rtt, path, count=20)
            run = Experiment(path, Bulk(size="2MB", sndbuf="16KB"), case="userns-test", runs_dir=sys.argv[1],
                             capture="both").run()
            listed = path.router.run(["ip", "netns", "list"]).stdout
            qdiscs = path.router.run(["tc", "qdisc", "show", "dev", "to-server"]).stdout
            nfqueue = path.router.run(["iptables", "-t", "raw", "-S", "PREROUTING"]).stdout
            app = AppResult.of_run(run)
            sockets = app.sockets
            plain = path.remote.call(plain_connection_cc, path)
        print(json.dumps({
            "backend": path.backend, "kind": run.environment["lab_kernel"], "status": run.status,
            "rtt_median": rtt.median, "rtt_min": rtt.kernel_min_rtt, "goodput": app.goodput_bps,
            "sndbuf": sockets["server"]["sndbuf"], "cc": cc, "restricted": bool(restricted),
            "env_cc": run.environment["cc"], "socket_cc": sockets["server"].get("cc"), "plain_cc": plain,
            "packets": len(read_packets(run.pcap).packets), "telemetry": len(run.telemetry),
            "owner": __import__("os").stat(run.dir / "run.json").st_uid, "uid": __import__("os").getuid(),
            "netns": listed, "qdiscs": qdiscs, "nfqueue": nfqueue}))
    """, str(runs), timeout=180))
    assert said["kind"] == "userns" and said["status"] == "complete" and said["backend"] == "delayline"
    assert 0.020 <= said["rtt_min"] and said["rtt_median"] < 0.020 * 1.05, said
    assert said["sndbuf"] == 32768  # the kernel doubled 16 KB, as on the host
    assert said["packets"] > 1400 and said["telemetry"] > 10  # both ends captured; ss sampled
    assert said["owner"] == said["uid"]  # the record is the learner's own
    assert "tcplab-" in said["netns"] and "tbf" in said["qdiscs"] and "NFQUEUE" in said["nfqueue"]
    # The congestion control ran where the host restricts it, set on the routes: the record says so.
    assert said["env_cc"] == {"client": said["cc"], "server": said["cc"]}
    assert said["plain_cc"] == {"client": said["cc"], "server": said["cc"]}  # both ends, from the routes
    assert said["socket_cc"] == "bbr"  # the workload's own choice (Bulk's default) still wins, as on the host
    # Nothing of the learner's lab is visible in the host's own namespace list.
    assert not [n for n in os.listdir("/var/run/netns") if n.startswith("tcplab-")] \
        if os.path.isdir("/var/run/netns") else True


def test_host_global_settings_and_admin_actions_are_refused_by_name_and_auto_sends_that_path_to_uml(learner):
    said = _answer(as_learner("""
        import json
        from tcplab.lab import NetPath, PathSpec, sysctl
        from tcplab.lab.kernels import HostGlobalError, path_kernel
        now = int(sysctl.read("net.core.wmem_max"))
        spec = PathSpec(rtt="2ms", host={"net.core.wmem_max": now + 4096})
        try:
            NetPath(spec.replaced(kernel="userns")).start()
            refused = None
        except HostGlobalError as exc:
            refused = str(exc)
        choice = path_kernel(spec, "userns")
        same = path_kernel(PathSpec(rtt="2ms", host={"net.core.wmem_max": now}), "userns")
        flushing = path_kernel(PathSpec(rtt="2ms"), "userns", ("tcp_metrics flush",))
        # The kernel keeps deleting cached metrics for the machine's administrator: asked in a
        # user namespace's lab, the flush says which path can, before iproute2's bare EPERM.
        with NetPath(rtt="2ms", kernel="userns") as path:
            try:
                path.server.flush_tcp_metrics()
                flush = None
            except PermissionError as exc:
                flush = str(exc)
        print(json.dumps({"now": now, "refused": refused, "kernel": choice.kernel, "why": choice.why,
                          "same": same.kernel, "flushing": flushing.__dict__, "flush": flush}))
    """))
    assert said["refused"] and f"net.core.wmem_max {said['now']} → {said['now'] + 4096}" in said["refused"]
    assert "a user namespace can read" in said["refused"]
    assert said["kernel"] == "uml" and "host-global" in said["why"]
    assert said["same"] == "userns"  # a value already in force needs no change
    assert said["flushing"]["kernel"] == "uml" and "tcp_metrics flush" in said["flushing"]["why"]
    assert said["flush"] and "needs=['tcp_metrics flush']" in said["flush"]


def test_the_learners_death_ends_their_lab_and_leaves_nothing(learner):
    """kill -9 of the learner's process: the watchdog ends the namespace's processes (its own
    PID namespace), the namespaces go with them, and the learner's cleanup removes the record."""
    child = subprocess.Popen(["runuser", "-u", LEARNER, "--", str(PYTHON), "-c", textwrap.dedent("""
        import json, os, sys
        from tcplab.lab import NetPath
        path = NetPath(rtt="10ms", rate="10mbit", kernel="userns").start()
        path.server.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 &"])
        print(json.dumps({"owner": os.getpid(), "workdir": path.remote._record.workdir, "umid": path.remote.umid}),
              flush=True)
        sys.stdin.read()
    """)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    facts = json.loads(child.stdout.readline())
    # the owner, the shepherd, unshare, the agent, its two delay lines, sleep
    assert len(learners.processes(learner.pw_uid)) >= 6
    os.kill(facts["owner"], signal.SIGKILL)
    child.wait()
    assert learners.wait_gone(learner.pw_uid, 15) == [], "the learner's lab outlived its owner"
    done = subprocess.run(["runuser", "-u", LEARNER, "--", str(PYTHON.with_name("tcplab")), "cleanup"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not Path(facts["workdir"]).exists()
    # The shepherd removed the work folder itself; the record is the cleanup's to remove.
    assert facts["umid"] not in done.stdout or f"ended user-namespace lab {facts['umid']}" in done.stdout


NO_USERNS = """
import json
from tcplab.lab import doctor
from tcplab.lab.kernels import choose_kernel
from tcplab.lab.userns import probe
print(json.dumps({"probe": probe(), "choice": choose_kernel("auto").__dict__, "kernels": doctor.lab_kernels()}))
"""


def test_no_user_namespaces_is_said_by_name_and_auto_takes_uml(learner):
    """user.max_user_namespaces = 0, as an administrator sets it, but only for the learner's
    process: the limit is per user namespace, so it is set in one the test makes around it
    (the learner keeps their uid there and loses every capability before tcplab starts)."""
    script = ("echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all --ambient-caps=-all "
              f"--bounding-set=-all {PYTHON} -c '{NO_USERNS}'")
    done = subprocess.run(["runuser", "-u", LEARNER, "--", "unshare", "--user", f"--map-user={learner.pw_uid}",
                           f"--map-group={learner.pw_gid}", "--keep-caps", "sh", "-c", script],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    said = _answer(done)
    ok, why = said["probe"]
    assert not ok and "user.max_user_namespaces is 0" in why, why
    assert said["choice"]["kernel"] == "uml"
    assert "nor in a user namespace (" in said["choice"]["why"] and "max_user_namespaces" in said["choice"]["why"]
    assert said["kernels"]["userns"]["ok"] is False


def test_doctor_shows_the_learners_road_and_what_a_user_namespace_cannot_do(learner):
    done = subprocess.run(["runuser", "-u", LEARNER, "--", str(PYTHON.with_name("tcplab")), "doctor", "--no-fidelity"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "userns" in out and "the lab runs on   userns (not root; this user may make user namespaces)" in out
    assert "root              yes, of its user namespace" in out
    assert "cannot change host-global settings (net.core.rmem_max = " in out
    assert "tracefs           no" in out
