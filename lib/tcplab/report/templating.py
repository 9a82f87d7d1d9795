"""One Jinja environment for the report's own templates, with the filters they share."""

from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ..words import Messages
from .tables import GAP, cell_text

__all__ = ["TEMPLATES_DIR", "environment", "render", "format_value", "css_string",
           "counter_content", "code_spans"]

TEMPLATES_DIR = Path(__file__).parent / "templates"


def format_value(value: Any, unit: str = "", t: Messages | None = None) -> str:
    """A predicted or measured value as a reader sees it: written as every table writes a
    number (:func:`.tables.cell_text`: no exponent, thousands grouped), then the unit; a yes/no
    and a unit that is a word ("segments") in the words of ``t``, where given."""
    if value is None:
        return GAP
    if isinstance(value, bool):
        text = (t or Messages("en"))("value.yes" if value else "value.no")
    else:
        text = cell_text(value, t)  # a word ("off", "none") in the words of t, as the unit
    if t is not None:
        unit = t.unit(unit, count=value)
    return f"{text} {unit}" if unit and text != GAP else text


def code_spans(text: str) -> Markup:
    """A string's words as HTML, its `backticked` parts (a command, a kernel name) as ``<code>``,
    as Markdown writes them; everything else escaped."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick is a character, not code
        return Markup.escape(text)
    return Markup("").join(Markup("<code>{}</code>").format(part) if i % 2 else Markup.escape(part)
                           for i, part in enumerate(parts))


def css_string(text: str) -> Markup:
    """``text`` as a double-quoted CSS string, safe inside a ``<style>`` element."""
    escaped = []
    for char in str(text):
        if char in '"\\' or ord(char) < 0x20 or char in "<>":
            # Hex escapes also keep "</style>" from ending the element early.
            escaped.append(f"\\{ord(char):x} ")
        else:
            escaped.append(char)
    return Markup('"' + "".join(escaped) + '"')


def counter_content(template: str) -> Markup:
    """A translated "page {page} of {pages}" as a CSS ``content`` value with page counters."""
    parts = []
    for literal, name, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append(str(css_string(literal)))
        if name in ("page", "pages"):
            parts.append(f"counter({name})")
        elif name:
            raise ValueError(f"page number text may use {{page}} and {{pages}} only: {template!r}")
    return Markup(" ".join(parts) or '""')


@lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(["html", "html.j2", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["value"] = format_value
    env.filters["css_string"] = css_string
    env.filters["counter_content"] = counter_content
    env.filters["code_spans"] = code_spans
    return env


def render(template: str, *, messages: Messages, **context: Any) -> str:
    return environment().get_template(template).render(t=messages, **context)
