"""The house style of every table a case page shows: how a number, a gap and a header are written.

A notebook displays pandas frames as it likes (``lab.table()``, ``frame.round(2)``); once
:func:`use_house_style` has run in its kernel (a :class:`~tcplab.cases.CaseLab` does it), every
frame and series it shows is written by :func:`frame_html`: no scientific notation, no
"NaN"/"None" (an em dash), thousands grouped with a thin space as the course's prose writes
them (262 142), no index column pandas invented, headers in words (``goodput_bps`` → "goodput
bps"), and a class that lets a wide table shrink to fit an A4 page (``report.css``).
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..display import formatter
from ..units import THIN_SPACE
from ..words import Messages

__all__ = ["cell_text", "frame_html", "use_house_style", "GAP", "WIDE_COLUMNS"]

#: What a table shows where there is no value.
GAP = "—"
#: Tables with more columns than this are set smaller (``table.tcplab-wide`` in report.css).
WIDE_COLUMNS = 6


#: A header cell of at most 6 characters and no space, as pandas writes it.
SHORT_HEADER = re.compile(r"<th>([^<\s]{1,6})</th>")


def _grouped(digits: str) -> str:
    sign, digits = ("-", digits[1:]) if digits.startswith("-") else ("", digits)
    head, dot, tail = digits.partition(".")
    groups = []
    while len(head) > 3:
        head, groups = head[:-3], [head[-3:], *groups]
    return sign + THIN_SPACE.join([head, *groups]) + dot + tail


#: Below this a number is written 0: no quantity of the course is measured to a billionth of
#: its unit, and 2.2e-14 % (a share computed as 1 − 0.99999…) is rounding, not a reading.
TINY = 1e-9


def _number(value: float) -> str:
    if not math.isfinite(value):
        return GAP if math.isnan(value) else ("∞" if value > 0 else "-∞")
    if float(value).is_integer():
        return _grouped(f"{value:.0f}")
    magnitude = abs(value)
    if magnitude < TINY:
        return "0"  # float noise (1 − 0.9999… in a share), not a measurement
    # As many decimals as the value's size warrants: none from 1000, one from 100, two from 1,
    # and below 1 three significant digits at least; trailing zeros dropped.
    if magnitude >= 1000:
        decimals = 0
    elif magnitude >= 100:
        decimals = 1
    elif magnitude >= 1:
        decimals = 2
    else:
        decimals = max(2, 2 - math.floor(math.log10(magnitude)))
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return _grouped(text)


def cell_text(value: Any, t: Messages | None = None) -> str:
    """One cell as the page writes it, its words in the language of ``t`` (the kernel's, by
    default: a notebook's tables are written where it runs)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return GAP
    if isinstance(value, (bool, np.bool_)):
        return (t or Messages())("value.yes" if value else "value.no")
    if isinstance(value, Integral):
        return _grouped(str(int(value)))
    if isinstance(value, Real):
        return _number(float(value))
    if isinstance(value, np.ndarray):  # a column's unique values, say
        return cell_text(value.tolist(), t)
    if isinstance(value, (list, tuple, set)):
        return ", ".join(cell_text(v, t) for v in value) or GAP
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell_text(v, t)}" for k, v in value.items()) or GAP
    text = str(value)
    return (t or Messages()).cell(text) if text.strip() else GAP


def _header(name: Any) -> Any:
    if isinstance(name, tuple):
        return tuple(_header(part) for part in name)
    return Messages().column(name) if isinstance(name, str) else name


#: How the page names its variants (:meth:`tcplab.report.page.CasePage.name`), once a page has set
#: the house style: a table's labels (its first column) and headers are a variant's name, never its
#: label (``sndbuf-256KB-wmem_max-131071``). None: shown as they are.
_NAMES: Callable[[str], str] | None = None


def frame_html(frame: pd.DataFrame | pd.Series) -> str:
    """``frame`` as an HTML table in the house style."""
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    shown = frame.copy()
    if not (isinstance(shown.index, pd.RangeIndex) and shown.index.name is None):
        # A named index (the variant, a sweep's values) is the table's first column, headed
        # by its name on the same row as the others.
        shown.index.names = [n if n is not None else "" for n in shown.index.names]
        shown = shown.reset_index()
    # Marked on a table with one header row only: a MultiIndex header's spanning cells do not
    # line up with its data's columns, so a prediction column there needs a table of its own.
    predictions = ([i for i, name in enumerate(shown.columns) if _is_prediction(name)]
                   if shown.columns.nlevels == 1 else [])
    shown.columns = shown.columns.map(_header)  # each level of a MultiIndex (an aggregate's) too
    shown = shown.astype(object).map(cell_text)
    if _NAMES is not None and shown.shape[1]:
        shown.iloc[:, 0] = shown.iloc[:, 0].map(_NAMES)
        if shown.columns.nlevels == 1:
            shown.columns = shown.columns.map(lambda name: _NAMES(name) if isinstance(name, str) else name)
    wide = shown.shape[1] > WIDE_COLUMNS
    classes = ["tcplab-frame"] + (["tcplab-wide"] if wide else [])
    width, padding = (FLOOR_EMS, WIDE_PADDING_EMS) if wide else (TABLE_EMS, CELL_PADDING_EMS)
    parts = []
    for columns in _split_for_editions(shown, predictions, width, padding) or _fitting_parts(shown, width, padding):
        html = shown.iloc[:, columns].to_html(classes=classes, index=False, border=0, escape=True, na_rep=GAP)
        marked = [i for i, column in enumerate(columns) if column in predictions]
        if marked and len(marked) == len(columns) - 1:
            html = _mark_table(html)  # the predictions' own part: the student edition drops it whole
        elif marked:
            html = _mark_columns(html, marked)
        # A short header stays on one line: Chinese wraps between any two characters, and a narrow
        # column would print "连接" as 连 over 接. Longer ones keep wrapping, or a wide table would
        # run off the page.
        parts.append(SHORT_HEADER.sub(r'<th style="white-space:nowrap">\1</th>', html))
    return "\n".join(parts)


