"""Answers read the way students write them, and nothing of them run.

A worksheet cell is ``predictions = {"item": value, ...}``. :func:`written_answers` reads what each
line holds as the student wrote it: with :mod:`ast` where the cell parses, else line by line (a
student's ``16KB``, ``0,22`` or ``４２`` is no Python, and still an answer). :func:`read_answer`
then reads one answer as the number or word its item asks for:

* a number, with or without its unit, converted when the unit is of the item's kind ("16 KB",
  "16kB" and 16384 for bytes; "0.2 s" and "200 ms" for a duration; "5x", "5 times", "约5倍" for a
  ratio; "4 probes" for a count); a bare number is in the item's unit;
* full-width digits and signs (NFKC), a decimal comma ("2,5"; "262,142" and "262 142" group
  thousands), hedges ("about", "~", "≈", "约", "左右");
* arithmetic of numbers (``2 * 16 * 1024``, ``(40 + 20) / 1000``), worked out by walking its
  syntax tree: numbers and + - * / // ** and parentheses only, exponents bounded; never ``eval``;
* a unit of another kind is named as such (:data:`WRONG_UNIT`: "you wrote Mbit/s; the item asks
  MB/s"), never converted across kinds or silently wrong; an unreadable one says how to write it;
* a word against the item's listed choices, read without case, spaces or punctuation
  ("Nagle + delayed ACK" is ``nagle-delayed-ack``).
"""

from __future__ import annotations

import ast
import math
import operator
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Written", "Reading", "written_answers", "read_value", "read_answer", "canonical", "unit_factor",
           "BLANK", "NUMBER", "WORD", "WRONG_UNIT", "UNREADABLE", "NOT_A_CHOICE", "KIND_UNITS"]

# What an answer reads as (Reading.status).
BLANK, NUMBER, WORD = "blank", "number", "word"
WRONG_UNIT, UNREADABLE, NOT_A_CHOICE = "wrong_unit", "unreadable", "not_a_choice"


@dataclass(frozen=True)
class Written:
    """One worksheet line's value as written (its source text) and as a literal reads it."""

    text: str
    #: None (blank), a number, a string or a bool; the text itself where it is no literal.
    value: Any


@dataclass(frozen=True)
class Reading:
    """An answer read as its item asks: a number in the item's unit, a word of its choices."""

    status: str
    value: Any = None
    #: The unit the student wrote, where it mattered (a wrong kind, a converted one).
    unit: str = ""


# -- the worksheet's lines ------------------------------------------------------------------------

_LINE = re.compile(r"""^\s*(?P<q>['"])(?P<key>.*?)(?P=q)\s*[:：]\s*(?P<value>.*?)\s*$""")


def written_answers(source: str) -> dict[str, Written]:
    """Each key of the cell's ``predictions`` dict and its value as written; an empty dict when no
    line of the cell reads as ``"item": value``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _by_lines(source)
    table = None
    for node in ast.walk(tree):
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == "predictions" and isinstance(node.value, ast.Dict):
            table = node.value
    if table is None:
        return _by_lines(source)
    found = {}
    for key, value in zip(table.keys, table.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            text = ast.get_source_segment(source, value) or ""
            found[key.value] = Written(text, read_value(text))
    return found


def _by_lines(source: str) -> dict[str, Written]:
    found = {}
    for line in source.splitlines():
        match = _LINE.match(line)
        if match:
            text = _without_comment(match.group("value")).rstrip().rstrip(",，").strip()
            found[match.group("key")] = Written(text, read_value(text))
    return found


def _without_comment(text: str) -> str:
    """``text`` up to a ``#`` that is outside quotes."""
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return text[:i]
    return text


def read_value(text: str) -> Any:
    """A value's source text as a literal reads it: None, a number, a string, a bool, or the text
    itself where it is none (``16KB``); arithmetic of numbers is worked out (:func:`_arithmetic`)."""
    text = text.strip()
    if not text:
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, bool, int, float))):
        return node.value
    number = _arithmetic(node)
    return text if number is None else number


