"""Translations of the course, kept beside their English source and checked against it.

Two kinds of text are translated, each keyed by something stable and each entry carrying the
SHA-256 of the English it translates, so that a change to the English shows up as a *stale*
translation instead of silently going out of date:

* **Notebook prose**: ``course/<case_id>/words/<language>.cells.json``, in the case's room, holds
  the translated Markdown cells of one case, keyed by nbformat cell id (code is never copied)::

      {"schema": "tcplab.i18n/1", "language": "zh", "case_id": "05-zero-window",
       "title": {"english": "Zero window", "text": "零窗口"},
       "cells": {"073c876f": {"source_sha256": "…", "text": "# 05 · …"}}}

  ``title`` (optional) translates the title the notebook publishes with its scores; it is
  keyed by the English itself, so a changed title simply falls back to English. An entry
  whose ``text`` is null is a stub (``tcplab i18n stub``): untranslated, with the English
  beside it (``english``) for the translator.
* **Strings**: each folder of words (the shared ``strings/`` and each room's ``words/``, see
  :func:`tcplab.words.words_dirs`) holds a flat ``<language>.json`` ``{key: text}`` file that
  :mod:`tcplab.words` reads (its lookup is untouched by any of this), and a sidecar
  ``<language>.sources.json`` beside it holds ``{key: SHA-256 of the English text}``
  (``tcplab i18n accept --strings`` writes it after a translator's review).

:func:`translate_notebook` gives a notebook whose Markdown cells are replaced by their
translations where present and fresh (the rest stays English, cell by cell);
:func:`check` lists, per case and for the strings, what is missing, stale or orphaned;
``tcplab i18n`` (:mod:`tcplab.commands.i18n`) is the command over both.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .course import WORDS, available_cases, room
from .files import write_atomically
from .units import ParameterError
from .params import check_language
from .words import (FALLBACK_LANGUAGE, STRINGS_DIR, choice_only_fields, languages, template_fields, template_kinds,
                    words_dirs)

__all__ = ["SCHEMA", "source_sha256", "translation_path", "Translation",
           "read_translation", "write_translation", "translate_notebook", "translated_title", "stub",
           "accept_cells", "accept_strings", "sources_path", "CaseCheck", "StringsCheck", "I18nReport",
           "check", "check_case", "check_strings", "translation_language", "translation_languages", "ran_in",
           "LANGUAGE_METADATA"]

SCHEMA = "tcplab.i18n/1"
#: Where an executed notebook records the language its kernel spoke (``metadata.tcplab.language``).
LANGUAGE_METADATA = "language"


def source_sha256(text: str) -> str:
    """The hash a translation keeps of the English it translates."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _source(cell: Any) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _translatable(cell: Any) -> bool:
    """A Markdown cell with words in it and an id to key its translation by."""
    return cell.get("cell_type") == "markdown" and bool(cell.get("id")) and bool(_source(cell).strip())


def translation_language(language: str, strings_dir: str | Path | None = None) -> str:
    """``language`` when it has a strings file (in ``strings_dir``, default tcplab's) and is not
    English (the source); else a :class:`ParameterError`."""
    if strings_dir is None or Path(strings_dir) == STRINGS_DIR:
        check_language(language)
    elif "." in language or not (Path(strings_dir) / f"{language}.json").is_file():
        raise ParameterError("--language", language, f"a language with a strings file in {strings_dir}")
    if language == FALLBACK_LANGUAGE:
        raise ParameterError("--language", language, "a translation's language (English is the source)")
    return language


def translation_languages() -> list[str]:
    """The languages with a strings file, English (the source) left out."""
    return [lang for lang in languages() if lang != FALLBACK_LANGUAGE]


# --- translation files ------------------------------------------------------------------------------


def translation_path(case_id: str, language: str, course_dir: str | Path | None = None, *,
                     folder: str | Path | None = None) -> Path:
    """Where a case's Markdown is translated: ``<language>.cells.json`` among its room's words
    (the room of ``case_id`` in the course, or the room ``folder`` that holds the notebook)."""
    words = Path(folder) / WORDS if folder is not None else room(case_id, course_dir).words_dir
    return words / f"{language}.cells.json"


