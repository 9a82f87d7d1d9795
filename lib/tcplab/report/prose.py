"""Sentences that state a run's numbers: the text is static, the numbers come from the run.

A case page may state a measured number only where its own run produced it. Its static
Markdown therefore holds theory, seed and kernel facts; a sentence with a measured number is a
template keyed ``prose.<case>.<name>`` (in the case's room, ``words/<language>.json``, so it can be
translated) whose slots say what kind of quantity fills them, and :func:`say` fills it from the
run's numbers as they are::

    "peak_w": "the peak `w` reached {peak:size}, {ratio:times} `tb` ({tb:size})"
    page.say("peak_w", peak=table.loc[slow.label, "peak w"], ratio=peak / tb, tb=tb)

One formatter writes every kind (:data:`KINDS`: sizes in KB = 1024 B, rates decimal, …), in every
language alike; ``{rtts:list of duration}`` takes several values, joined as the page's language
joins a list. A slot without a kind takes a word (a variant's label, a congestion control's
name); a number there is refused, so that no number reaches a page unwritten.

The output carries the sentence as Markdown for readers and, under :data:`MIME_TYPE`, the
key and every value with its kind and text, so a test can hold each number on the page to the
value it came from (``tests/report/test_prose.py``). A comparison between runs is not a sentence but a
scored check (``report.scores``): a run that contradicts it fails visibly.
"""

from __future__ import annotations

import math
import re
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from ..units import format_byte_rate, format_duration, format_rate, format_share, format_size
from ..words import FALLBACK_LANGUAGE, Messages, choice_only_fields, template_kinds
from .parameters import without_spans
from .tables import GAP, cell_text

__all__ = ["MIME_TYPE", "KINDS", "LIST_OF", "Quantity", "Quantities", "quantity", "written",
           "sentence", "say", "said_in", "STATIC_KINDS", "NUMBER_WITH_UNIT", "static_numbers",
           "declared_kinds", "undeclared_numbers"]

MIME_TYPE = "application/vnd.tcplab.prose+json"

#: How each kind of quantity is written: the one formatter of every number a sentence states.
KINDS = {
    "size": format_size,                     # bytes, KB = 1024 B
    "bytes": lambda v: f"{cell_text(round(v))} B",  # bytes to the byte: windows, segments
    "duration": format_duration,             # seconds
    "rate": format_rate,                     # bit/s, decimal
    "byte_rate": format_byte_rate,           # bytes/s, decimal (MB/s = 10⁶ B/s)
    "count": cell_text,                      # a plain number: segments, packets, probes
    "percent": format_share,                 # from a fraction
    "times": lambda v: cell_text(round(v, 2)),               # a ratio; Quantity.text adds the language's sign
    "change": lambda v: format_share(v, signed=True),  # a signed fraction: +6.1 %
}
#: A slot of several values of one kind: ``{rtts:list of duration}``.
LIST_OF = "list of "


@dataclass(frozen=True)
class Quantity:
    """A run's value and what kind of quantity it is, which decides how it is written."""

    value: float | None
    kind: str  # one of KINDS

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        value = self.value
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            value = float(value)
            object.__setattr__(self, "value", value if math.isfinite(value) else None)
        elif value is not None:
            raise TypeError(f"a quantity is a number, got {value!r}")

    def __str__(self) -> str:
        return self.text()

    def text(self, language: str | None = None) -> str:
        """The value as a page in ``language`` writes it: a ratio's sign is the language's own
        (``prose.times_sign``: "1.5 ×" in English, "1.5 倍" in Chinese); every other kind is
        written alike in every language."""
        if self.value is None:
            return GAP
        text = KINDS[self.kind](self.value)
        return f"{text} {Messages(language)('prose.times_sign')}" if self.kind == "times" else text

    def to_json(self, language: str | None = None) -> dict[str, Any]:
        return {"value": self.value, "kind": self.kind, "text": self.text(language)}


@dataclass(frozen=True)
class Quantities:
    """Several of a run's values of one kind, said as a list: each written as its
    :class:`Quantity` is, joined the way the page's language joins a list
    (``prose.list_separator``: ", " in English, "、" in Chinese)."""

    items: tuple[Quantity, ...]

    def text(self, language: str | None = None) -> str:
        return Messages(language)("prose.list_separator").join(q.text(language) for q in self.items)

    def to_json(self, language: str | None = None) -> dict[str, Any]:
        kinds = {q.kind for q in self.items}
        return {"value": [q.value for q in self.items], "kind": kinds.pop() if len(kinds) == 1 else "word",
                "text": self.text(language)}


