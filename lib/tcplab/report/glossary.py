"""The course's glossary: each term defined once, in plain words, in every language of the course,
and linked from its first use on each case page.

The glossary is data, ``course/glossary.toml``: a list ``jargon`` of the words a student page may
use only where the glossary defines them (the *jargon budget*), then one ``[[terms]]`` table per
term::

    jargon = ["truesize", "sk_buff", "GSO", …]

    [[terms]]
    id = "bdp"                                  # the anchor: #glossary-bdp
    en = "bandwidth-delay product"              # the term as a page names it
    en_aliases = ["BDP"]                        # other names, listed beside it
    en_forms = []                               # inflections a page writes, matched and not listed
    en_definition = "The line rate times …"     # `code` in backticks, as Markdown writes it
    zh = "带宽时延积"
    zh_aliases = []
    zh_definition = "线路速率乘以……"

A word is matched whole: ``sk_buff`` in ``sk_buffs`` no, ``TcpExt*`` (a trailing star) any word that
starts so (``TcpExtTCPRcvQDrop``); a word with a capital letter is matched as written, one in
lower case in any case and with a plural ``s`` (``segment``, ``Segments``).

:func:`link_terms` links the first use of each term on a page (in its paragraphs and list items,
not in headings, tables or code blocks) to its entry: ``#glossary-<id>``, the handout's glossary
page, or ``glossary.html#glossary-<id>`` beside a case's own page (:data:`PAGE_NAME`).
:func:`undefined_jargon` is what the jargon budget's test asks of a page's text.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..course import CourseError, course
from ..words import FALLBACK_LANGUAGE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["GLOSSARY_FILE", "PAGE_NAME", "Term", "Glossary", "read_glossary", "link_terms", "undefined_jargon",
           "anchor_of"]

GLOSSARY_FILE = "glossary.toml"
#: The glossary's own page beside a report's case pages (``glossary.html``, ``glossary.pdf``).
PAGE_NAME = "glossary"
ANCHOR_PREFIX = "glossary-"
#: The languages every entry defines its term in.
LANGUAGES = ("en", "zh")


def anchor_of(term_id: str) -> str:
    return ANCHOR_PREFIX + term_id


@dataclass(frozen=True)
class Term:
    id: str
    #: language -> the term as a page names it.
    names: dict[str, str]
    #: language -> other ways a page writes it.
    aliases: dict[str, tuple[str, ...]]
    #: language -> the definition, in plain words.
    definitions: dict[str, str]
    #: language -> inflections a page writes ("ACKs", "autotuned"): matched, not listed.
    forms: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def anchor(self) -> str:
        return anchor_of(self.id)

    def name(self, language: str) -> str:
        """The term as its entry shows it (its `code` in backticks, as Markdown writes it)."""
        return self.names.get(language) or self.names[FALLBACK_LANGUAGE]

    def definition(self, language: str) -> str:
        return self.definitions.get(language) or self.definitions[FALLBACK_LANGUAGE]

    def shown_aliases(self, language: str) -> tuple[str, ...]:
        """The aliases an entry lists beside its name: the language's own, else English's (a symbol
        such as ``cwnd`` reads the same in every language); no glob."""
        aliases = self.aliases.get(language) or self.aliases.get(FALLBACK_LANGUAGE, ())
        return tuple(a for a in aliases if not a.endswith("*") and a not in _name_words(self.name(language)))

    def words(self) -> tuple[str, ...]:
        """Every way a page in any language writes the term: a Chinese page writes many English
        symbols (``cwnd``, ``sk_buff``) as they are."""
        names = [part for lang in LANGUAGES for part in _name_words(self.names.get(lang, ""))]
        found = (names + [a for lang in LANGUAGES for a in self.aliases.get(lang, ())]
                 + [f for lang in LANGUAGES for f in self.forms.get(lang, ())])
        return tuple(dict.fromkeys(w for w in found if w))


def _name_words(name: str) -> list[str]:
    """The words a page writes for a term's name: the name, or the code it names in backticks
    (each of "`tcp_rmem` and `tcp_wmem`")."""
    codes = re.findall(r"`([^`]+)`", name)
    return codes or [name]


def _pattern(word: str) -> str:
    """A regular expression matching ``word`` whole, as the module's docstring says."""
    glob = word.endswith("*")
    core = re.escape(word.rstrip("*"))
    if glob:
        core += r"[\w-]*"
    elif word.islower() and word[-1:].isalpha():
        core += "s?"
    cjk = any(ord(c) >= 0x2E80 for c in word)
    edge_before = "" if cjk else r"(?<![\w-])"
    edge_after = "" if cjk else r"(?![\w])(?!-\w)"
    flags = "(?i:" if word.islower() else "(?:"
    return f"{edge_before}{flags}{core}){edge_after}"


@dataclass(frozen=True, eq=False)  # one per read of the file: hashed by identity, for its matcher's cache
class Glossary:
    terms: tuple[Term, ...]
    #: Words a student page may use only where the glossary defines them.
    jargon: tuple[str, ...] = ()

    def term(self, term_id: str) -> Term:
        for term in self.terms:
            if term.id == term_id:
                return term
        raise KeyError(term_id)

    def sorted_terms(self, language: str) -> list[Term]:
        """The entries in the order a reader looks them up: alphabetical by name (a Chinese name
        by its characters' code points, which groups terms that start alike)."""
        return sorted(self.terms, key=lambda t: t.name(language).strip("`").lower())

    @property
    def matcher(self) -> re.Pattern[str]:
        return _matcher(self)

    def term_of(self, text: str) -> Term | None:
        """The term ``text`` (a match of :attr:`matcher`) writes."""
        for term in self.terms:
            if any(re.fullmatch(_pattern(w), text) for w in term.words()):
                return term
        return None

    def defines(self, word: str) -> bool:
        """Whether some entry names or aliases the jargon word ``word`` (or a word it covers)."""
        plain = word.rstrip("*")
        return any(re.fullmatch(_pattern(w), plain) for term in self.terms for w in term.words())