@dataclass
class Translation:
    """One case's translation into one language (empty when there is no file)."""

    language: str
    case_id: str
    #: cell id -> {"source_sha256": …, "text": … or None, "english": … (stubs and stale entries)}
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {"english": the published title, "text": its translation}, or None.
    title: dict[str, str] | None = None

    def fresh_text(self, cell: Any) -> str | None:
        """The translation of ``cell`` when there is one for its current English; else None."""
        entry = self.cells.get(cell.get("id") or "")
        if not entry or not isinstance(entry.get("text"), str):
            return None
        return entry["text"] if entry.get("source_sha256") == source_sha256(_source(cell)) else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": SCHEMA, "language": self.language, "case_id": self.case_id}
        if self.title:
            data["title"] = self.title
        data["cells"] = self.cells
        return data


def read_translation(case_id: str, language: str, course_dir: str | Path | None = None, *,
                     folder: str | Path | None = None) -> Translation:
    """The translation file of ``case_id`` into ``language`` (:func:`translation_path`); an empty
    one where there is none. A file of another schema, language or case is refused (ValueError),
    never half used."""
    path = translation_path(case_id, language, course_dir, folder=folder)
    if not path.is_file():
        return Translation(language, case_id)
    data = json.loads(path.read_text(encoding="utf-8"))
    found = (data.get("schema"), data.get("language"), data.get("case_id"))
    if found != (SCHEMA, language, case_id):
        raise ValueError(f"{path}: expected schema {SCHEMA}, language {language}, case {case_id}; "
                         f"found {', '.join(map(str, found))}")
    cells = data.get("cells") or {}
    if not isinstance(cells, dict) or not all(isinstance(v, dict) for v in cells.values()):
        raise ValueError(f"{path}: \"cells\" must map cell ids to entries")
    return Translation(language, case_id, cells=cells, title=data.get("title") or None)


def write_translation(translation: Translation, course_dir: str | Path | None = None) -> Path:
    path = translation_path(translation.case_id, translation.language, course_dir)
    text = json.dumps(translation.to_json(), ensure_ascii=False, indent=2) + "\n"
    return write_atomically(path, text)


def _case_of(nb: Any) -> str | None:
    return ((nb.get("metadata", {}).get("papermill") or {}).get("parameters") or {}).get("case_id")


def translate_notebook(nb: Any, language: str, *, case_id: str | None = None,
                       course_dir: str | Path | None = None,
                       translation: Translation | None = None) -> Any:
    """A copy of ``nb`` whose Markdown cells are replaced by their ``language`` translation where
    it is present and fresh (translates the English the cell holds now); every other cell,
    code above all, is left as it is. ``case_id`` defaults to the one papermill injected."""
    nb = copy.deepcopy(nb)
    if language == FALLBACK_LANGUAGE:
        return nb
    if translation is None:
        case_id = case_id or _case_of(nb)
        if not case_id:
            return nb
        translation = read_translation(case_id, language, course_dir)
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            text = translation.fresh_text(cell)
            if text is not None:
                cell.source = text
    return nb


def translated_title(title: str, translation: Translation) -> str:
    """The published title in the translation's language, where it translates this very title."""
    entry = translation.title or {}
    return entry["text"] if entry.get("english") == title and entry.get("text") else title


def _notebook(case_id: str, course_dir: str | Path | None) -> Any:
    import nbformat

    return nbformat.read(str(room(case_id, course_dir).notebook), as_version=4)


def stub(case_id: str, language: str, course_dir: str | Path | None = None) -> tuple[Path, int]:
    """Write or extend a case's translation file for a translator: an entry ``{"text": null,
    "english": …}`` for each Markdown cell without one, and the current English beside each stale
    entry (its old translation kept, still reported stale until ``accept``). Returns the file and
    how many entries were added or marked."""
    translation_language(language)
    nb = _notebook(case_id, course_dir)
    translation = read_translation(case_id, language, course_dir)
    changed = 0
    cells: dict[str, dict[str, Any]] = {}
    for cell in nb.cells:
        if not _translatable(cell):
            continue
        source = _source(cell)
        entry = translation.cells.get(cell.id)
        if entry is None or entry.get("text") is None:
            new = {"source_sha256": source_sha256(source), "text": None, "english": source}
            changed += entry != new
            entry = new
        elif entry.get("source_sha256") != source_sha256(source) and entry.get("english") != source:
            entry = {**entry, "english": source}
            changed += 1
        cells[cell.id] = entry
    # Entries of cells gone stay (orphans, for check to report), after the notebook's own.
    cells.update({k: v for k, v in translation.cells.items() if k not in cells})
    translation.cells = cells
    return write_translation(translation, course_dir), changed