def quantity(value: Any, kind: str) -> Quantity | Quantities:
    """``value`` as the quantity a slot of ``kind`` holds (``list of …``: several values)."""
    if kind.startswith(LIST_OF):
        return Quantities(tuple(Quantity(v, kind[len(LIST_OF):]) for v in value))
    return Quantity(value, kind)


def written(value: Any, kind: str, language: str | None = None) -> str:
    """``value`` as a page writes a quantity of ``kind``, where a number is written outside a
    sentence (a check's name, a line of a table's caption)."""
    return quantity(value, kind).text(language)


def sentence(case_id: str, name: str, values: Mapping[str, Any], *, language: str | None = None) -> tuple[str, dict]:
    """The filled-in sentence and the data behind it. Each value fills the slot of its name as
    the English template types it (a translation types its slots alike: ``tcplab i18n check``);
    a value whose slot has no kind is a word, written as it is."""
    key = f"prose.{case_id}.{name}"
    t = Messages(language)
    source = Messages(FALLBACK_LANGUAGE).template(key)
    if source is None:
        raise KeyError(f"no sentence {key!r} in the words")
    kinds = template_kinds(source)
    # A number that only chooses a word ("{n|segment|segments}") is a count.
    kinds.update({field: "count" for field in choice_only_fields(source)})
    fields = {}
    for field, value in values.items():
        if field in kinds:
            fields[field] = quantity(value, kinds[field]).to_json(t.language)
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            raise TypeError(f"{key}: {field}={value!r} is a number, and its slot has no kind: "
                            f"write it {{{field}:duration}} (or size, rate, count, …) in the template")
        else:
            fields[field] = {"value": None, "kind": "word", "text": str(value)}
    text = t(key, **{k: f["text"] for k, f in fields.items()})
    return text, {"key": key, "fields": fields, "text": text}


def say(case_id: str, name: str, *, language: str | None = None, **values: Any) -> None:
    """Show one bound sentence (Markdown) and leave its values in the notebook."""
    from IPython.display import display  # only where a notebook runs

    text, data = sentence(case_id, name, values, language=language)
    display({"text/markdown": text, "text/plain": text, MIME_TYPE: data}, raw=True)


def said_in(nb: Any) -> list[dict]:
    """Every bound sentence an executed notebook shows, in cell order."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = (output.get("data") or {}).get(MIME_TYPE)
            if data is not None:
                found.append(data)
    return found


# --- what static prose may state --------------------------------------------------------------

#: What a notebook's static Markdown may state with numbers: theory (a formula applied to the
#: case's parameters), a seed's figure, a fact of the kernel's source or defaults, the case's
#: setup (its parameters). A measured number is none of these: it goes through :func:`say`.
STATIC_KINDS = ("theory", "seed", "kernel", "setup")

#: A number followed by a unit: what a reader takes for a quantity.
NUMBER_WITH_UNIT = re.compile(
    r"(?<![\w.])\d[\d\u202f ,.]*\s?(?:%|ms|µs|s\b|KB|MB|GB|Mbit/s|Gbit/s|kbit/s|MB/s|KB/s|B\b|bytes|×|segments|"
    r"round trips|packets|probes)")


def static_numbers(source: str) -> list[str]:
    """The quantities a piece of static prose states (numbers with a unit), leaving out the
    parameters it marks (:mod:`.parameters`), which a page writes from the run."""
    return [m.strip() for m in NUMBER_WITH_UNIT.findall(without_spans(source))]


def declared_kinds(cell: Any) -> tuple[str, ...]:
    """What a Markdown cell's author declared its numbers to be (cell metadata
    ``tcplab.states``); empty when undeclared."""
    return tuple((cell.get("metadata", {}).get("tcplab") or {}).get("states") or ())


def undeclared_numbers(nb: Any) -> list[tuple[str, list[str]]]:
    """Markdown cells that state quantities without saying what kind of fact they are, or
    with a kind that is not one of :data:`STATIC_KINDS`: (cell id, the quantities)."""
    found = []
    for cell in nb.cells:
        if cell.get("cell_type") != "markdown":
            continue
        numbers_stated = static_numbers(cell.source)
        kinds = declared_kinds(cell)
        if numbers_stated and (not kinds or any(k not in STATIC_KINDS for k in kinds)):
            found.append((cell.get("id", "?"), numbers_stated))
    return found
