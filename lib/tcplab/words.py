"""Every word tcplab shows a reader, looked up by key.

The words several cases share live in ``strings/<language>.json``: flat keys under a namespace,
``rule.``, ``scores.``, ``status.``, ``handout.``, ``page.``, … for report pages, ``column.`` and
``cell.`` for tables, ``unit.``, ``error.``, ``label.<code>.title`` / ``.explanation``,
``evidence.``, ``caveat.``, ``diagnosis.`` and ``metric.`` (a flow's numbers by field) for the
diagnosis. A case's own words (its sentences ``prose.<case>.*``, notes, plots' titles, check
names, its cheat-sheet row) live in its room, ``course/<case>/words/<language>.json``
(:mod:`tcplab.course`); a language's words are both, read as one set, and a key may be in one file
only. A translation is one more file per folder and no code change; a key it lacks falls back to
English, so a partial translation still renders. Code above this module (plots, analysis, report)
imports down to it.
"""

from __future__ import annotations

import json
import os
import re
import string
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from .folders import COURSE_DIR, WORDS

#: The kind of a lab kernel in its label: "(host)" after "6.18.44", "(user namespace)", "(UML)".
_KERNEL_KIND = re.compile(r"(?<=\S )\(([A-Za-z][A-Za-z ]*)\)")

__all__ = ["Messages", "messages", "default_language", "speaking", "languages", "template_fields", "choice_only_fields", "STRINGS_DIR",
           "words_dirs", "all_words", "DuplicateWords", "fill", "template_kinds",
           "SaidWhereItArose", "SaidByReason"]

STRINGS_DIR = Path(__file__).parent / "strings"
FALLBACK_LANGUAGE = "en"


#: The language a command was asked to speak (``--language``), while it runs: see :func:`speaking`.
_SPOKEN: ContextVar[str | None] = ContextVar("tcplab_language", default=None)


def default_language() -> str:
    """The language a command speaks (:func:`speaking`), else the one asked for by
    ``TCPLAB_LANG``, English when neither is set."""
    return _SPOKEN.get() or os.environ.get("TCPLAB_LANG", "").strip() or FALLBACK_LANGUAGE


@contextmanager
def speaking(language: str | None) -> Iterator[None]:
    """Within the block, words looked up without a language (errors among them) are
    ``language``'s; None leaves the language as it was. For a command's ``--language``: the
    process's environment stays as it is."""
    token = _SPOKEN.set(language or _SPOKEN.get())
    try:
        yield
    finally:
        _SPOKEN.reset(token)


def languages() -> list[str]:
    """The languages with a strings file (``<language>.sources.json``, a translation's record of the
    English it translates (:mod:`tcplab.i18n`), is none)."""
    return sorted(p.stem for p in STRINGS_DIR.glob("*.json") if "." not in p.stem)


class DuplicateWords(ValueError):
    """One key in two words files: which one a page would show is left to chance."""


def words_dirs(course_dir: Path | None = None) -> list[Path]:
    """The folders of words: the shared ones (``strings/``), then each room's ``words/`` (a
    room that has one; :mod:`tcplab.course` owns which rooms are the course's)."""
    course_dir = Path(course_dir or COURSE_DIR)
    return [STRINGS_DIR, *sorted(p for p in course_dir.glob(f"*/{WORDS}") if p.is_dir())]


def _read_words(path: Path) -> dict[str, str]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@lru_cache(maxsize=None)
def _load(language: str) -> dict[str, str]:
    path = STRINGS_DIR / f"{language}.json"
    # A name with a dot is no language ("zh.sources" is the record of what zh translates): read
    # as one, every word would be a hash, the error that refuses it among them.
    if "." in language or "/" in language or not path.is_file():
        if language == FALLBACK_LANGUAGE:
            raise FileNotFoundError(f"tcplab's English strings are missing: {path}")
        return {}
    words: dict[str, str] = {}
    where: dict[str, Path] = {}
    for folder in words_dirs():
        for key, text in _read_words(folder / f"{language}.json").items():
            if key in words:
                raise DuplicateWords(f"{key!r} is in {where[key]} and in {folder / f'{language}.json'}")
            words[key], where[key] = text, folder / f"{language}.json"
    return words


def all_words(language: str = FALLBACK_LANGUAGE) -> dict[str, str]:
    """Every key of ``language`` and its text: the shared strings and every room's words."""
    return dict(_load(language))


@lru_cache(maxsize=None)
def _patterns(namespace: str) -> tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...]:
    """The English keys of ``namespace`` with placeholders (``check.Nagle stall at {rtt}``) as
    patterns of whole texts, with their keys and field names; the most literal text first, and
    of two as literal the one with fewer fields, so that the more specific of two patterns that
    both match a text wins."""
    found = []
    for key in _load(FALLBACK_LANGUAGE):
        if not key.startswith(namespace + ".") or "{" not in key:
            continue
        parts = re.split(r"\{(\w+)\}", key[len(namespace) + 1:])  # literal, field, literal, …
        literal, fields = parts[::2], tuple(parts[1::2])
        pattern = re.compile("(.+?)".join(re.escape(text) for text in literal), re.DOTALL)
        found.append((-sum(map(len, literal)), len(fields), pattern, key, fields))
    found.sort(key=lambda item: item[:2])
    return tuple((pattern, key, fields) for *_, pattern, key, fields in found)