def accept_cells(case_id: str, language: str, cell_ids: Iterable[str] = (),
                 course_dir: str | Path | None = None) -> list[str]:
    """Record that the translations of ``cell_ids`` (all translated cells when none are named)
    translate the current English: their hash is brought up to date and the ``english`` helper
    dropped. Returns the ids accepted."""
    translation_language(language)
    nb = _notebook(case_id, course_dir)
    translation = read_translation(case_id, language, course_dir)
    sources = {c.id: _source(c) for c in nb.cells if _translatable(c)}
    wanted = list(cell_ids) or [k for k, v in translation.cells.items() if isinstance(v.get("text"), str)]
    accepted = []
    for cell_id in wanted:
        entry = translation.cells.get(cell_id)
        if cell_id not in sources or entry is None or not isinstance(entry.get("text"), str):
            if cell_ids:
                raise ParameterError("cell", cell_id, f"a translated Markdown cell of {case_id}")
            continue
        entry = {k: v for k, v in entry.items() if k != "english"}
        entry["source_sha256"] = source_sha256(sources[cell_id])
        translation.cells[cell_id] = entry
        accepted.append(cell_id)
    write_translation(translation, course_dir)
    return accepted


# --- strings ----------------------------------------------------------------------------------------


def sources_path(language: str, strings_dir: str | Path | None = None) -> Path:
    return Path(strings_dir or STRINGS_DIR) / f"{language}.sources.json"


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def accept_strings(language: str, keys: Iterable[str] = (), strings_dir: str | Path | None = None) -> list[str]:
    """Record that ``language``'s strings for ``keys`` (every translated key when none are
    named) translate the current English: each folder of words (``strings_dir``, else the shared
    one and every room's) gets their English hashes in its sidecar, for the keys it holds."""
    translation_language(language, strings_dir)
    folders = [Path(strings_dir)] if strings_dir else words_dirs()
    keys = list(keys)
    held = {f: (_read_json(f / f"{FALLBACK_LANGUAGE}.json"), _read_json(f / f"{language}.json")) for f in folders}
    for key in keys:
        if not any(key in english and key in own for english, own in held.values()):
            raise ParameterError("key", key, f"a key of both {FALLBACK_LANGUAGE}.json and {language}.json "
                                                 "in one folder of words")
    accepted = []
    for folder, (english, own) in held.items():
        chosen = [k for k in keys if k in own and k in english] if keys else [k for k in own if k in english]
        # Keys named: only the folders holding them are touched (an unrelated room's sidecar stays as it is).
        if not chosen and (keys or not own):
            continue
        sources = _read_json(sources_path(language, folder))
        sources.update({k: source_sha256(english[k]) for k in chosen})
        # In the order of the English file, gone keys dropped: the sidecar reads like its strings.
        ordered = {k: sources[k] for k in english if k in sources and k in own}
        text = json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"
        path = sources_path(language, folder)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            write_atomically(path, text)
        accepted.extend(chosen)
    return accepted


# --- checking -----------------------------------------------------------------------------------------


@dataclass
class CaseCheck:
    """How one case's translation stands against its room: its notebook's Markdown (cells) and
    its own words (``words``)."""

    case_id: str
    #: Markdown cells with words and no translation (or only a stub).
    missing: list[str] = field(default_factory=list)
    #: Entries whose hash is not that of the cell's English now.
    stale: list[str] = field(default_factory=list)
    #: Entries of cells the notebook no longer has (or that are no longer Markdown).
    orphan: list[str] = field(default_factory=list)
    translated: int = 0
    total: int = 0
    #: The translation file could not be read (counted as an orphan: it must be fixed).
    error: str | None = None
    #: The room's words against their English.
    words: "StringsCheck" = field(default_factory=lambda: StringsCheck())

    @property
    def n_missing(self) -> int:
        return len(self.missing) + self.words.n_missing

    @property
    def n_stale(self) -> int:
        return len(self.stale) + self.words.n_stale

    @property
    def n_orphan(self) -> int:
        return len(self.orphan) + bool(self.error) + self.words.n_orphan


