"""Refusals said in Chinese: each area's ParameterError, raised under ``speaking("zh")``, leaves no
English sentence behind. What may stay Latin is what a user types or the machine names: the
parameter and its value, options, commands, file names, kernel and sysctl names, units."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import nbformat
import pytest

from tcplab import course, i18n, plots
from tcplab.analysis import theory
from tcplab.cases import replay, sweep
from tcplab.cases.variants import VariantTable
from tcplab.commands import i18n as i18n_command, uml as uml_command
from tcplab.commands.run import split_settings
from tcplab.lab import kernels, sysctl, uml
from tcplab.lab.link import LinkShape, check_aqm, choose_backend
from tcplab.lab.path import PathSpec
from tcplab.observe import ObserveSpec
from tcplab.report import autograde, grading, release, shards
from tcplab.report.worksheet import read_worksheet
from tcplab.traffic import Bulk, Slowreader
from tcplab.units import ParameterError
from tcplab.words import speaking

#: Latin words a Chinese refusal keeps: names a user types or the machine prints.
ALLOWED = {
    # parameters, options' words, commands and their arguments
    "rtt", "delay", "jitter", "queue", "cc", "host", "uml", "userns", "auto", "replay", "live", "delayline", "netem",
    "sysctls", "host_settings", "HostGuard", "read_rate", "case_id", "predictions", "worksheet", "cell",
    "tcplab", "report", "shard", "merge", "strings", "key", "edition", "formats", "language", "reports",
    "dir", "render", "only", "uname", "run", "fetch", "apt", "get", "install", "user", "mode", "linux", "kmod",
    "make", "setup", "median", "mean", "minshall", "rfc", "profile", "selection", "quick", "full",
    "CASE", "ID", "KEY", "I", "N", "start", "end", "client", "server", "root", "markdown", "tc", "ip",
    # kernels, sysctls, qdiscs, files and formats
    "net", "core", "ipv", "rmem_max", "wmem_max", "tcp_mem", "tcp_allowed_congestion_control", "sysctl", "qdisc",
    "sch_netem", "UML", "User", "Linux", "Debian", "aqm", "fq_codel", "cake", "sch_fq_codel", "FIFO", "AQM", "rate",
    "json", "summary", "ipynb", "en", "zh", "Markdown", "JSON", "scores", "None", "nbgrader", "id",
    # units
    "ms", "s", "KB", "MB", "GB", "p", "bytes",
}


def _leftover(exc: ParameterError, *quoted: str) -> list[str]:
    """The Latin words of a refusal that are none of its name, value, paths, what it quotes from
    a library (``quoted``) or ALLOWED."""
    said = str(exc)
    for part in (*quoted, repr(exc.value), str(exc.name)):
        if part:
            said = said.replace(part, " ")
    said = re.sub(r"(?:/[\w.-]+)+", " ", said)  # paths
    said = said.replace('{"check name"', " ")  # the worksheet's form, as code
    words = re.findall(r"[A-Za-z][A-Za-z_]*", said)
    return [w for w in words if w not in ALLOWED and w.lower() not in ALLOWED]


def _refused(call, *args, **kwargs) -> ParameterError:
    with speaking("zh"), pytest.raises(ParameterError) as info:
        call(*args, **kwargs)
    return info.value


def _library_says(call, *args) -> str:
    """What a library's own exception says (quoted in a refusal, in the library's language)."""
    try:
        call(*args)
    except Exception as exc:  # noqa: BLE001 - whatever it raises is what the refusal quotes
        return str(exc)
    raise AssertionError("it did not raise")


def _shard_dir(tmp: Path, name: str, *, index: int, count: int, profile: str = "quick") -> Path:
    folder = tmp / name
    folder.mkdir()
    summary = {"shard": {"index": index, "count": count, "selection": ["01-send-buffer", "02-receive-buffer"]},
               "cases": [], "profile": profile, "mode": "replay"}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _refusals(tmp: Path, monkeypatch) -> dict[str, tuple[ParameterError, tuple]]:
    """One refusal of each kind, by a short name: (the error, what it quotes from a library)."""
    out: dict[str, tuple[ParameterError, tuple]] = {}
    # grading: the class's reference, and a release that would overwrite a student's work
    out["grade: no such --reference"] = _refused(grading.read_references, [tmp / "absent.json"]), ()
    neither = tmp / "neither.json"
    neither.write_text("[1, 2]")
    out["grade: neither summary nor scores"] = _refused(grading.read_measurements, neither), ()
    unreadable = tmp / "unreadable.json"
    unreadable.write_text("{")
    out["grade: unreadable --reference"] = (_refused(grading.read_measurements, unreadable),
                                            (_library_says(json.loads, "{"), "JSONDecodeError"))
    empty = tmp / "empty.json"
    empty.write_text(json.dumps({"cases": []}))
    out["grade: no measured checks"] = _refused(grading.read_measurements, empty), ()
    worksheet = read_worksheet(course.room("04-nagle-delayed-ack"))
    out["release: an item not measured"] = (_refused(autograde.scoring_cells, worksheet, {}, "zh", "x.ipynb", "s.json"),
                                            (*(i.check for i in worksheet.items), worksheet.case_id))
    out["release: no reference"] = _refused(release.release_course, ["04-nagle-delayed-ack"], tmp / "c", "w1", []), ()
    out["release: assignment"] = _refused(release.release_course, ["04-nagle-delayed-ack"], tmp / "c", "w 1", ["s"]), ()
    worked = tmp / "worked"
    worked.mkdir()
    (worked / "04-nagle-delayed-ack.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    out["release: a student's notebook"] = _refused(release.release, ["04-nagle-delayed-ack"], worked), ()
    # report shards
    out["shard: not I/N"] = _refused(shards.Shard.parse, "two"), ()
    out["shard: more shards than cases"] = _refused(shards.Shard(3, 3).pick, ["01", "02"]), ()
    out["merge: no summary"] = _refused(shards.read_shards, [tmp]), ()
    (tmp / "broken").mkdir()
    (tmp / "broken" / "summary.json").write_text("{")
    out["merge: summary not JSON"] = _refused(shards.read_shards, [tmp / "broken"]), (_library_says(json.loads, "{"),)
    (tmp / "whole").mkdir()
    (tmp / "whole" / "summary.json").write_text(json.dumps({"cases": []}))
    out["merge: a whole run"] = _refused(shards.read_shards, [tmp / "whole"]), ()
    out["merge: nothing"] = _refused(shards.read_shards, []), ()
    one, other = _shard_dir(tmp, "one", index=1, count=2), _shard_dir(tmp, "other", index=2, count=2, profile="full")
    out["merge: another profile"] = _refused(shards.read_shards, [one, other]), ()
    three = _shard_dir(tmp, "three", index=2, count=3)
    out["merge: another split"] = _refused(shards.read_shards, [one, three]), ()
    again = _shard_dir(tmp, "again", index=1, count=2)
    out["merge: a shard twice"] = _refused(shards.read_shards, [one, again]), ()
    # i18n
    out["i18n: English"] = _refused(i18n.translation_language, "en"), ()
    out["i18n: no strings file"] = _refused(i18n.translation_language, "fr", tmp), ()
    out["i18n: unknown key"] = _refused(i18n.accept_strings, "zh", ["error.no such phrase"]), ()
    # the lab's kernels (what this machine can run is made up: nothing starts)
    monkeypatch.setattr(kernels, "inside", lambda: False)
    monkeypatch.setattr(kernels, "host_can_run", lambda: (False, "not root"))
    monkeypatch.setattr(kernels, "userns_can_run", lambda: (False, "user namespaces are not allowed for this user"))
    monkeypatch.setattr(kernels, "uml_can_run", lambda: (False, "no User-mode Linux kernel installed"))
    monkeypatch.setattr("tcplab.lab.uml.find_install", lambda: None)  # and none installed: the hint says how
    out["kernel: uml missing"] = _refused(kernels.choose_kernel, "uml"), ()
    out["kernel: host not root"] = _refused(kernels.choose_kernel, "host"), ()
    out["mode: live impossible"] = _refused(kernels.choose_mode, "live", None), ()
    monkeypatch.setattr(kernels, "host_can_run", lambda: (False, "missing tc, ip"))
    out["kernel: host missing tools"] = _refused(kernels.choose_kernel, "host"), ()
    # sysctls, link and path
    out["sysctl: not net"] = _refused(sysctl.check_namespace_settings, {"kernel.hostname": "x"}), ()
    out["sysctl: not host-global"] = _refused(sysctl.HostGuard, {"tcp_rmem": "4096 131072 6291456"}), ()
    out["link: jitter above delay"] = _refused(LinkShape, delay="10ms", jitter="20ms"), ()
    out["link: queue below a frame"] = _refused(LinkShape, queue="100B"), ()
    out["link: queue of no packets"] = _refused(LinkShape, queue="0p"), ()
    monkeypatch.setattr("tcplab.lab.link.netem_available", lambda: False)
    out["link: no netem"] = _refused(choose_backend, "netem"), ()
    out["link: aqm without a rate"] = _refused(LinkShape, aqm="fq_codel"), ()
    out["link: aqm with a queue"] = _refused(LinkShape, rate="10mbit", aqm="cake", queue="100"), ()
    monkeypatch.setattr("tcplab.lab.link.aqms_available", lambda: [])
    out["link: no such aqm here"] = (_refused(check_aqm, [LinkShape(rate="10mbit", aqm="fq_codel")]),
                                     (platform.release(),))
    out["path: rtt and delay"] = _refused(PathSpec, rtt="20ms", delay="30ms"), ()
    out["path: side"] = _refused(PathSpec, side_sysctls={"middle": {}}), ()
    # sweeps and theory
    out["sweep: empty axis"] = _refused(sweep.grid, rtt=[]), ()
    out["sweep: statistic"] = _refused(sweep.steady_goodput, None, statistic="mode"), ()
    out["sweep: share"] = _refused(sweep.steady_goodput, None, after=1.5), ()
    out["sweep: budget"] = _refused(sweep.budget_size, 0, 0.02, 1e8), ()
    out["theory: positive"] = _refused(theory.mathis_throughput, 1448, 0, 0.01), ()
    out["theory: whole"] = _refused(theory.mathis_throughput, 0, 0.02, 0.01), ()
    out["theory: fraction"] = _refused(theory.mathis_throughput, 1448, 0.02, 2), ()
    # commands, sweeps, plots, workloads and recorded runs
    names = (*PathSpec.names(), *Bulk.names(), *ObserveSpec.names(), "bulk")
    out["run: unknown parameter"] = _refused(split_settings, Bulk, {"colour": "red"}), tuple(sorted(names, key=len)[::-1])
    out["uml: no command"] = _refused(uml_command.main, ["run"]), ("uname -r",)
    out["i18n: accept what"] = _refused(i18n_command.main, ["accept", "--language", "zh"]), ()
    out["sweep: one label"] = _refused(sweep.build, [{"x": 1}, {"x": 2}], lambda v: (None, None), name="same"), ("same",)
    out["plots: empty range"] = _refused(plots._check_range, (2, 1)), ()
    out["workload: clamped"] = _refused(Bulk(sndbuf="4MB").check_limits, {"net.core.wmem_max": 212992}), ()
    out["workload: slow reader"] = _refused(Slowreader, pause_after=None, read_rate=None), ()
    out["variants: none"] = _refused(VariantTable.latest, "99-none", runs_dir=tmp / "runs", replay_dir=tmp / "replay"), ("99-none",)
    out["replay: nothing to save"] = _refused(replay.save, "99-none", runs_dir=tmp / "runs", replay_dir=tmp / "replay"), ("99-none",)
    return out


@pytest.fixture
def refusals(tmp_path, monkeypatch):
    return _refusals(tmp_path, monkeypatch)


def test_no_refusal_leaves_an_english_word_in_a_chinese_sentence(refusals):
    left = {name: _leftover(exc, *quoted) for name, (exc, quoted) in refusals.items()}
    left = {name: (words, str(refusals[name][0])) for name, words in left.items() if words}
    assert not left, "\n".join(f"{name}: {words}\n    {said}" for name, (words, said) in left.items())


def test_refusals_of_each_area_are_chinese_sentences(refusals):
    """What they say, word for word where it matters: grading, report shards, i18n, the UML
    kernel, the lab's sysctls and links, a worksheet."""
    said = {name: str(exc) for name, (exc, _) in refusals.items()}
    assert said["release: no reference"] == (
        "--reference：不接受 ''（nbgrader 发布要按全班的参考运行评分）；可接受：tcplab report 的 summary.json，"
        "或每个案例执行过的笔记本")
    assert "（其中有 " in said["release: a student's notebook"] and "它有输出、填写过的预测表，或者不是发布的笔记本" in \
        said["release: a student's notebook"]
    assert "（其中没有测得的检查项）；可接受：已执行的案例笔记本（.ipynb），或 tcplab report 写出的 summary.json" in \
        said["grade: no measured checks"]
    assert said["shard: not I/N"] == ("--shard：不接受 'two'；可接受：I/N，且 1 <= I <= N，例如 2/4"
                                      "（从 0 开始的作业数组索引需要 +1）")
    assert said["shard: more shards than cases"] == (
        "--shard：不接受 '3/3'（会有分片分不到案例）；可接受：I/N，且 N 不超过所选的 2 个案例")
    assert "（它的配置为 'full'）；可接受：同一次运行的分片（配置与 " in said["merge: another profile"]
    assert "（它是分片 2/3）；可接受：同一次划分为 2 份的分片" in said["merge: another split"]
    assert said["i18n: English"] == "--language：不接受 'en'；可接受：译文的语言（英文是源文本）"
    assert said["i18n: unknown key"] == "key：不接受 'error.no such phrase'；可接受：同一个词语文件夹里 en.json 和 zh.json 中都有的键"
    assert said["kernel: uml missing"] == ("kernel：不接受 'uml'（UML 内核无法运行实验环境：没有安装 User-mode Linux 内核；以 root 身份用 "
                                          "`apt-get install user-mode-linux kmod` 安装（`make setup` 会做这一步），或不用 root，"
                                          f"用 `tcplab uml fetch` 把同样的 Debian 软件包解包到 {uml.cache_dir()}）；可接受：host, userns, auto")
    assert said["mode: live impossible"] == ("mode：不接受 'live'（这里无法实测：主机内核无法运行实验环境（不是 root），"
                                             "在用户命名空间中也不行（此用户不能创建用户命名空间），"
                                             "也没有 UML 内核（没有安装 User-mode Linux 内核））；可接受：replay 或 auto")
    assert said["sysctl: not net"].startswith("kernel.hostname：不接受 'x'（未知的 sysctl）")
    assert said["sysctl: not host-global"].startswith("tcp_rmem：不接受 '4096 131072 6291456'（不是主机全局设置；请按网络命名空间设置）")
    assert said["link: queue below a frame"] == ("queue：不接受 '100B'（小于一个 1514 字节的帧）；"
                                                 "可接受：报文个数（100、100p）或大小（64KB）；至少一个报文")
    assert said["theory: whole"] == "mss：不接受 0（超出范围）；可接受：整数，范围 1 至 65535（字节）"