@lru_cache(maxsize=8)
def _matcher(glossary: Glossary) -> re.Pattern[str]:
    words = sorted({w for term in glossary.terms for w in term.words()}, key=len, reverse=True)
    return re.compile("|".join(_pattern(w) for w in words))


def read_glossary(course_dir: str | Path | None = None) -> Glossary | None:
    """The course's glossary (None for a course folder without one), every entry checked: an id,
    a name and a definition in every language, no id or word twice."""
    path = course(course_dir).folder / GLOSSARY_FILE
    if not path.is_file():
        return None
    return _read(path, path.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _read(path: Path, _mtime: int) -> Glossary:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path}: {exc}") from None
    terms, seen_words = [], {}
    for i, entry in enumerate(data.get("terms", []), 1):
        term_id = entry.get("id")
        if not term_id or not re.fullmatch(r"[a-z0-9-]+", term_id):
            raise CourseError(f"{path}: term {i} needs an id of lower-case letters, digits and '-'")
        missing = [f"{lang}{part}" for lang in LANGUAGES for part in ("", "_definition")
                   if not str(entry.get(f"{lang}{part}", "")).strip()]
        if missing:
            raise CourseError(f"{path}: term {term_id!r} lacks {', '.join(missing)}")
        term = Term(term_id, {lang: entry[lang].strip() for lang in LANGUAGES},
                    {lang: tuple(entry.get(f"{lang}_aliases", ())) for lang in LANGUAGES},
                    {lang: entry[f"{lang}_definition"].strip() for lang in LANGUAGES},
                    {lang: tuple(entry.get(f"{lang}_forms", ())) for lang in LANGUAGES})
        for word in term.words():
            other = seen_words.setdefault(word.lower() if word.islower() else word, term_id)
            if other != term_id:
                raise CourseError(f"{path}: {word!r} is a word of both {other!r} and {term_id!r}")
        terms.append(term)
    ids = [t.id for t in terms]
    if len(set(ids)) != len(ids):
        raise CourseError(f"{path}: an id is used twice: {sorted(i for i in ids if ids.count(i) > 1)}")
    return Glossary(tuple(terms), tuple(data.get("jargon", ())))


#: TeX in a page's text, which KaTeX typesets in the browser: no link may land inside it.
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$|\\\(.+?\\\)|\\\[.+?\\\]", re.S)

#: A title or words quoted as written (a seed's 《title》, a tool's "Window Full"): not linked inside.
_QUOTED = re.compile(r"《[^》]*》|\"[^\"]*\"|“[^”]*”")

#: Where a term is not linked: headings, tables, code blocks, maths, links, the worksheet.
_SKIP = {"h1", "h2", "h3", "h4", "h5", "h6", "table", "pre", "a", "caption", "script", "style", "svg"}
_SKIP_CLASSES = ("katex", "tcplab-worksheet-box", "tcplab-units")


def _skipped(element) -> bool:
    for parent in [element, *element.parents]:
        if getattr(parent, "name", None) in _SKIP:
            return True
        if any(c in (parent.get("class") or []) for c in _SKIP_CLASSES) if hasattr(parent, "get") else False:
            return True
    return False


def link_terms(soup, glossary: Glossary, *, href_prefix: str = "#") -> set[str]:
    """Link the first use of each term in ``soup`` (a page's cells, changed in place) to its entry;
    returns the ids of the terms linked. Only paragraphs and list items are searched: a term that
    first appears in a table or a heading is linked at its first use in the text after it."""
    from bs4 import NavigableString

    linked: set[str] = set()
    matcher = glossary.matcher
    for block in soup.find_all(["p", "li"]):
        if _skipped(block):
            continue
        for node in list(block.descendants):
            if not isinstance(node, NavigableString) or node.parent is None or _skipped(node.parent):
                continue
            if node.parent.name == "code":
                term = glossary.term_of(str(node).strip()) if matcher.fullmatch(str(node).strip()) else None
                if term is not None and term.id not in linked:
                    code = node.parent
                    link = soup.new_tag("a", href=href_prefix + term.anchor, attrs={"class": "tcplab-term"})
                    code.wrap(link)
                    linked.add(term.id)
                continue
            text, pieces, start = str(node), [], 0
            maths = [m.span() for m in _MATH.finditer(text)] + [m.span() for m in _QUOTED.finditer(text)]
            for match in matcher.finditer(text):
                term = glossary.term_of(match.group(0))
                if term is None or term.id in linked or any(a <= match.start() < b for a, b in maths):
                    continue
                pieces.append(text[start:match.start()])
                link = soup.new_tag("a", href=href_prefix + term.anchor, attrs={"class": "tcplab-term"})
                link.string = match.group(0)
                pieces.append(link)
                start = match.end()
                linked.add(term.id)
            if pieces:
                pieces.append(text[start:])
                for piece in pieces:
                    node.insert_before(piece if not isinstance(piece, str) else NavigableString(piece))
                node.extract()
    return linked


def undefined_jargon(text: str, glossary: Glossary) -> list[str]:
    """The jargon words (:attr:`Glossary.jargon`) ``text`` uses that no entry defines."""
    return [word for word in glossary.jargon
            if re.search(_pattern(word), text) and not glossary.defines(word)]
