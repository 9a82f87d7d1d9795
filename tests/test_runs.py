"""Run records: atomic, crash-proof, failures marked, reloaded and re-analysed later."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tcplab import runs
from tcplab.runs import RunWriter, find_run, key_of, list_runs, load_run, record
from tcplab.units import ParameterError

PARAMS = {"path": {"rtt": 0.02}, "workload": {"name": "bulk", "size": 1000}, "observe": {"capture": "sender"}}


def test_record_is_hidden_until_finished_then_complete(tmp_path):
    writer = RunWriter("case-a", PARAMS, runs_dir=tmp_path)
    assert writer.dir.name.startswith(".") and writer.dir.is_dir()
    (in_progress,) = list_runs("case-a", runs_dir=tmp_path)
    assert in_progress.status == "running"  # its writer (this process) is alive
    assert find_run("case-a", writer.key, runs_dir=tmp_path) is None
    writer.write_table("telemetry.parquet", pd.DataFrame({"time": [1.0, 2.0], "cwnd": [10.0, 20.0]}))
    writer.write_log("server.log", "hello\n")
    run = writer.finish()
    assert run.dir == tmp_path / "case-a" / writer.run_id and not run.dir.name.startswith(".")
    assert not any(p.name.startswith(".") for p in (tmp_path / "case-a").iterdir())
    assert run.status == "complete" and run.key == key_of(PARAMS) and run.params == PARAMS
    assert sorted(run.files) == ["logs/server.log", "telemetry.parquet"]
    assert run.telemetry.cwnd.tolist() == [10.0, 20.0]
    assert run.trace.empty and run.pcap is None
    assert find_run("case-a", key_of(PARAMS), runs_dir=tmp_path).dir == run.dir


def test_equal_params_equal_key_and_newest_wins(tmp_path):
    first = RunWriter("c", PARAMS, runs_dir=tmp_path).finish()
    second = RunWriter("c", dict(reversed(list(PARAMS.items()))), runs_dir=tmp_path).finish()
    assert first.key == second.key
    assert find_run("c", first.key, runs_dir=tmp_path).dir == second.dir
    assert find_run("c", key_of({**PARAMS, "path": {"rtt": 0.04}}), runs_dir=tmp_path) is None


def test_a_new_unset_parameter_keeps_old_runs_found(tmp_path):
    old = RunWriter("c", PARAMS, runs_dir=tmp_path).finish()
    grown = {**PARAMS, "workload": {**PARAMS["workload"], "write_rate": None}}
    assert key_of(grown) == key_of(PARAMS)
    assert find_run("c", key_of(grown), runs_dir=tmp_path).dir == old.dir
    # Set, the new parameter makes a different run.
    assert key_of({**PARAMS, "workload": {**PARAMS["workload"], "write_rate": 1e6}}) != key_of(PARAMS)


def test_failed_block_is_marked_failed_and_keeps_logs(tmp_path):
    with pytest.raises(RuntimeError, match="workload hung"):
        with record("c", PARAMS, runs_dir=tmp_path) as writer:
            writer.write_log("client.log", "connecting...\n")
            raise RuntimeError("workload hung")
    (run,) = list_runs("c", runs_dir=tmp_path)
    assert run.status == "failed" and "workload hung" in run.error
    assert run.log("client.log") == "connecting...\n"
    assert "RuntimeError" in run.log("error.log")
    assert find_run("c", run.key, runs_dir=tmp_path) is None


@pytest.mark.parametrize("moment", ["building", "published-but-running"])
def test_killed_writer_is_crashed_never_complete(tmp_path, moment):
    """kill -9 a writer: whatever it left is listed as crashed."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from tcplab.runs import RunWriter
        w = RunWriter("c", {{"x": 1}}, runs_dir={str(tmp_path)!r})
        if {moment!r} == "published-but-running":
            w._save("running", None)
            os.rename(w.dir, w.final_dir)
        print("ready", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        (alive,) = list_runs("c", runs_dir=tmp_path)
        assert alive.status == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    (run,) = list_runs("c", runs_dir=tmp_path)
    assert run.status == "crashed"
    assert find_run("c", key_of({"x": 1}), runs_dir=tmp_path) is None


def test_unreadable_partial_directory_is_crashed(tmp_path):
    (tmp_path / "c" / ".20200101T000000.000000-dead.partial").mkdir(parents=True)
    (run,) = list_runs(runs_dir=tmp_path)
    assert run.status == "crashed"


def test_bad_case_name_is_a_parameter_error(tmp_path):
    from tcplab.units import ParameterError

    with pytest.raises(ParameterError, match="case"):
        RunWriter("../escape", PARAMS, runs_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_data_root_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPLAB_DATA", str(tmp_path))
    assert runs.runs_root() == tmp_path / "runs"
    monkeypatch.delenv("TCPLAB_DATA")
    assert runs.runs_root() == runs.Path(runs.__file__).resolve().parents[2] / "data" / "runs"


def test_runs_go_to_the_users_own_folder_when_the_checkout_is_not_theirs(tmp_path, monkeypatch):
    monkeypatch.delenv("TCPLAB_DATA", raising=False)
    checkout = runs.Path(runs.__file__).resolve().parents[2] / "data" / "runs"
    real_access = os.access
    # A user who may not write the shared checkout: its data folder reads as read-only.
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).startswith(str(checkout.parent))
                        else real_access(path, mode))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    assert runs.runs_root() == tmp_path / "share" / "tcplab" / "runs"
    monkeypatch.setenv("XDG_DATA_HOME", str(checkout.parent / "no-home-here"))  # reads as read-only too
    assert runs.runs_root() == runs.Path(f"/tmp/tcplab-{os.getuid()}") / "runs"