#: The width a table may take on A4 (the page less its margins, report.css), in ems of the table's
#: type: 9.5 pt, and 9 pt (the floor) for a wide table; a little under, for what the estimate misses.
PAGE_WIDTH_PT = 504
TABLE_EMS, FLOOR_EMS = 0.95 * PAGE_WIDTH_PT / 9.5, 0.95 * PAGE_WIDTH_PT / 9
#: A cell's padding either side (report.css), in ems: a table's, a wide table's.
CELL_PADDING_EMS, WIDE_PADDING_EMS = 0.6, 0.35


def _char_ems(char: str) -> float:
    """About how wide ``char`` is in DejaVu Sans (or Noto Sans CJK), in ems: a generous guess."""
    if ord(char) >= 0x2E80:
        return 1.0
    if char in " \u202f.,:;!|'ijlft()[]":
        return 0.36
    if char.isupper() or char in "mwMW%—":
        return 0.8
    return 0.64


def _narrowest(text: str, *, header: bool) -> float:
    """The narrowest ``text`` can be set, in ems: its longest run that does not wrap (a cell wraps
    at its spaces, a number's groups are joined by a no-break space; a short header not at all)."""
    if header and SHORT_HEADER.fullmatch(f"<th>{text}</th>"):
        runs = [text]
    else:
        runs = text.split(" ")
    return max((sum(map(_char_ems, run)) for run in runs), default=0.0) * (1.1 if header else 1.0)


def _split_for_editions(shown: pd.DataFrame, predictions: list[int], width_ems: float,
                        padding_ems: float) -> list[list[int]] | None:
    """A table too wide for A4 whose measured columns fit without its prediction columns, as
    two parts: the measurements, then the predictions (the student edition drops the second whole
    and reads the first, instead of two parts each missing what it may not see); None otherwise."""
    if not predictions or len(_fitting_parts(shown, width_ems, padding_ems)) == 1:
        return None
    measured = [i for i in range(shown.shape[1]) if i not in predictions]
    predicted = [0] + [i for i in predictions if i != 0]
    if len(measured) < 2 or any(len(_fitting_parts(shown.iloc[:, part], width_ems, padding_ems)) > 1
                                for part in (measured, predicted)):
        return None
    return [measured, predicted]


def _fitting_parts(shown: pd.DataFrame, width_ems: float, padding_ems: float) -> list[list[int]]:
    """``shown``'s columns in groups that each fit the page's width, each group after the first
    repeating the first column (the row's label): chromium shrinks a whole print to fit its
    widest table, so a table too wide even at the table floor is split, not shrunk, into as few
    parts as fit, of about equal width. One group where it fits, as most do."""
    if shown.columns.nlevels > 1 or shown.shape[1] < 3:
        return [list(range(shown.shape[1]))]
    needs = [max([_narrowest(str(name), header=True)] + [_narrowest(str(v), header=False) for v in shown.iloc[:, i]])
             + 2 * padding_ems for i, name in enumerate(shown.columns)]
    if sum(needs) <= width_ems:
        return [list(range(shown.shape[1]))]
    for count in range(2, shown.shape[1]):
        # Each part gets the label column and about 1/count of the others' width.
        share = sum(needs[1:]) / count
        parts, current, filled = [], [0], 0.0
        for i in range(1, shown.shape[1]):
            if filled and (filled + needs[i] / 2 > share or needs[0] + filled + needs[i] > width_ems) and len(parts) < count - 1:
                parts.append(current)
                current, filled = [0], 0.0
            current.append(i)
            filled += needs[i]
        parts.append(current)
        if all(sum(needs[c] for c in part) <= width_ems for part in parts):
            return parts
    return [[0, i] for i in range(1, shown.shape[1])]


#: A column of what theory expects ("predicted ms", "measured / predicted", "Mathis MB/s"): the
#: student edition leaves it out, as it leaves out the prediction tables (:mod:`.editions`).
PREDICTION_COLUMN = re.compile(r"\bpredict(?:ed|s|ion)\b|\btheory\b|^Mathis\b")


def _is_prediction(name: Any) -> bool:
    return isinstance(name, str) and PREDICTION_COLUMN.search(name) is not None


def _mark_columns(html: str, columns: list[int]) -> str:
    """``html`` (one table, one header row) with the given columns' cells of the class the
    student edition drops."""
    from bs4 import BeautifulSoup

    from .editions import INSTRUCTOR_CLASS

    soup = BeautifulSoup(html, "html.parser")
    for row in soup.find_all("tr"):
        cells = row.find_all(["th", "td"], recursive=False)
        for i in columns:
            if i < len(cells):
                cells[i]["class"] = cells[i].get("class", []) + [INSTRUCTOR_CLASS]
    return str(soup)


def _mark_table(html: str) -> str:
    """``html`` (one table) of the class the student edition drops."""
    from .editions import INSTRUCTOR_CLASS

    return html.replace('<table class="', f'<table class="{INSTRUCTOR_CLASS} ', 1)


def use_house_style(names: Callable[[str], str] | None = None) -> None:
    """Have this IPython kernel show every frame and series with :func:`frame_html` (nothing
    outside IPython); ``names``: how the page names its variants (a label in, its name out)."""
    global _NAMES
    _NAMES = names
    html = formatter("text/html")
    if html is None:
        return
    html.for_type(pd.DataFrame, frame_html)
    html.for_type(pd.Series, frame_html)