#: A word that agrees with a number in the same template: ``{probes} {probes|time|times}`` writes
#: "1 time" or "3 times". The choice follows the number as the page writes it (English's rule:
#: "1" alone is singular, "1.5" and "0" are not); a language without plurals (zh) writes its word
#: once and needs no choice.
_PLURAL = re.compile(r"\{(\w+)\|([^{}|]*)\|([^{}|]*)\}")


#: A slot that says what kind of quantity fills it: ``{budget:size}``, ``{rtts:list of duration}``.
#: Its writer (:data:`tcplab.report.prose.KINDS`) turns the run's number into the slot's text; here
#: a kind is a word of three letters or more, which no Python format specification is.
_TYPED = re.compile(r"\{(\w+):([a-z][a-z_ ]{2,})\}")


def template_kinds(template: str) -> dict[str, str]:
    """The typed slots of a template and their kinds: ``{"budget": "size"}``."""
    return {m.group(1): m.group(2) for m in _TYPED.finditer(template)}


def fill(template: str, fields: dict[str, Any]) -> str:
    """``template`` with ``fields`` filled in (a typed slot takes its field's text as it is) and
    each plural choice agreeing with its number."""
    return _agree(_TYPED.sub(r"{\1}", template), fields).format(**fields)


def _agree(template: str, fields: dict[str, Any]) -> str:
    def choose(match: re.Match[str]) -> str:
        name, one, other = match.groups()
        return one if str(fields.get(name, "")).strip() == "1" else other
    return _PLURAL.sub(choose, template)


def choice_only_fields(template: str) -> set[str]:
    """The numbers a template names only to choose a word ("unit.segments":
    ``{n|segment|segments}``): a language without plurals may leave them out."""
    return {m.group(1) for m in _PLURAL.finditer(template)} - template_fields(_PLURAL.sub("", template))


def template_fields(template: str) -> set[str]:
    """The names a template fills in, a plural choice's among them (by its number's name)."""
    plain = _PLURAL.sub(lambda m: "{%s}" % m.group(1), template)
    try:
        return {name for _, name, _, _ in string.Formatter().parse(plain) if name is not None}
    except ValueError:
        return {"<unbalanced braces>"}