def test_environment_names_versions_and_tools():
    env = runs.environment(backend="delayline", cc={"client": "bbr", "server": "bbr"})
    assert env["kernel"] == os.uname().release and env["backend"] == "delayline"
    assert set(env["libraries"]) == {"tcplab", "pyroute2", "numpy", "pandas"}
    assert env["tools"]["tcpdump"].startswith("tcpdump version")
    assert "iproute2" in env["tools"]["ss"]


@pytest.mark.kernel
def test_reload_and_reanalyse_a_captured_run(root, tmp_path):
    from tcplab.analysis.packets import read_packets
    from tcplab.lab import NetPath
    from tcplab.observe.capture import Capture, points_for

    from observe.helpers import transfer  # tests/ is on sys.path (rootdir-relative import)

    port = 5341
    with record("reanalyse", PARAMS, runs_dir=tmp_path) as writer:
        with NetPath(rtt="2ms") as path:
            with Capture(points_for(path, "sender", "server"), writer.dir, port) as capture:
                transfer(path, port, 100_000)
            writer.write_json("sysctl.json", path.sysctl_snapshot())
        writer.pcaps = [s.file for s in capture.stats]
        writer.observe = {"capture": [s.to_dict() for s in capture.stats]}
    run = load_run(writer.dir)
    assert run.status == "complete" and run.pcap == run.dir / "server-eth0.pcap"
    assert run.sysctls["server"]["net.ipv4.tcp_congestion_control"]
    packets = read_packets(run.pcap).packets
    assert len(packets) == run.observe["capture"][0]["captured"]
    assert packets.len.sum() == 100_000


def _shipped_records():
    from tcplab.cases.replay import replay_root

    return sorted(p.parent for p in replay_root().glob("*/*/run.json"))


def test_every_shipped_record_rebuilds_its_parameter_sets_with_the_same_key():
    # Typed end to end: a record's path, workload and observation sets come back as the
    # parameter sets that made it, and they make the same run key again.
    from tcplab.experiment import run_params
    from tcplab.lab import PathSpec
    from tcplab.observe import ObserveSpec
    from tcplab.traffic import WORKLOADS, Workload

    records = [load_run(d) for d in _shipped_records()]
    assert len(records) > 50
    kinds = set()
    for run in records:
        spec, workload, observe = PathSpec.of_run(run), Workload.of_run(run), ObserveSpec.of_run(run)
        assert isinstance(spec, PathSpec) and isinstance(observe, ObserveSpec)
        assert isinstance(workload, WORKLOADS[run.params["workload"]["name"]])
        rebuilt = run_params(spec, workload, observe, run.params.get("repetition", 1))
        assert key_of(rebuilt) == key_of(run.params), run.dir
        kinds.add(workload.name)
    assert {"bulk", "reqresp", "slowreader"} <= kinds


def test_a_record_from_another_kernel_loads_and_says_what_it_ran(tmp_path):
    # Made where a congestion control and a sysctl exist that this kernel may lack: the record
    # loads (no check against this machine), its own values are still checked.
    params = {"path": {"rtt": 0.04, "cc": "no-such-cc", "sysctls": {"net.ipv4.tcp_no_such_knob": 1},
                       "shapes": {"to_server": {"delay": 0.02, "jitter": 0.0, "loss": 0.0, "rate": None, "queue": None},
                                  "to_client": {"delay": 0.02, "jitter": 0.0, "loss": 5.0, "rate": None, "queue": None}}},
              "workload": {"name": "reqresp", "cc": "no-such-cc", "request_size": 4000, "response_size": 10},
              "observe": {"capture": "sender"}}
    run = RunWriter("case-k", params, runs_dir=tmp_path).finish()
    from tcplab.lab import PathSpec
    from tcplab.traffic import Workload

    spec, workload = PathSpec.of_run(run), Workload.of_run(run)
    assert spec.cc == "no-such-cc" and spec.sysctls == {"net.ipv4.tcp_no_such_knob": 1}
    assert spec.to_client.loss == 5.0 and spec.to_server is None  # only the odd direction
    assert workload.sender() == "client" and workload.receiver() == "server"
    with pytest.raises(ParameterError, match="rtt"):
        PathSpec.of_run(RunWriter("case-k", {**params, "path": {**params["path"], "rtt": -1}}, runs_dir=tmp_path).finish())
