"""The User-mode Linux lab kernel, for real: boots Debian's linux.uml, builds a netem path in
it, runs an experiment there, and leaves nothing behind when its owner is killed."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcplab.experiment import Experiment
from tcplab.lab import NetPath, PathSpec, agent_kernel, cleanup, fidelity, uml
from tcplab.observe import health
from tcplab.analysis.packets import read_packets
from tcplab.runs import COMPLETE
from tcplab.traffic import AppResult, Bulk
from tcplab.units import ParameterError

pytestmark = pytest.mark.kernel

BOOT = """
import json, sys
from tcplab.lab import uml
kernel = uml.UmlKernel(mem="512M").start()
print(json.dumps({"pgid": int(open(kernel._record.workdir + "/kernel.pgid").read()), "umid": kernel.umid,
                  "shepherd": kernel._proc.pid, "workdir": kernel._record.workdir}), flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def kernel():
    if uml.find_install() is None:
        pytest.fail(uml.missing_message())
    with uml.UmlKernel() as booted:
        yield booted


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _boot_in_child() -> tuple[subprocess.Popen, dict]:
    child = subprocess.Popen([sys.executable, "-c", BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    facts = json.loads(child.stdout.readline())
    assert _group_alive(facts["pgid"])
    return child, facts


def _wait_gone(pgid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        time.sleep(0.1)
    return False


def test_calls_run_in_the_second_kernel_and_exceptions_come_back_as_themselves(kernel):
    assert kernel.call(platform.release) == kernel.install.release != platform.release()
    assert kernel.info["modules_failed"] == [] and "sch_netem" in kernel.info["modules_loaded"]
    assert kernel.call(lambda a, b=1: a * b, 6, b=7) == 42
    with pytest.raises(ParameterError) as info:  # raised inside, rebuilt here with its fields
        kernel.call(PathSpec, rtt="-5ms")
    assert info.value.name == "rtt" and "inside the UML kernel" in "".join(getattr(info.value, "__notes__", []))


def test_a_netem_path_in_uml_delays_as_configured(kernel, monkeypatch):
    monkeypatch.setitem(agent_kernel._shared, "uml", kernel)
    with NetPath(rtt="20ms", rate="100mbit", backend="netem", kernel="uml") as path:
        assert path.remote is kernel and path.backend == "netem" and path.kernel == "uml"
        qdiscs = path.router.run(["tc", "qdisc", "show", "dev", "to-server"]).stdout
        assert "netem" in qdiscs and "delay 10ms" in qdiscs, qdiscs
        rtts = kernel.call(fidelity.tcp_rtt, path, count=20)
        # netem never delays less than asked, and the kernel's lowest round trip (tcp_info's
        # min_rtt) is the path's alone: at most 1 ms on top (health.BASE_RTT_SLACK_S, the least
        # slack health.base_rtt allows a run). The ping-pong's own samples add the program's
        # system calls, which in UML on a slow machine cost 130-157 us each (median 26.5 ms on
        # CI on 2026-11-29, min_rtt 20.4).
        assert 0.020 <= rtts.kernel_min_rtt <= 0.020 + health.BASE_RTT_SLACK_S, rtts
        assert path.describe()["kernel"] == {"kind": "uml", "release": kernel.release}
    assert kernel.call(lambda: __import__("tcplab.lab.path").lab.path.OPENED_FOR_HOST) == {}


def test_an_experiment_in_uml_leaves_a_complete_record_on_the_host(kernel, monkeypatch, tmp_path):
    monkeypatch.setitem(agent_kernel._shared, "uml", kernel)
    with NetPath(rtt="10ms", rate="50mbit", kernel="uml") as path:
        run = Experiment(path, Bulk(size="1MB"), case="uml-test", runs_dir=tmp_path).run()
    assert run.status == COMPLETE and run.dir.parent.parent == tmp_path
    assert run.environment["lab_kernel"] == "uml" and run.environment["kernel"] == kernel.release
    assert run.environment["backend"] == "netem"
    assert run.params["path"]["kernel"] == "uml"
    app = AppResult.of_run(run)
    assert app.bytes == 1024 * 1024 and app.goodput_bps > 0
    assert len(read_packets(run.pcap).packets) > 700  # 1 MB in 1448-byte segments, plus ACKs, read back on the host


def test_an_object_held_in_uml_is_itself_in_calls_there_and_let_go_after(kernel, monkeypatch):
    from tcplab.rooms.tcp_mem import Ballast
    from tcplab.lab.kernels import call_in, held_in

    monkeypatch.setitem(agent_kernel._shared, "uml", kernel)
    agent = lambda: __import__("tcplab.lab.kernels").lab.kernels  # noqa: E731  (what the agent holds)
    with held_in("uml", Ballast, "1MB") as ballast:
        held = call_in("uml", lambda: ballast.held())  # the stand-in travels, the sockets stay there
        assert held["unread"] + held["unacknowledged"] >= 1 << 20
        assert kernel.call(lambda: len(agent().HELD)) == 1
        with pytest.raises(AttributeError, match="lives in the UML kernel"):
            ballast.held()
    assert kernel.call(lambda: len(agent().HELD)) == 0


def test_the_owners_death_ends_the_kernel_and_cleanup_removes_its_record():
    child, facts = _boot_in_child()
    child.kill()
    child.wait()
    assert _wait_gone(facts["pgid"]), "the UML kernel outlived its owner"
    assert facts["umid"] in cleanup.cleanup().uml_instances
    assert not Path(facts["workdir"]).exists()


def test_cleanup_ends_an_orphan_whose_watchdog_died_too():
    child, facts = _boot_in_child()
    os.kill(facts["shepherd"], signal.SIGKILL)
    child.kill()
    child.wait()
    time.sleep(0.5)
    assert _group_alive(facts["pgid"])  # nobody watches it any more
    report = cleanup.cleanup()
    assert facts["umid"] in report.uml_instances
    assert f"ended UML kernel {facts['umid']} (its owner was gone)" in report.lines()
    assert _wait_gone(facts["pgid"])


def test_bad_kernel_values_are_refused_by_name_before_anything_starts():
    with pytest.raises(ParameterError) as info:
        PathSpec(rtt="20ms", kernel="vm")
    assert info.value.name == "kernel" and "host" in info.value.accepted and "uml" in info.value.accepted


def test_a_missing_or_unreadable_kernel_is_said_clearly(monkeypatch, tmp_path):
    records = {r.umid for r in agent_kernel.AgentRecord.all()}
    monkeypatch.setattr(uml, "find_install", lambda: None)
    with pytest.raises(uml.UmlError, match="apt-get install user-mode-linux kmod"):
        uml.UmlKernel().start()
    absent = tmp_path / "absent"
    broken = uml.UmlInstall(binary=absent / "linux.uml", modules=absent / "6.1.0", modprobe=absent / "kmod")
    with pytest.raises(uml.UmlError, match="cannot be read by this user"):
        uml.UmlKernel(install=broken).start()
    assert {r.umid for r in agent_kernel.AgentRecord.all()} == records  # refused before anything started


#: Restores XMM0 through a short NT_X86_XSTATE buffer, as UML restores its processes' registers,
#: in a stopped child of its own, and reads the whole area back (with or without the preload).
RESTORE = r"""
import ctypes, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
TRACEME, GETREGSET, SETREGSET, NT_X86_XSTATE, SHORT, XMM0 = 0, 0x4204, 0x4205, 0x202, 832, 160
child = os.fork()
if child == 0:
    libc.ptrace(TRACEME, 0, None, None)
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.waitpid(child, os.WUNTRACED)
short = ctypes.create_string_buffer(SHORT)
assert libc.ptrace(GETREGSET, child, NT_X86_XSTATE, ctypes.byref(Iovec(ctypes.addressof(short), SHORT))) == 0
marker = bytes(range(1, 17))
short[XMM0:XMM0 + 16] = marker
restored = libc.ptrace(SETREGSET, child, NT_X86_XSTATE, ctypes.byref(Iovec(ctypes.addressof(short), SHORT)))
errno = ctypes.get_errno()
whole = ctypes.create_string_buffer(65536)
read = Iovec(ctypes.addressof(whole), 65536)
assert libc.ptrace(GETREGSET, child, NT_X86_XSTATE, ctypes.byref(read)) == 0
os.kill(child, signal.SIGKILL)
print(json.dumps({"restored": restored == 0, "errno": errno, "area": read.len,
                  "xmm0": whole.raw[XMM0:XMM0 + 16] == marker}))
"""


def test_the_preload_restores_registers_through_a_buffer_shorter_than_the_hosts_area():
    """The host takes a register restore only with its whole XSAVE area (about 11 KB with AMX),
    which Debian's UML 6.1 cannot hold; with the preload a short buffer restores what it holds."""
    def restore(env):
        out = subprocess.run([sys.executable, "-c", RESTORE], env={**os.environ, **env}, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    preload = uml.xstate_preload()
    assert preload is not None and preload.is_file()
    plain, preloaded = restore({"LD_PRELOAD": ""}), restore({"LD_PRELOAD": str(preload)})
    # Without it the host refuses a short buffer (EFAULT) exactly where its area is larger.
    assert plain["restored"] == (plain["area"] <= 832) and (plain["restored"] or plain["errno"] == 14)
    assert preloaded["restored"] and preloaded["xmm0"]
