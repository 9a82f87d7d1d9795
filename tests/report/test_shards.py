"""The course split into shards and merged back: which cases a shard runs, which
directories a merge accepts, and that a merge renders what one run would have."""

import json

import pytest

from tcplab.report.shards import SUMMARY, Shard, gather, missing, read_shards
from tcplab.units import ParameterError

CASES = [f"{n:02d}-case" for n in range(12)]


def test_shards_cover_the_selection_once_in_round_robin():
    picked = [Shard(i, 4).pick(CASES) for i in range(1, 5)]
    assert sorted(sum(picked, [])) == CASES
    assert picked[0] == ["00-case", "04-case", "08-case"] and picked[3] == ["03-case", "07-case", "11-case"]
    assert [Shard(i, 12).pick(CASES) for i in (1, 12)] == [["00-case"], ["11-case"]]


@pytest.mark.parametrize("text", ["0/3", "4/3", "x", "1", "1/0", "-1/3", "1/3/5", ""])
def test_bad_shard_names_the_option_and_the_accepted_form(text):
    with pytest.raises(ParameterError) as info:
        Shard.parse(text)
    assert info.value.name == "--shard" and "I/N" in info.value.accepted


def test_more_shards_than_cases_is_refused():
    with pytest.raises(ParameterError, match="at most the 2 selected"):
        Shard(3, 3).pick(CASES[:2])


def _shard_dir(root, index, count, *, selection=CASES, profile="quick", mode="replay", notebooks=True):
    shard = Shard(index, count)
    path = root / f"s{index}"
    path.mkdir()
    cases = shard.pick(selection)
    for case in cases if notebooks else ():
        (path / f"{case}.ipynb").write_text(json.dumps({"case": case}))
    summary = {"mode": mode, "profile": profile, **shard.record(selection),
               "cases": [{"case_id": c} for c in cases]}
    (path / SUMMARY).write_text(json.dumps(summary))
    return path


def test_merge_accepts_the_shards_of_one_split_in_any_order(tmp_path):
    dirs = [_shard_dir(tmp_path, i, 3) for i in (3, 1, 2)]
    shards = read_shards(dirs)
    assert [s.shard.index for s in shards] == [1, 2, 3] and missing(shards) == []
    out = tmp_path / "merged"
    gather(shards, out)
    assert sorted(p.stem for p in out.glob("*.ipynb")) == CASES


def test_a_missing_shard_leaves_its_cases_unrun_never_an_older_notebook(tmp_path):
    dirs = [_shard_dir(tmp_path, i, 3) for i in (1, 3)]
    out = tmp_path / "merged"
    out.mkdir()
    stale = out / "01-case.ipynb"  # shard 2's, from an earlier run
    stale.write_text("{}")
    shards = read_shards(dirs)
    gather(shards, out)
    assert missing(shards) == ["2/3"] and not stale.exists()
    assert sorted(p.stem for p in out.glob("*.ipynb")) == sorted(Shard(1, 3).pick(CASES) + Shard(3, 3).pick(CASES))


@pytest.mark.parametrize("other, reason", [
    (dict(index=1, count=3), "each shard once"),
    (dict(index=2, count=4), "one split into 3"),
    (dict(index=2, count=3, profile="full"), "profile"),
    (dict(index=2, count=3, mode="live"), "mode"),
    (dict(index=2, count=3, selection=CASES[:6]), "selection"),
])
def test_merge_refuses_shards_of_different_runs(tmp_path, other, reason):
    first = _shard_dir(tmp_path, 1, 3)
    index, count = other.pop("index"), other.pop("count")
    second_root = tmp_path / "other"
    second_root.mkdir()
    second = _shard_dir(second_root, index, count, **other)
    with pytest.raises(ParameterError, match=reason) as info:
        read_shards([first, second])
    assert info.value.name == "--merge"


def test_merge_refuses_what_is_not_a_shard(tmp_path):
    (tmp_path / "empty").mkdir()
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / SUMMARY).write_text(json.dumps({"mode": "replay", "cases": []}))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / SUMMARY).write_text("{")
    for path, reason in ((tmp_path / "empty", "no summary.json"), (whole, "not a shard's"),
                         (broken, "not JSON"), (tmp_path / "absent", "no summary.json")):
        with pytest.raises(ParameterError, match=reason):
            read_shards([path])
    with pytest.raises(ParameterError):
        read_shards([])
