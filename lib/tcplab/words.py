"""Every word tcplab shows a reader, looked up by key in ``strings/<language>.json``.

One file per language, flat keys under a namespace: ``rule.``, ``scores.``, ``status.``,
``handout.``, ``page.``, … for report pages, ``plot.`` for figures, ``label.<code>.title`` /
``.explanation``, ``evidence.``, ``caveat.``, ``diagnosis.`` and ``metric.`` (a flow's numbers by
field) for the diagnosis. A
translation is one more file and no code change; a key it lacks falls back to English, so a
partial translation still renders. Code above this module (plots, analysis, report) imports
down to it.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from .units import ParameterError

__all__ = ["Messages", "messages", "default_language", "languages", "check_language", "STRINGS_DIR"]

STRINGS_DIR = Path(__file__).parent / "strings"
FALLBACK_LANGUAGE = "en"


def default_language() -> str:
    """The language asked for by ``TCPLAB_LANG``, English when unset."""
    return os.environ.get("TCPLAB_LANG", "").strip() or FALLBACK_LANGUAGE


def languages() -> list[str]:
    """The languages with a strings file (``<language>.sources.json``, a translation's record of the
    English it translates (:mod:`tcplab.i18n`), is none)."""
    return sorted(p.stem for p in STRINGS_DIR.glob("*.json") if "." not in p.stem)


def check_language(language: str) -> str:
    """``language`` when it has a strings file; else a :class:`ParameterError` listing those that do."""
    if language not in languages():
        raise ParameterError("language", language, "one of " + ", ".join(languages()))
    return language


@lru_cache(maxsize=None)
def _load(language: str) -> dict[str, str]:
    path = STRINGS_DIR / f"{language}.json"
    if not path.is_file():
        if language == FALLBACK_LANGUAGE:
            raise FileNotFoundError(f"tcplab's English strings are missing: {path}")
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _check_patterns() -> tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...]:
    """The English ``check.`` keys with placeholders as patterns of whole check names, with
    their keys and field names; the most literal text first, so that the more specific of two
    patterns that both match a name wins."""
    found = []
    for key in _load(FALLBACK_LANGUAGE):
        if not key.startswith("check.") or "{" not in key:
            continue
        parts = re.split(r"\{(\w+)\}", key[len("check."):])  # literal, field, literal, …
        literal, fields = parts[::2], tuple(parts[1::2])
        pattern = re.compile("(.+?)".join(re.escape(text) for text in literal))
        found.append((sum(map(len, literal)), pattern, key, fields))
    found.sort(key=lambda item: -item[0])
    return tuple((pattern, key, fields) for _, pattern, key, fields in found)


class Messages:
    """Looks up and fills in user-facing strings of one language."""

    def __init__(self, language: str | None = None) -> None:
        self.language = language or default_language()
        self._own = _load(self.language)
        self._fallback = _load(FALLBACK_LANGUAGE)

    def __call__(self, key: str, **fields: Any) -> str:
        template = self._own.get(key, self._fallback.get(key))
        if template is None:
            # A visible key beats a crash in the middle of a report; tests catch it.
            return key
        return template.format(**fields) if fields else template

    def has(self, key: str) -> bool:
        return key in self._own or key in self._fallback

    def _or_itself(self, namespace: str, text: str) -> str:
        """``namespace.text`` in this language; ``text`` itself when no key has it."""
        key = f"{namespace}.{text}"
        return self(key) if self.has(key) else text

    def label(self, group: str, value: str | None) -> str:
        """The display word for a code such as ``backend=delayline``; the code itself if unknown."""
        if value is None or value == "":
            return self("value.unknown")
        return self._or_itself(group, str(value))

    def check_name(self, name: str) -> str:
        """A scored check's name as a page shows it (``check.<name>``); the name itself, which
        stays the check's identifier (summary.json, worksheets, grading), when no key has it.

        A check whose name carries a case's parameters ("Nagle stall at 20ms") is keyed by the
        name with placeholders ("check.Nagle stall at {rtt}"): the values the name was built with
        fill this language's template, so the words follow a changed parameter too. A name that
        a case prefixes with a kernel ("6.1.176 (UML): …") is looked up without it."""
        words = self._check_words(name)
        if words is not None:
            return words
        prefix, sep, rest = name.partition(": ")
        if sep and prefix[:1].isdigit():
            words = self._check_words(rest)
            if words is not None:
                return f"{prefix}: {words}"
        return name

    def _check_words(self, name: str) -> str | None:
        if self.has(f"check.{name}"):
            return self(f"check.{name}")
        for pattern, key, fields in _check_patterns():
            found = pattern.fullmatch(name)
            if found:
                return self(key, **dict(zip(fields, found.groups())))
        return None

    def cell(self, text: str) -> str:
        """A table cell's words as a page shows them (``cell.<text>``, a row's name such as
        "round-trip time (TCP, median)"); the text itself, a variant's label or a value, when
        no key has it."""
        return self._or_itself("cell", text)

    def metric(self, name: str) -> str:
        """A flow's number named in words (``metric.<field>``, e.g. ``rtt_median_s``, a field of
        :class:`~tcplab.analysis.metrics.FlowMetrics` and its ``--json`` key); the field itself
        when no key has it."""
        return self._or_itself("metric", name)

    def unit(self, name: str) -> str:
        """A check's unit as a page writes it (``unit.<name>``): words such as "segments" are
        translated, symbols (ms, MB/s, B) have no key and stay as they are."""
        return self._or_itself("unit", name) if name else name

    def column(self, name: str) -> str:
        """A table's column header (or a figure's axis named after one) as a page shows it, in
        words (``goodput_bps`` → "goodput bps", looked up as ``column.goodput bps``); the header
        itself (a kernel field, a variant's label, a unit) when no key has it. Only a header that
        is one identifier is a field name to put in words: in a header of several words (or a
        variant's label) an underscore belongs to a kernel name ("sender SO_SNDBUF",
        "host-tcp_mem") and stays."""
        if name.isidentifier():
            name = name.replace("_", " ")
        return self._or_itself("column", name)


def messages(language: str | None = None) -> Messages:
    return Messages(language)