def test_english_refusals_keep_their_words(tmp_path):
    """The phrases are keys now; an English refusal reads as the code writes it."""
    with speaking("en"), pytest.raises(ParameterError) as info:
        release.release_course(["04-nagle-delayed-ack"], tmp_path / "c", "week1", [])
    assert str(info.value) == ("--reference: '' is not accepted (an nbgrader release scores against the class's "
                               "reference run); accepted: a summary.json of tcplab report or an executed notebook of "
                               "each case")
    with speaking("en"), pytest.raises(ParameterError) as info:
        shards.Shard(3, 3).pick(["01", "02"])
    assert str(info.value) == ("--shard: '3/3' is not accepted (a shard would have no case); "
                               "accepted: I/N with N at most the 2 selected case(s)")


def test_a_missing_uml_kernel_says_how_to_install_one(monkeypatch):
    """--kernel uml where no UML kernel is installed names both ways to get one."""
    monkeypatch.setattr(kernels, "inside", lambda: False)
    monkeypatch.setattr(kernels, "host_can_run", lambda: (True, ""))
    monkeypatch.setattr(kernels, "uml_can_run", lambda: (False, "no User-mode Linux kernel installed"))
    monkeypatch.setattr(uml, "find_install", lambda: None)
    with speaking("en"), pytest.raises(ParameterError) as info:
        kernels.choose_kernel("uml")
    assert str(info.value) == (
        "kernel: 'uml' is not accepted (the UML kernel cannot run the lab: no User-mode Linux kernel installed; "
        "install it as root with "
        "`apt-get install user-mode-linux kmod` (`make setup` does it), or without root with `tcplab uml fetch`, "
        f"which unpacks the same Debian packages into {uml.cache_dir()}); accepted: host, userns, auto")


def test_a_refusal_travels_as_itself_and_says_what_it_said_where_it_arose():
    # As a UML lab kernel's agent sends it back: unpickled where English is in force.
    import pickle

    with speaking("zh"):
        said = ParameterError("rtt", "fast", "a duration such as 20ms")
    with speaking("en"):
        again = pickle.loads(pickle.dumps(said))
    assert type(again) is ParameterError and str(again) == str(said) and "不接受" in str(again)
    assert (again.name, again.value, again.accepted, again.why) == ("rtt", "fast", "a duration such as 20ms", "")
