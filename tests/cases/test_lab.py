"""CaseLab on the real kernel: live variants, reuse, the index, replay and its parameter check."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tcplab.cases import CaseLab, ReplayMissing, Trial, VariantTable, ms_tag, save, size_tag
from tcplab.cases.lab import RUN_TRIES
from tcplab.report import CasePage
from tcplab.cases.replay import replay_root
from tcplab.lab import PathSpec
from tcplab.lab.state import exclusive_measurement
from tcplab.observe import health
from tcplab.runs import Run, data_root
from tcplab.traffic import Bulk
from tcplab.units import ParameterError
from tcplab.words import speaking

TCPLAB = str(Path(sys.executable).with_name("tcplab"))
CASE = "98-fixture"
SPEC = PathSpec(rtt="10ms", rate="100mbit")


def small(**settings):
    return Bulk(size="256KB", cc="cubic", **settings)


def reusable(trial: Trial) -> bool:
    """Whether the reuse rule takes this run again: a run the machine disturbed (a busy
    machine's, whose last try stood) is run anew, so a test under load checks that instead."""
    return not health.reasons_of(trial.run)


@pytest.fixture
def dirs(tmp_path):
    return {"runs_dir": tmp_path / "runs", "replay_dir": tmp_path / "replay"}


@pytest.fixture
def recorded(root, dirs):
    """One case run live (a variant and a kept value), then saved as replay data."""
    lab = CaseLab(CASE, mode="live", **dirs)
    trial = lab.run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    kept = lab.keep("answer", lambda: {"rtt_ms": 10, "values": [1, 2]})
    save(CASE, **dirs)
    return lab, trial, kept


def test_bad_mode_and_profile_are_refused_by_name(dirs):
    with pytest.raises(ParameterError) as info:
        CaseLab(CASE, mode="recorded", **dirs)
    assert info.value.name == "mode" and "live" in info.value.accepted
    with pytest.raises(ParameterError) as info:
        CaseLab(CASE, profile="fast", **dirs)
    assert info.value.name == "profile"


def test_auto_mode_is_live_where_the_lab_can_run_else_replay(dirs, monkeypatch):
    monkeypatch.setattr("tcplab.lab.kernels.host_can_run", lambda: (True, ""))
    lab = CaseLab(CASE, mode="auto", **dirs)
    assert lab.mode == "live" and lab.kernel == "host"
    monkeypatch.setattr("tcplab.lab.kernels.host_can_run", lambda: (False, "not root"))
    monkeypatch.setattr("tcplab.lab.kernels.userns_can_run", lambda: (True, ""))
    lab = CaseLab(CASE, mode="auto", **dirs)  # without root, the host's kernel in a user namespace
    assert lab.mode == "live" and lab.kernel == "userns" and "not root" in lab.kernel_why
    monkeypatch.setattr("tcplab.lab.kernels.userns_can_run", lambda: (False, "user.max_user_namespaces is 0"))
    monkeypatch.setattr("tcplab.lab.kernels.uml_can_run", lambda: (True, ""))
    lab = CaseLab(CASE, mode="auto", **dirs)  # without either, the UML kernel runs the lab
    assert lab.mode == "live" and lab.kernel == "uml" and "not root" in lab.kernel_why
    assert "max_user_namespaces" in lab.kernel_why
    monkeypatch.setattr("tcplab.lab.kernels.uml_can_run", lambda: (False, "no User-mode Linux kernel installed"))
    with pytest.raises(ReplayMissing):  # replay chosen, and this fixture case has no recorded data
        CaseLab(CASE, mode="auto", **dirs)


def test_pick_prefers_the_notebooks_value_then_the_profile(dirs):
    assert CaseLab(CASE, profile="quick", **dirs).pick(None, quick="4MB", full="22MB") == "4MB"
    assert CaseLab(CASE, profile="full", **dirs).pick(None, quick="4MB", full="22MB") == "22MB"
    assert CaseLab(CASE, profile="full", **dirs).pick("1MB", quick="4MB", full="22MB") == "1MB"


@pytest.mark.kernel
def test_live_variant_is_indexed_and_knows_its_buffers(recorded, dirs):
    lab, trial, kept = recorded
    assert trial.socket("server")["sndbuf"] == 32768  # the kernel doubles SO_SNDBUF
    assert trial.context().sndbuf_effective == 32768 and trial.context().rtt_s == pytest.approx(0.01)
    assert trial.app.bytes == 256 * 1024
    index = json.loads((dirs["runs_dir"] / CASE / "index.json").read_text())
    assert index["runs"] == {"sndbuf-16KB": trial.run.dir.name}
    assert index["kept"] == {"answer": kept} and index["backends"] == [lab.backend]
    assert lab.table().loc["sndbuf-16KB", "sender SO_SNDBUF"] == 32768


@pytest.mark.kernel
def test_same_parameters_reuse_the_recorded_run_unless_fresh(recorded, dirs, monkeypatch):
    _, first, _ = recorded
    with monkeypatch.context() as patched:
        if reusable(first):
            patched.setattr("tcplab.lab.NetPath.start", lambda self: pytest.fail("a reused run built a path"))
        again = CaseLab(CASE, mode="live", **dirs).run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    assert (again.run.dir == first.run.dir) == reusable(first)
    fresh_lab = CaseLab(CASE, mode="live", fresh=True, **dirs)
    fresh = fresh_lab.run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    assert fresh.run.dir != first.run.dir and fresh.run.key == first.run.key
    # Fresh means none from before this execution: the same variant asked for again in it, here
    # as the first of its repetitions (whose key is the single run's), is the run it just made.
    with monkeypatch.context() as patched:
        patched.setattr("tcplab.lab.NetPath.start", lambda self: pytest.fail("a run of this execution was made again"))
        repeated = fresh_lab.run("sndbuf-16KB#1", small(sndbuf="16KB"), path=SPEC, repetition=1)
    assert repeated.run.dir == fresh.run.dir
    index = json.loads((dirs["runs_dir"] / CASE / "index.json").read_text())
    assert index["runs"]["sndbuf-16KB"] == index["runs"]["sndbuf-16KB#1"] == fresh.run.dir.name


@pytest.mark.kernel
def test_a_new_execution_indexes_only_what_it_uses(recorded, dirs):
    lab = CaseLab(CASE, mode="live", **dirs)
    lab.run("unset", small(), path=SPEC)
    index = json.loads((dirs["runs_dir"] / CASE / "index.json").read_text())
    assert list(index["runs"]) == ["unset"] and index["kept"] == {}


@pytest.mark.kernel
def test_repetitions_are_distinct_runs_and_are_reused_as_such(root, dirs):
    first = CaseLab(CASE, mode="live", **dirs).repeat("unset", small(), path=SPEC, times=2)
    assert [t.label for t in first] == ["unset#1", "unset#2"]
    assert first[0].run.dir != first[1].run.dir
    again = CaseLab(CASE, mode="live", **dirs).repeat("unset", small(), path=SPEC, times=2)
    assert [a.run.dir == f.run.dir for a, f in zip(again, first)] == [reusable(f) for f in first]


@pytest.mark.kernel
def test_replay_gives_the_recorded_numbers_without_touching_the_system(recorded, dirs, monkeypatch):
    lab, trial, kept = recorded
    # A replay must never build a path.
    monkeypatch.setattr("tcplab.lab.NetPath.start", lambda self: pytest.fail("replay built a path"))
    replay = CaseLab(CASE, mode="replay", **dirs)
    again = replay.run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    assert again.replayed and again.goodput_bps == trial.goodput_bps
    assert len(again.packets.packets) == len(trial.packets.packets)
    assert replay.keep("answer", lambda: pytest.fail("replay computed a kept value")) == kept
    assert replay.live(lambda: pytest.fail("replay ran a live action")) is None
    assert replay.backend == lab.backend
    page = CasePage(replay)
    assert page.environment()["data"] == "recorded runs (replay)"
    assert "Replay" in page._repr_markdown_()
    with replay.path(SPEC) as stand_in:
        assert stand_in.spec == SPEC
    assert not list((dirs["replay_dir"] / CASE / "sndbuf-16KB").glob("logs"))


@pytest.mark.kernel
def test_replay_refuses_other_parameters_and_unknown_names(recorded, dirs):
    replay = CaseLab(CASE, mode="replay", **dirs)
    with pytest.raises(ReplayMissing, match="other parameters"):
        replay.run("sndbuf-16KB", small(sndbuf="32KB"), path=SPEC)
    with pytest.raises(ReplayMissing, match="other parameters"):
        replay.run("sndbuf-16KB", small(sndbuf="16KB"), path=PathSpec(rtt="20ms", rate="100mbit"))
    with pytest.raises(ReplayMissing, match="sndbuf-16KB"):
        replay.run("autotuned", small(), path=SPEC)
    with pytest.raises(ReplayMissing, match="answer"):
        replay.keep("question", dict)


def test_replay_without_recorded_data_says_how_to_make_it(dirs):
    with pytest.raises(ReplayMissing, match="tcplab replay save 98-fixture"):
        CaseLab(CASE, mode="replay", **dirs)


def test_replay_missing_is_said_in_the_pages_language_and_travels_as_itself():
    # A zh page's kernel asks for a value outside the recorded grid: the sentence is Chinese,
    # lists what was recorded, and comes back from a UML lab kernel (pickled) unchanged.
    with speaking("zh"):
        table = VariantTable.read("05-zero-window", replay_root() / "05-zero-window")
        with pytest.raises(ReplayMissing) as raised:
            table.run_of("ex1-rcvbuf-256KB-pause-60s")
    said = str(raised.value)
    assert "没有名为 'ex1-rcvbuf-256KB-pause-60s' 的变体" in said and "ex1-rcvbuf-256KB-pause-30s" in said, said
    assert "no variant" not in said
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is ReplayMissing and again.reason == "no_variant" and str(again) == said


def test_saving_a_case_never_run_live_is_a_parameter_error(dirs):
    with pytest.raises(ParameterError, match="no live runs"):
        save(CASE, **dirs)


def test_bad_label_is_refused_before_anything_runs(dirs):
    lab = CaseLab(CASE, mode="live", **dirs)
    with pytest.raises(ParameterError) as info:
        lab.run("../escape", small(), path=SPEC)
    assert info.value.name == "label"
    with pytest.raises(ParameterError) as info:
        lab.repeat("x", small(), path=SPEC, times=0)
    assert info.value.name == "repetitions"
    with pytest.raises(ParameterError) as info, lab.path(SPEC, needs=["sysctl write"]):
        pass
    assert info.value.name == "needs" and "tcp_metrics flush" in str(info.value)
    assert not (dirs["runs_dir"] / CASE).exists()


def test_measurements_take_turns(tmp_path, monkeypatch):
    monkeypatch.setattr("tcplab.lab.state.QUEUE_DIR", tmp_path / "queue")
    order, waited = [], []
    holding = threading.Event()

    def first():
        with exclusive_measurement():
            holding.set()
            time.sleep(0.3)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with exclusive_measurement(lambda place: waited.append(True)):
        order.append("second starts")
    thread.join()
    assert waited == [True] and order == ["first done", "second starts"]


def test_a_row_shows_the_buffers_autotuning_reached_beside_the_connect_time_ones():
    """From a shipped recording: the autotuned sender starts at 69 KB and grows to megabytes;
    the 16 KB one stays at the doubled 32 KB."""
    replay_dir = data_root() / "replay" / "01-send-buffer"
    auto = Trial("unset", Run.load(replay_dir / "unset")).row()
    pinned = Trial("sndbuf-16KB", Run.load(replay_dir / "sndbuf-16KB")).row()
    assert auto["sender tb max (ss)"] > 10 * auto["sender SO_SNDBUF"]
    assert pinned["sender tb max (ss)"] == pinned["sender SO_SNDBUF"] == 32768
    assert auto["receiver rb max (ss)"] > auto["receiver SO_RCVBUF"]


@pytest.mark.kernel
def test_a_measurement_outside_run_records_is_judged_like_a_run_and_replayed_with_its_verdict(root, dirs,
                                                                                               monkeypatch):
    calls = []

    def ping(path):
        calls.append(1)
        out = path.client.run(["ping", "-c", "3", "-i", "0.05", path.server.address]).stdout
        return {"received": out.count("bytes from")}

    lab = CaseLab(CASE, mode="live", **dirs)
    # Whether this machine is quiet right now is not what is tested: first no reading can be
    # judged disturbed (one try), then every reading is (RUN_TRIES tries).
    for limit in health.LIMITS:
        monkeypatch.setitem(health.LIMITS, limit, math.inf)
    with lab.path(PathSpec(rtt="10ms", backend="delayline")) as path:
        assert lab.measure("pings", path, lambda: ping(path)) == {"received": 3}
        assert lab.health() == (1, []) and len(calls) == 1
        # A machine too busy for any lateness at all: measured again, then kept as disturbed.
        monkeypatch.setitem(health.LIMITS, "delay_line_late_mean_s", -1.0)
        lab.measure("pings", path, lambda: ping(path))
    read, disturbed = lab.health()
    assert len(calls) == 1 + RUN_TRIES and read == 1 and disturbed
    assert all(line.startswith("pings: delay line queue") for line in disturbed)
    save(CASE, **dirs)
    replay = CaseLab(CASE, mode="replay", **dirs)
    with replay.path(PathSpec(rtt="10ms", backend="delayline")) as stand_in:
        assert replay.measure("pings", stand_in, lambda: pytest.fail("replay measured")) == {"received": 3}
    assert replay.health() == (read, disturbed)


@pytest.mark.kernel
def test_a_variant_reruns_from_the_shell_with_its_key_and_the_case_reuses_it(root, dirs):
    case = "01-send-buffer"  # a case of the course: the shell resolves "01" through its notebooks
    trial = CaseLab(case, mode="live", **dirs).run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    table = VariantTable.latest(case, runs_dir=dirs["runs_dir"])
    assert table.source == dirs["runs_dir"] / case and table.labels == ["sndbuf-16KB"]
    assert table.frame().loc["sndbuf-16KB", "sndbuf"] == "16 KB"
    out = subprocess.run([TCPLAB, "run", "--case", "01", "--variant", "sndbuf-16KB", "--runs-dir", str(dirs["runs_dir"]),
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    shell = Run.load(json.loads(out.stdout)["run_dir"])
    assert shell.case == case and shell.key == trial.run.key and shell.dir != trial.run.dir
    again = CaseLab(case, mode="live", **dirs).run("sndbuf-16KB", small(sndbuf="16KB"), path=SPEC)
    # The newest run with the variant's key is the shell's: the case takes it unless the machine disturbed it.
    assert (again.run.dir == shell.dir) == (not health.reasons_of(shell))


def test_labels_write_values_as_the_parameters_do():
    assert [size_tag(v) for v in ("16KB", 262144, "4MB", 131071, "1KB")] == ["16KB", "256KB", "4MB", "131071", "1KB"]
    assert [ms_tag(v) for v in ("40ms", "0.5s", "2.5ms")] == ["40", "500", "2.5"]


def test_a_repetition_of_a_lossy_path_draws_its_own_losses():
    from tcplab.cases.lab import _drawn_anew

    lossy = PathSpec(rtt="10ms", rate="100mbit", loss="1%")
    # The delay line's losses follow its seed: the same seed would drop the same packets again.
    assert [_drawn_anew(lossy, i).seed for i in (1, 2, 3)] == [1, 2, 3]
    assert _drawn_anew(lossy, 1) is lossy  # the first is the single run, under its key
    assert _drawn_anew(lossy, 2).loss == lossy.loss and _drawn_anew(lossy, 2).rtt == lossy.rtt
    assert _drawn_anew(SPEC, 3) is SPEC  # nothing random to draw: the same path, the same key
