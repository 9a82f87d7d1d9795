"""One room per case: a case's notebook, its words in each language and its own code in its
folder of the course, and nothing of it anywhere else (tcplab.course, tcplab.rooms, tcplab.words)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from tcplab import words
from tcplab.course import COURSE_DIR, Course, CourseError, available_cases, course, room
from tcplab.folders import ROOT
from tcplab.rooms import module_folders

CASES = available_cases()
#: Namespaces whose keys a case may own without naming it (a check's name, a table's words).
UNNAMED = ("check", "column", "cell", "plot", "rule", "note", "unit")


def _code_of(case: str) -> str:
    """What a room's code says: its notebook's code cells and its own modules."""
    r = room(case)
    nb = nbformat.read(r.notebook, as_version=4)
    return "\n".join([c.source for c in nb.cells if c.cell_type == "code"]
                     + [(r.folder / f"{m}.py").read_text() for m in r.modules])


def _shared_code() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "lib" / "tcplab").rglob("*.py"))


def test_the_table_of_contents_lists_every_room_and_only_rooms():
    folders = sorted(p.name for p in COURSE_DIR.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert sorted(CASES) == folders and CASES == sorted(CASES)
    for case in CASES:
        r = room(case)
        assert r.notebook.is_file() and (r.words_dir / "en.json").is_file(), case
        assert (ROOT / "data" / r.replay / "index.json").is_file(), case  # its pointer to its recorded runs


def test_no_shared_words_file_holds_a_key_of_one_case():
    shared = json.loads((words.STRINGS_DIR / "en.json").read_text(encoding="utf-8"))
    named = [k for k in shared if any(case in k for case in CASES)]
    assert not named, named
    # A key that names no case belongs to one when only that room's code says its words.
    code = {case: _code_of(case) for case in CASES}
    lib = _shared_code()
    owned = []
    for key in shared:
        namespace, _, text = key.partition(".")
        literal = max(re.split(r"\{\w+\}", text), key=len).strip()
        if namespace in UNNAMED and literal and literal not in lib:
            users = [case for case in CASES if literal in code[case]]
            if len(users) == 1:
                owned.append((key, users[0]))
    assert not owned, owned


def test_a_rooms_words_are_its_own_and_in_every_language():
    for case in CASES:
        folder = room(case).words_dir
        english = json.loads((folder / "en.json").read_text(encoding="utf-8"))
        others = [c for c in CASES if c != case]
        assert not [k for k in english if any(other in k for other in others)], case
        for language in words.languages():
            if language != "en":
                assert set(json.loads((folder / f"{language}.json").read_text(encoding="utf-8"))) == set(english), (
                    case, language)


def test_a_key_in_two_words_files_is_refused(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name / "words").mkdir(parents=True)
        (tmp_path / name / "words" / "en.json").write_text(json.dumps({"prose.x.said": name}))
    monkeypatch.setattr(words, "COURSE_DIR", tmp_path)
    words._load.cache_clear()
    try:
        with pytest.raises(words.DuplicateWords, match="prose.x.said"):
            words.Messages("en")("status.passed")
    finally:
        monkeypatch.undo()
        words._load.cache_clear()


def _course(tmp_path, rooms: dict[str, dict], listed=None):
    tmp_path.mkdir(parents=True)
    (tmp_path / "course.toml").write_text("cases = [" + ", ".join(f'"{c}"' for c in (listed or rooms)) + "]\n")
    for case, files in rooms.items():
        folder = tmp_path / case
        folder.mkdir()
        (folder / f"{case}.ipynb").write_text("{}")
        for name, text in files.items():
            (folder / name).write_text(text)
    return tmp_path


def test_a_course_says_what_is_wrong_with_it(tmp_path):
    with pytest.raises(CourseError, match="course.toml"):
        Course.read(tmp_path)
    made = _course(tmp_path / "one", {"01-a": {"case.toml": 'modules = ["helper"]\n'}})
    with pytest.raises(CourseError, match="helper.py"):
        Course.read(made)
    made = _course(tmp_path / "two", {"01-a": {"case.toml": 'colour = "red"\n'}})
    with pytest.raises(CourseError, match="unknown keys colour"):
        Course.read(made)
    made = _course(tmp_path / "three", {"01-a": {"case.toml": ""}}, listed=["01-a", "02-b"])
    with pytest.raises(CourseError, match="02-b"):
        Course.read(made)


def test_a_rooms_modules_import_under_one_name_each(tmp_path):
    twice = _course(tmp_path / "twice", {"01-a": {"case.toml": 'modules = ["same"]\n', "same.py": ""},
                                         "02-b": {"case.toml": 'modules = ["same"]\n', "same.py": ""}})
    with pytest.raises(CourseError, match="two rooms"):
        module_folders(Course.read(twice))
    stray = _course(tmp_path / "stray", {"01-a": {"case.toml": "", "helper.py": ""}})
    with pytest.raises(CourseError, match="does not declare"):
        module_folders(Course.read(stray))
    # The course's own: each declared module imports from its room.
    from tcplab.rooms import nagle

    assert nagle.__name__ == "tcplab.rooms.nagle"
    assert Path(nagle.__file__).parent == room("04-nagle-delayed-ack").folder
    assert [m for r in course().rooms for m in r.modules]  # some rooms have code of their own