# -- arithmetic, by walking the tree ------------------------------------------------------------------

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod}
_SIGNS = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _arithmetic(node: ast.AST, depth: int = 0) -> float | None:
    """The number an expression of numbers and + - * / // ** % stands for; None for anything else
    (a name, a call, an exponent that would not be a number a student means)."""
    if depth > 30:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _SIGNS:
        inner = _arithmetic(node.operand, depth + 1)
        return None if inner is None else _SIGNS[type(node.op)](inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _arithmetic(node.left, depth + 1), _arithmetic(node.right, depth + 1)
        if left is None or right is None or isinstance(node.op, ast.Pow) and abs(right) > 64:
            return None
        try:
            result = _OPERATORS[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        return result if isinstance(result, (int, float)) and math.isfinite(result) else None
    return None


# -- units of each kind ---------------------------------------------------------------------------------

#: The units an answer may carry, by the kind of quantity (:data:`tcplab.report.prose.KINDS`) and
#: each one's size in the kind's base (seconds, bytes, bit/s, B/s, percent, a plain number). Sizes
#: are binary (KB = 1024 B) as the course writes buffers; rates decimal (MB/s = 10⁶ B/s).
KIND_UNITS: dict[str, dict[str, float]] = {
    "duration": {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1, "ms": 1e-3, "msec": 1e-3,
                 "millisecond": 1e-3, "milliseconds": 1e-3, "毫秒": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6,
                 "microseconds": 1e-6, "微秒": 1e-6, "ns": 1e-9, "min": 60, "minutes": 60},
    "size": {"b": 1, "byte": 1, "bytes": 1, "字节": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2,
             "mb": 1024 ** 2, "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3},
    "rate": {"bit/s": 1, "bps": 1, "kbit/s": 1e3, "kbit": 1e3, "kbps": 1e3, "kb/s": 1e3, "mbit/s": 1e6, "mbit": 1e6,
             "mbps": 1e6, "mb/s": 1e6, "gbit/s": 1e9, "gbit": 1e9, "gbps": 1e9, "gb/s": 1e9},
    "byte_rate": {"B/s": 1, "KB/s": 1e3, "kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "bytes/s": 1, "字节/秒": 1},
    "percent": {"%": 1, "percent": 1, "pct": 1, "％": 1},
    "times": {"x": 1, "×": 1, "times": 1, "fold": 1, "倍": 1},
    "count": {"probes": 1, "probe": 1, "segments": 1, "segment": 1, "packets": 1, "packet": 1, "round trips": 1,
              "round trip": 1, "rtts": 1, "rtt": 1, "个": 1, "次": 1, "段": 1, "shift": 1, "bits": 1},
}
#: Kinds whose units read alike (``bytes`` is a size written to the byte).
_SAME_AS = {"bytes": "size", "change": "percent"}
#: Units of rates are read case-sensitively first: "Mb/s" is bits, "MB/s" bytes.
_CASED = {"byte_rate"}
_HEDGES = re.compile(r"^(?:about|approx\.?|approximately|around|roughly|circa|ca\.|~|≈|约|大约|大概|近)\s*|\s*(?:左右|上下|or so)$")
_NUMBER_PART = re.compile(r"^(?P<number>[-+(\s]*[\d.][\d.,\s]*(?:e[-+]?\d+)?(?:\s*[-+*/×÷^()]\s*[\d.(][\d.,\s]*(?:e[-+]?\d+)?\)*)*\)*)\s*(?P<unit>.*)$",
                          re.IGNORECASE)


def _kind(kind: str) -> str:
    return _SAME_AS.get(kind, kind)


def unit_factor(unit: str, kind: str) -> float | None:
    """The size of ``unit`` in the base of ``kind`` (``ms`` is 0.001 of a second); None when the
    unit is not one of the kind's. The empty unit is the base itself."""
    kind = _kind(kind)
    if not unit:
        return 1.0
    table = KIND_UNITS.get(kind, {})
    if kind in _CASED and unit in table:
        return table[unit]
    return next((size for name, size in table.items() if name.lower() == unit.lower()), None)


def _kind_of_unit(unit: str) -> str | None:
    for kind in ("byte_rate", "rate", "duration", "size", "percent", "times", "count"):
        if unit_factor(unit, kind) is not None:
            return kind
    return None


def _number(text: str) -> float | None:
    """A number written with thousands grouped, a decimal comma, or as arithmetic."""
    text = text.strip().replace("×", "*").replace("÷", "/").replace("^", "**")
    if re.fullmatch(r"\d{1,3}(?:[ \u202f\u00a0,]\d{3})+(?:\.\d+)?", text):
        text = re.sub(r"[ \u202f\u00a0,]", "", text)  # 262 142, 262,142: thousands
    elif text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")  # 2,5: a decimal comma
    value = read_value(text)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def canonical(word: str) -> str:
    """A word answer without case, spaces or punctuation between its parts: "Nagle + delayed ACK"
    and "nagle-delayed-ack" read the same."""
    word = unicodedata.normalize("NFKC", word).casefold()
    return "-".join(part for part in re.split(r"[^\w]+|_", word.replace("+", " ")) if part)


def read_answer(value: Any, *, kind: str, unit: str = "", choices: Sequence[str] = ()) -> Reading:
    """``value`` (as :func:`written_answers` read it) as an item of ``kind`` asks: a number in the
    item's ``unit``, or one of its ``choices``."""
    if value is None or isinstance(value, str) and not value.strip():
        return Reading(BLANK)
    if choices:
        if isinstance(value, bool) or not isinstance(value, str):
            return Reading(NOT_A_CHOICE, value)
        wanted = canonical(value)
        match = next((c for c in choices if canonical(c) == wanted), None)
        return Reading(WORD, match) if match is not None else Reading(NOT_A_CHOICE, value)
    if isinstance(value, bool):
        return Reading(UNREADABLE, value)
    if isinstance(value, (int, float)):
        return Reading(NUMBER, float(value))
    return _quantity(str(value), kind, unit)


def _quantity(text: str, kind: str, unit: str) -> Reading:
    text = unicodedata.normalize("NFKC", text).strip().strip("'\"").strip()
    while True:
        stripped = _HEDGES.sub("", text).strip()
        if stripped == text:
            break
        text = stripped
    match = _NUMBER_PART.match(text)
    if not match:
        return Reading(UNREADABLE, text)
    number = _number(match.group("number"))
    written = match.group("unit").strip().rstrip(".")
    if number is None:
        return Reading(UNREADABLE, text)
    if not written:
        return Reading(NUMBER, number)
    own, base = unit_factor(written, kind), unit_factor(unit, kind)
    if own is not None and base:
        return Reading(NUMBER, number * own / base, written)
    other = _kind_of_unit(written)
    if other is not None and other != _kind(kind):
        return Reading(WRONG_UNIT, number, written)
    if _kind(kind) == "count" and re.fullmatch(r"[^\W\d_]+(?: [^\W\d_]+)?", written):
        return Reading(NUMBER, number, written)  # "4 probes", "7 shifts": a count names what it counts
    return Reading(UNREADABLE, text, written)