class Messages:
    """Looks up and fills in user-facing strings of one language."""

    def __init__(self, language: str | None = None) -> None:
        self.language = language or default_language()
        self._own = _load(self.language)
        self._fallback = _load(FALLBACK_LANGUAGE)

    def __call__(self, key: str, /, **fields: Any) -> str:
        template = self._own.get(key, self._fallback.get(key))
        if template is None:
            # A visible key beats a crash in the middle of a report; tests catch it.
            return key
        return fill(template, fields) if fields else template

    def template(self, key: str) -> str | None:
        """The template of ``key`` in this language (English where it has none), unfilled."""
        return self._own.get(key, self._fallback.get(key))

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
        return self._templated("check", name)

    def _templated(self, namespace: str, text: str, fill=lambda value: value) -> str | None:
        """``text`` in this language by its key ``namespace.text``, else by the first English
        key of ``namespace`` whose template matches it, filled with what the placeholders
        matched (each passed through ``fill``); None when neither has it."""
        if self.has(f"{namespace}.{text}"):
            return self(f"{namespace}.{text}")
        for pattern, key, fields in _patterns(namespace):
            found = pattern.fullmatch(text)
            if found:
                return self(key, **{field: fill(value) for field, value in zip(fields, found.groups())})
        return None

    def error_phrase(self, text: str) -> str:
        """A phrase of an error message (what a parameter accepts, why a value was refused), as
        the code wrote it in English, in this language: by its key ``error.<text>`` or a template
        (``error.one of {choices}``), whose parts are phrases again; the text itself when no key
        has it, so that an untranslated phrase still reads."""
        return self._templated("error", text, fill=self.error_phrase) or text

    def parameter_error(self, name: str, value: object, accepted: str, why: str = "") -> str:
        """The sentence of a :class:`~tcplab.units.ParameterError`: the parameter, the value it
        was given, why that was refused and what is accepted."""
        detail = self("parameter_error.why", why=self.error_phrase(why)) if why else ""
        return self("parameter_error.sentence", name=name, value=repr(value), detail=detail,
                    accepted=self.error_phrase(accepted))

    def kernels(self, text: str | None) -> str:
        """Lab kernels as a page names them ("6.18.44 (host), 6.1.176 (UML)", the English label a
        run record and the scores keep) in this language: each kind in brackets after a release by
        its key ``kernel_kind.<kind>``, the kind itself where no key has it."""
        return _KERNEL_KIND.sub(lambda m: f"({self._or_itself('kernel_kind', m[1])})", text or "")

    def cell(self, text: str) -> str:
        """A table cell's words as a page shows them (``cell.<text>``, a row's name such as
        "round-trip time (TCP, median)"), or by a key with placeholders where the row's name carries
        the run's values (``cell.here: max({tcp_rmem_max}, {rmem_max})``); the text itself, a
        variant's label or a value, when no key has it."""
        return self._templated("cell", text) or text

    def metric(self, name: str) -> str:
        """A flow's number named in words (``metric.<field>``, e.g. ``rtt_median_s``, a field of
        :class:`~tcplab.analysis.metrics.FlowMetrics` and its ``--json`` key); the field itself
        when no key has it."""
        return self._or_itself("metric", name)

    def unit(self, name: str, count: Any = None) -> str:
        """A check's unit as a page writes it (``unit.<name>``): words such as "segments" are
        translated, and agree with ``count`` where the language's word has a plural choice on
        ``{n}`` ("1 segment"; no count: the plural); symbols (ms, MB/s, B) have no key and stay
        as they are."""
        key = f"unit.{name}"
        if not name or not self.has(key):
            return name
        return _agree(self(key), {"n": 1 if count == 1 else ""})

    def variant(self, case_id: str, label: str) -> str:
        """A case's variant as its pages name it: by the case's words (``variant.<case>.<label>``,
        or a key with placeholders, ``variant.<case>.ex1-sndbuf-16KB-{rtt}``), else the label in
        plain words ("sndbuf 16KB rtt1"); a repetition (``label#2``) says which run it is. The label
        itself names the variant in run records, ``tcplab run --variant`` and replay data."""
        base, sep, repetition = label.partition("#")
        name = (self._templated(f"variant.{case_id}", base, fill=_quantity_in_words)
                or " ".join(re.split(r"[-_]+", base)).strip() or base)
        return self("variant.repetition", name=name, n=repetition) if sep else name

    def backends(self, codes: str) -> str:
        """Backend codes as pages name them: "delayline,netem" (cases that ran on both) is
        "delay line, netem"."""
        return ", ".join(self.label("backend", code.strip()) for code in codes.split(","))

    def column(self, name: str) -> str:
        """A table's column header (or a figure's axis named after one) as a page shows it, in
        words (``goodput_bps`` → "goodput bps", looked up as ``column.goodput bps``); the header
        itself (a kernel field, a variant's label, a unit) when no key has it. Only a header that
        is one identifier is a field name to put in words: in a header of several words (or a
        variant's label) an underscore belongs to a kernel name ("sender SO_SNDBUF",
        "host-tcp_mem") and stays."""
        if name.isidentifier():
            name = name.replace("_", " ")
        return self._templated("column", name) or name



#: A quantity as a label writes it ("16KB", "20ms", "4mbit") and the unit a page writes it in.
_LABEL_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(KB|MB|GB|B|ms|s|gbit|mbit|kbit)")
_UNITS_IN_WORDS = {"gbit": "Gbit/s", "mbit": "Mbit/s", "kbit": "kbit/s"}


def _quantity_in_words(text: str) -> str:
    """A label's quantity with a space and the page's unit ("16 KB", "20 ms", "4 Mbit/s"); anything
    else (curl's "200K", a word) as it is."""
    found = _LABEL_QUANTITY.fullmatch(text)
    if found is None:
        return text
    return f"{found.group(1)} {_UNITS_IN_WORDS.get(found.group(2), found.group(2))}"


class SaidWhereItArose:
    """An exception whose message is words in the language in force where it arose (a page's,
    or ``--language``). Pickled as what rebuilds it (:meth:`_rebuilt_by`) plus the message as it
    was said, so that it travels back from a UML lab kernel as itself and still says what it
    said there."""

    args: tuple

    def _rebuilt_by(self) -> tuple[Any, tuple]:
        """A callable and its arguments that make this exception again."""
        raise NotImplementedError

    def __reduce__(self):
        rebuild, arguments = self._rebuilt_by()
        return rebuild, arguments, {"args": self.args}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.args = state["args"]


class SaidByReason(SaidWhereItArose):
    """An exception said by a key: ``reason`` names a key under the class's :attr:`KEYS`
    (``replay_missing``, ``pcap_error`` …) in the strings files, filled with ``fields``."""

    KEYS: str = ""

    def __init__(self, reason: str, **fields: Any) -> None:
        self.reason, self.fields = reason, fields
        super().__init__(messages()(f"{self.KEYS}.{reason}", **fields))

    def _rebuilt_by(self) -> tuple[Any, tuple]:
        return rebuilt_by_reason, (type(self), self.reason, self.fields)


def rebuilt_by_reason(cls: type, reason: str, fields: dict[str, Any]) -> Exception:
    """``cls(reason, **fields)``: what unpickling calls to make a :class:`SaidByReason` (or a
    warning said the same way) again."""
    return cls(reason, **fields)


def messages(language: str | None = None) -> Messages:
    return Messages(language)
