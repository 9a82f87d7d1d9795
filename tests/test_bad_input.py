"""The bad-input matrix: every way in (``tcplab run --set``, ``tcplab lab``, ``tcplab report``,
``make report``, ``tcplab diagnose``, ``tcplab release``, a notebook's parameters through papermill ``-p``) refuses
a bad value with the parameter's name and what it accepts, exits with the bad-input code,
and touches nothing: no run record, no report directory, and (the autouse fixture of
conftest.py) no namespace, qdisc, iptables rule, sysctl or process. docs/testing.md's table of
exit codes and this table belong together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tcplab.course import available_cases, room

#: One shard more than the course has cases: a shard would have no case.
N_CASES = len(available_cases())
TOO_MANY_SHARDS = f"{N_CASES + 1}/{N_CASES + 1}"

ROOT = Path(__file__).resolve().parents[1]
TCPLAB = str(Path(sys.executable).with_name("tcplab"))
CAPTURE = ROOT / "data" / "replay" / "11-reading-ss"
#: What a notebook cell does once it touches the machine: builds a path or runs a variant.
TOUCHES = ("lab.path(", "lab.run(", "lab.sweep(", "Path(", "lab.holding(")


def _a_capture() -> Path:
    return next(CAPTURE.rglob("*.pcap"))


def _not_a_capture(tmp: Path) -> Path:
    path = tmp / "notes.pcap"
    path.write_text("these are notes, not packets\n")
    return path


# (surface, arguments, the parameter named, a piece of what it accepts)
MATRIX = [
    ("run", ["bulk", "--set", "rtt=-5ms"], "rtt", "from 0 ms to 20 s"),
    ("run", ["bulk", "--set", "rtt=fast"], "rtt", "a duration"),
    ("run", ["bulk", "--set", "rate=0"], "rate", "to 10 Gbit/s"),
    ("run", ["bulk", "--set", "loss=150%"], "loss", "from 0 % to 100 %"),
    ("run", ["bulk", "--set", "rtt=20ms", "--set", "jitter=30ms"], "jitter", "at most the delay"),
    ("run", ["bulk", "--set", "rtt=20ms", "--set", "delay=30ms"], "delay", "half of rtt"),
    ("run", ["bulk", "--set", "backend=tc"], "backend", "one of auto, netem, delayline"),
    ("run", ["bulk", "--set", "kernel=vax"], "kernel", "one of host, userns, uml"),
    ("run", ["slowreader", "--set", "drop_bare_acks_to=router"], "drop_bare_acks_to", "one of client, server"),
    ("run", ["bulk", "--set", "mtu=100"], "mtu", "from 576 to 9000"),
    ("run", ["bulk", "--set", "cc=warp"], "cc", "one of"),
    ("run", ["bulk", "--set", "initcwnd=0"], "initcwnd", "from 1 to 1000"),
    ("run", ["bulk", "--set", "ssthresh=1"], "ssthresh", "from 2 to 100000"),
    ("run", ["bulk", "--set", "offloads=maybe"], "offloads", "true or false"),
    ("run", ["bulk", "--set", "queue=-1"], "queue", "at least one packet"),
    ("run", ["bulk", "--set", "size=0"], "size", "(excluded)"),
    ("run", ["bulk", "--set", "direction=sideways"], "direction", "one of download, upload"),
    ("run", ["bulk", "--set", "sndbuf=10GB"], "sndbuf", "to 2 GB"),
    ("run", ["reqresp", "--set", "requests=0"], "requests", "from 1 to 100000"),
    ("run", ["bulk", "--set", "colour=red"], "colour", "path parameters"),
    ("run", ["bulk", "--set", "rtt"], "--set", "key=value"),
    ("run", ["teleport"], "WORKLOAD", "one of bulk"),
    ("run", ["--case", "99", "--variant", "unset"], "--case", "a case number or name"),
    # The case's variant table: the shipped replay data's runs, named as a runs folder.
    ("run", ["--case", "01", "--variant", "sndbuf-1KB", "--runs-dir", "{replay}"], "--variant", "sndbuf-16KB, sndbuf-16KB-cubic,"),
    ("run", ["--case", "01", "--variant", "unset", "--runs-dir", "{replay}", "--set", "rtt=-5ms"], "rtt",
     "from 0 ms to 20 s"),
    ("run", ["bulk", "--case", "01", "--variant", "unset"], "WORKLOAD", "none with --variant"),
    ("lab", ["--set", "rate=fast"], "rate", "a rate"),
    ("report", ["--cases", "99"], "CASES", "numbers/names of"),
    ("report", ["--profile", "huge"], "--profile", "'quick', 'full'"),
    ("report", ["--mode", "sometimes"], "--mode", "'auto', 'live', 'replay'"),
    ("report", ["--kernel", "vax"], "--kernel", "'host', 'uml', 'userns', 'auto'"),
    ("report", ["--edition", "teacher"], "--edition", "'student', 'instructor'"),
    ("report", ["--exercises", "some"], "--exercises", "'run', 'skip'"),
    ("report", ["--merge", "/nonexistent/shard-1", "--exercises", "skip"], "--merge", "--merge with --edition"),
    ("report", ["--formats", "docx"], "--formats", "one or more of html, pdf"),
    ("report", ["--shard", "0/3"], "--shard", "1 <= I <= N"),
    ("report", ["--shard", TOO_MANY_SHARDS], "--shard", f"at most the {N_CASES} selected"),
    ("report", ["--merge", "/nonexistent/shard-1"], "--merge", "directories written by tcplab report --shard"),
    ("report", ["--merge", "/nonexistent/shard-1", "--shard", "1/2"], "--merge", "--merge with --edition"),
    ("report", ["--language", "xx"], "--language", "one of en"),
    ("make", ["CASES=99"], "CASES", "numbers/names of"),
    ("make", ["PROFILE=huge"], "--profile", "'quick', 'full'"),
    ("make", ["EXERCISES=some"], "--exercises", "'run', 'skip'"),
    ("make", ["SHARD=two"], "--shard", "I/N"),
    ("make", ["LANG=xx"], "--language", "one of en"),
    ("diagnose", ["{not_a_capture}"], "notes.pcap", "not a pcap or pcapng file"),
    ("diagnose", ["{capture}", "--flow", "99"], "--flow", "a flow number from 0"),
    ("diagnose", ["{capture}", "--t-range", "5:1"], "--t-range", "A < B"),
    ("diagnose", ["{capture}", "--t-range", "soon"], "--t-range", "A:B in seconds"),
    ("release", ["99"], "CASES", "numbers/names of"),
    ("release", ["01", "--language", "xx"], "--language", "one of en"),
    ("release", ["01", "-o", "{a_file}"], "--output", "a folder for the students' notebooks"),
    ("release", ["01", "--reference", "/nonexistent/summary.json"], "--reference", "only with --assignment NAME"),
    ("release", ["01", "--assignment", "week 1", "--reference", "/nonexistent/summary.json"], "--assignment",
     "a name of letters, digits"),
    ("release", ["01", "--assignment", "week1", "--reference", "/nonexistent/summary.json"], "--reference",
     "the summary.json that tcplab report writes"),
    ("papermill", ["00-path-check", "rtt", "-5ms"], "rtt", "from 0 ms to 20 s"),
    ("papermill", ["00-path-check", "profile", "huge"], "profile", "one of quick, full"),
    ("papermill", ["03-bdp-sweep", "mode", "sometimes"], "mode", "one of auto, live, replay"),
    ("papermill", ["04-nagle-delayed-ack", "requests", "0"], "requests", "from 1 to 100000"),
    ("papermill", ["06-packet-loss", "rate", "fast"], "rate", "a rate"),
]


def _command(surface: str, args: list[str], tmp: Path) -> list[str]:
    reports = str(tmp / "reports")
    if surface == "make":
        return ["make", "--no-print-directory", "-C", str(ROOT), "report", *args, f"REPORTS_DIR={reports}"]
    if surface == "report":
        return [TCPLAB, "report", *args, "--reports-dir", reports]
    if surface == "papermill":
        notebook, name, value = args
        return [sys.executable, "-m", "papermill", "--no-progress-bar", "--log-level", "ERROR",
                str(room(notebook).notebook), str(tmp / "out.ipynb"), "-p", name, value]
    if surface == "diagnose":
        fill = {"capture": str(_a_capture()), "not_a_capture": str(_not_a_capture(tmp))}
        args = [a.format(**fill) for a in args]
    if surface == "release":
        if "-o" in args:  # a file where the folder should be
            (tmp / "notes.txt").write_text("")
            return [TCPLAB, surface, *(a.format(a_file=tmp / "notes.txt") for a in args)]
        return [TCPLAB, surface, *args, "-o", reports]
    if surface == "run":
        args = [a.format(replay=ROOT / "data" / "replay") for a in args]
    return [TCPLAB, surface, *args]


def _failing_cell_touched_nothing(executed: Path) -> None:
    """The notebook stopped in a cell at or before its first one that touches the machine,
    and that cell stopped before touching it: the refusal came first."""
    nb = nbformat.read(executed, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = next(i for i, c in enumerate(code) if any(o.get("output_type") == "error" for o in c.get("outputs", [])))
    ran_before = [c.source for c in code[:failed]]
    assert not any(mark in source for source in ran_before for mark in TOUCHES), ran_before


@pytest.mark.parametrize("surface, args, name, accepted", MATRIX, ids=[f"{m[0]}:{' '.join(m[1])}" for m in MATRIX])
def test_bad_input_is_refused_by_name_with_what_is_accepted_and_touches_nothing(tmp_path, surface, args, name,
                                                                                 accepted):
    data = tmp_path / "data"
    env = {**os.environ, "TCPLAB_DATA": str(data)}
    out = subprocess.run(_command(surface, args, tmp_path), capture_output=True, text=True, env=env, timeout=300)
    said = out.stdout + out.stderr
    assert name in said and accepted in said, said[-3000:]
    assert "Traceback" not in said or surface == "papermill", said[-3000:]
    if surface == "papermill":
        # papermill's own code for a notebook that raised; the ParameterError is the cell's.
        assert out.returncode == 1 and "ParameterError" in said
        _failing_cell_touched_nothing(tmp_path / "out.ipynb")
    else:
        assert out.returncode == 2, (out.returncode, said[-3000:])  # make's own code for a failed recipe is 2 too
    assert not data.exists(), sorted(str(p) for p in data.rglob("*"))
    assert not (tmp_path / "reports").exists()


#: The same refusals from a command that speaks Chinese (``--language zh``, or ``TCPLAB_LANG`` as a
#: zh page's kernel has it): the parameter keeps its name, the sentence and what it accepts are
#: Chinese, and nothing of the English sentence is left.
ZH_MATRIX = [
    ("run", ["bulk", "--set", "rtt=fast"], "rtt", "时长，例如 20ms"),
    ("run", ["bulk", "--set", "initcwnd=0"], "initcwnd", "整数，范围 1 至 1000，或不设置"),
    ("run", ["bulk", "--set", "rate=12mbps"], "rate", "有歧义"),
    ("report", ["--language", "zh", "--cases", "99"], "CASES", "all，或以下编号/名称"),
    ("report", ["--language", "zh", "--formats", "html,doc"], "--formats", "未知：doc"),
    ("diagnose", ["{capture}", "--language", "zh", "--t-range", "soon"], "--t-range", "从抓包开始起算的秒数"),
    ("papermill", ["04-nagle-delayed-ack", "requests", "0"], "requests", "整数，范围 1 至 100000"),
    ("run", ["bulk", "--set", "rtt=20ms", "--set", "jitter=30ms"], "jitter", "至多等于 delay（10 ms）"),
    ("run", ["bulk", "--set", "colour=red"], "colour", "路径参数：aqm, backend"),
    ("report", ["--language", "zh", "--shard", TOO_MANY_SHARDS], "--shard", f"I/N，且 N 不超过所选的 {N_CASES} 个案例"),
    ("report", ["--language", "zh", "--merge", "/nonexistent/shard-1"], "--merge", "其中没有 summary.json"),
    ("release", ["01", "--assignment", "week1"], "--reference", "tcplab report 的 summary.json，或每个案例执行过的笔记本"),
    ("i18n", ["check", "--language", "en"], "--language", "译文的语言（英文是源文本）"),
    ("uml", ["run"], "command", "-- 之后的命令"),
]


@pytest.mark.parametrize("surface, args, name, accepted", ZH_MATRIX, ids=[f"{m[0]}:{' '.join(m[1])}" for m in ZH_MATRIX])
def test_a_command_speaking_chinese_refuses_in_chinese(tmp_path, surface, args, name, accepted):
    env = {**os.environ, "TCPLAB_DATA": str(tmp_path / "data")}
    if "--language zh" not in " ".join(args):  # else the command speaks it, the environment as it was
        env["TCPLAB_LANG"] = "zh"
    out = subprocess.run(_command(surface, args, tmp_path), capture_output=True, text=True, env=env, timeout=300)
    said = out.stdout + out.stderr
    assert f"{name}：不接受" in said and "可接受：" in said and accepted in said, said[-3000:]
    assert "is not accepted" not in said and "accepted:" not in said, said[-3000:]
    assert out.returncode == (1 if surface == "papermill" else 2)


def test_the_matrix_covers_every_surface_and_enough_inputs():
    surfaces = {m[0] for m in MATRIX}
    assert surfaces == {"run", "lab", "report", "make", "diagnose", "release", "papermill"} and len(MATRIX) >= 25
    assert len({json.dumps(m[:2]) for m in MATRIX}) == len(MATRIX)  # no input twice