@dataclass
class StringsCheck:
    """How a language's strings file stands against ``en.json``."""

    #: Keys of en.json the language lacks (they show in English).
    missing: list[str] = field(default_factory=list)
    #: Keys the language has and en.json does not (orphans).
    extra: list[str] = field(default_factory=list)
    #: Keys whose English changed since their translation was accepted (or never was).
    stale: list[str] = field(default_factory=list)
    #: Keys whose {placeholders} differ from the English ones (names, or a typed slot's kind):
    #: filling them would fail, lose a value or write it otherwise.
    placeholders: list[str] = field(default_factory=list)
    translated: int = 0
    total: int = 0

    @property
    def n_missing(self) -> int:
        return len(self.missing)

    @property
    def n_stale(self) -> int:
        return len(self.stale)

    @property
    def n_orphan(self) -> int:
        return len(self.extra) + len(self.placeholders)


@dataclass
class I18nReport:
    language: str
    cases: list[CaseCheck]
    strings: StringsCheck

    @property
    def n_missing(self) -> int:
        return sum(c.n_missing for c in self.cases) + self.strings.n_missing

    @property
    def n_stale(self) -> int:
        return sum(c.n_stale for c in self.cases) + self.strings.n_stale

    @property
    def n_orphan(self) -> int:
        return sum(c.n_orphan for c in self.cases) + self.strings.n_orphan

    def ok(self, strict: bool = False) -> bool:
        """Nothing stale or orphaned (nor, ``strict``, missing)."""
        return not self.n_stale and not self.n_orphan and not (strict and self.n_missing)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"language": self.language, "cases": [asdict(c) for c in self.cases],
                "strings": asdict(self.strings),
                "totals": {"missing": self.n_missing, "stale": self.n_stale, "orphan": self.n_orphan}}


def check_case(case_id: str, language: str, course_dir: str | Path | None = None) -> CaseCheck:
    result = CaseCheck(case_id, words=check_strings(language, room(case_id, course_dir).words_dir))
    try:
        translation = read_translation(case_id, language, course_dir)
    except ValueError as exc:
        result.error = str(exc)
        return result
    cells = [c for c in _notebook(case_id, course_dir).cells if _translatable(c)]
    ids = {c.id for c in cells}
    result.total = len(cells)
    for cell in cells:
        entry = translation.cells.get(cell.id)
        if entry is None or not isinstance(entry.get("text"), str):
            result.missing.append(cell.id)
        elif entry.get("source_sha256") != source_sha256(_source(cell)):
            result.stale.append(cell.id)
        else:
            result.translated += 1
    result.orphan = [k for k in translation.cells if k not in ids]
    return result


def check_strings(language: str, strings_dir: str | Path | None = None) -> StringsCheck:
    strings_dir = Path(strings_dir or STRINGS_DIR)
    english = _read_json(strings_dir / f"{FALLBACK_LANGUAGE}.json")
    own = _read_json(strings_dir / f"{language}.json")
    sources = _read_json(sources_path(language, strings_dir))
    result = StringsCheck(total=len(english))
    for key, text in english.items():
        if key not in own:
            result.missing.append(key)
            continue
        if sources.get(key) != source_sha256(text):
            result.stale.append(key)
        else:
            result.translated += 1
        # A number that only chooses the English word's plural ({n|segment|segments}) may go
        # unused in a language that has none.
        fields, optional = template_fields(text), choice_only_fields(text)
        # A typed slot ({budget:size}) is written by its kind: a translation types it alike.
        if (not (fields - optional <= template_fields(own[key]) <= fields)
                or template_kinds(own[key]).items() - template_kinds(text).items()
                or template_kinds(text).keys() & template_fields(own[key]) - template_kinds(own[key]).keys()):
            result.placeholders.append(key)
    result.extra = [k for k in own if k not in english]
    return result


def check(language: str, *, course_dir: str | Path | None = None,
          strings_dir: str | Path | None = None) -> I18nReport:
    """Every case's translation (its cells and its words) and the shared strings of ``language``
    against their English."""
    translation_language(language, strings_dir)
    return I18nReport(language, [check_case(c, language, course_dir) for c in available_cases(course_dir)],
                      check_strings(language, strings_dir))


# --- executed notebooks ------------------------------------------------------------------------------


def ran_in(nb: Any) -> str:
    """The language an executed notebook's kernel wrote its outputs in (English when unrecorded)."""
    return (nb.get("metadata", {}).get("tcplab") or {}).get(LANGUAGE_METADATA) or FALLBACK_LANGUAGE

