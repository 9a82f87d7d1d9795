"""Experiments end to end: observed workloads, records, the `tcplab run` command, failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tcplab.commands.run import split_settings
from tcplab.experiment import Experiment, ExperimentFailed
from tcplab.lab import NetPath
from tcplab.runs import list_runs
from tcplab.analysis.packets import read_packets
from tcplab.traffic import WORKLOADS, AppResult
from tcplab.units import ParameterError

TCPLAB = Path(sys.executable).with_name("tcplab")


@pytest.mark.kernel
def test_slow_reader_shows_zero_window_and_a_full_receive_queue(root, tmp_path):
    workload = WORKLOADS["slowreader"](size="1MB", rcvbuf="64KB", pause_after="128KB", pause_for="500ms",
                                       port=5351)
    with NetPath(rtt="10ms", rate="50mbit") as path:
        run = Experiment(path, workload, case="slow", runs_dir=tmp_path).run()
    app = AppResult.of_run(run)
    assert run.status == "complete" and app.ok and app.bytes == 1 << 20
    assert run.pcap == run.dir / "server-eth0.pcap"  # the sender's side, by default
    packets = read_packets(run.pcap).packets
    assert packets.zero_window.any()
    assert len(packets) == run.observe["capture"][0]["captured"]
    client = run.telemetry[(run.telemetry.side == "client") & (run.telemetry.state == "ESTAB")]
    # While the reader pauses, its queue fills the (doubled) 64 KB buffer.
    assert (client.skmem_r / client.skmem_rb).max() > 0.8
    assert client.recv_q.max() > 64 * 1024
    assert run.trace.event.eq("tcp_probe").any()
    assert run.params["workload"]["name"] == "slowreader" and run.params["observe"]["capture"] == "sender"
    env = run.environment
    assert env["backend"] == "delayline" or env["backend"] == "netem"
    assert set(env["cc"]) == {"client", "server"} and env["tools"]["tcpdump"]
    assert set(run.sysctls) == {"client", "router", "server"}
    # nstat counters the run moved: the reader's TCP announced the closed window and its reopening.
    assert run.counters["client"]["TcpExtTCPToZeroWindowAdv"] >= 1
    assert run.counters["client"]["TcpExtTCPFromZeroWindowAdv"] >= 1
    # How much the machine disturbed the run, read in the lab's kernel around the transfer.
    health = run.observe["health"]
    assert health["wall_s"] >= 0.5 and isinstance(health["disturbed"], list)
    # The lab's programs' lateness over the transfer, from the ss sampler's schedule: a share.
    assert 0.0 <= health["programs_late_share"] < 1.0
    if env["backend"] == "delayline":  # both directions' delay lines, this run's packets only
        lines = health["delay_line"]
        assert len(lines) == 2 and all(q["count"] > 100 and q["late_p50_s"] <= q["late_p99_s"] for q in lines.values())


@pytest.mark.kernel
def test_cli_run_bulk_json(root, tmp_path):
    # 128 KB is under stock Linux's wmem_max (212992): the run needs no raised limit on any machine
    out = subprocess.run(
        [str(TCPLAB), "run", "bulk", "--set", "rtt=10ms", "--set", "rate=50mbit", "--set", "size=2MB",
         "--set", "sndbuf=128KB", "--set", "port=5352", "--set", "interval=10ms",
         "--runs-dir", str(tmp_path), "--case", "cli", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["status"] == "complete"
    assert 10e6 < facts["goodput_bps"] < 50e6
    assert facts["duration_s"] > 0.3
    assert facts["sockets"]["server"]["sndbuf_requested"] == 128 * 1024
    assert facts["sockets"]["server"]["sndbuf"] == 2 * 128 * 1024
    assert facts["backend"] in ("delayline", "netem") and facts["cc"]["server"] == "bbr"
    (run,) = list_runs("cli", runs_dir=tmp_path)
    assert str(run.dir) == facts["run_dir"] and run.observe["telemetry"]["interval_s"] == 0.01


def test_cli_bad_set_key_exits_2_before_anything(tmp_path):
    out = subprocess.run([str(TCPLAB), "run", "bulk", "--set", "rtt=10ms", "--set", "sndbuff=16KB",
                          "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "sndbuff" in out.stderr and "sndbuf" in out.stderr and "rtt" in out.stderr
    assert not any(tmp_path.iterdir())


def test_cli_help_lists_workloads_and_parameters():
    out = subprocess.run([str(TCPLAB), "run", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for name in WORKLOADS:
        assert f"\n{name}: " in out.stdout
    assert "path parameters:" in out.stdout and "    rtt " in out.stdout and "default 64 KB" in out.stdout


def test_split_settings_shares_cc_and_rejects_unknown():
    path, workload, observe = split_settings(WORKLOADS["bulk"], {"rtt": "10ms", "size": "1MB", "cc": "reno",
                                                                  "capture": "both"})
    assert path == {"rtt": "10ms", "cc": "reno"} and workload == {"size": "1MB", "cc": "reno"}
    assert observe == {"capture": "both"}
    with pytest.raises(ParameterError, match="unknown parameter"):
        split_settings(WORKLOADS["bulk"], {"rate_limit": "1"})


@pytest.mark.kernel
def test_hanging_workload_is_recorded_failed_with_logs(root, tmp_path):
    workload = WORKLOADS["slowreader"](size="1MB", pause_after="64KB", pause_for="60s", timeout="1.5s", port=5353)
    with NetPath(rtt="4ms") as path:
        with pytest.raises(ExperimentFailed, match="timed out") as caught:
            Experiment(path, workload, case="hang", runs_dir=tmp_path).run()
    run = caught.value.run
    (listed,) = list_runs("hang", runs_dir=tmp_path)
    assert listed.dir == run.dir and listed.status == "failed"
    assert "WorkloadTimeout" in run.error
    assert {"server.log", "client.log", "error.log"} <= set(os.listdir(run.dir / "logs"))
    app = AppResult.of_run(run)
    assert app is not None and not app.ok
    # What was observed before the timeout is kept.
    assert run.pcap is not None and read_packets(run.pcap).packets.zero_window.any()
    assert not run.telemetry.empty
