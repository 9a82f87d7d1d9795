"""What a printed student page is made of, read back from its PDF and its HTML: the size of its
type (from ``pdftotext -bbox-layout``'s word boxes), its lines, its pages' footers, its words.
Helpers of tests/test_course.py's student-page tests, which render the course once."""

from __future__ import annotations

import ast
import html
import re
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

import nbformat

#: The height of a word's box in DejaVu Sans (the pages' Latin face), in ems: its ascent and
#: descent (1901 + 483 of 2048 units). pdftotext's boxes span them, whatever the letters.
DEJAVU_BOX_EMS = (1901 + 483) / 2048
#: The margin boxes (running header and footer, 7.5 pt) lie outside these, in pt from the top of A4.
TEXT_TOP, TEXT_BOTTOM = 45.0, 800.0
#: A line that runs the text's whole measure (report.css: 45 em of 10.5 pt, less a little).
FULL_LINE_PT = 420.0
_WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>')


@dataclass(frozen=True)
class Word:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def size_pt(self) -> float:
        """The font size the word was set in, from its box's height."""
        return (self.y1 - self.y0) / DEJAVU_BOX_EMS


def read_pages(pdf: Path) -> list[list[list[Word]]]:
    """Each page of ``pdf`` as its lines, each line its words, as pdftotext lays them out."""
    out = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True,
                         check=True).stdout
    pages = []
    for page in re.findall(r"<page .*?</page>", out, re.S):
        lines = []
        for line in re.findall(r"<line .*?</line>", page, re.S):
            words = [Word(float(a), float(b), float(c), float(d), html.unescape(w)) for a, b, c, d, w in _WORD.findall(line)]
            if words:
                lines.append(words)
        pages.append(lines)
    return pages


@dataclass(frozen=True)
class PageType:
    """What one printed page's text measures."""

    body_pt: float  # the median word's size: the body text's
    small_share: float  # the share of words set below the table floor (9 pt)
    full_line_chars: list[int]  # characters of each line that runs the whole measure


def page_type(lines: list[list[Word]]) -> PageType | None:
    """The type of a page's text, its running header and footer left out; None for a page with
    no text between them."""
    inside = [line for line in lines if TEXT_TOP < line[0].y0 < TEXT_BOTTOM]
    words = [w for line in inside for w in line]
    if not words:
        return None
    sizes = [w.size_pt for w in words]
    full = [line for line in inside if line[-1].x1 - line[0].x0 > FULL_LINE_PT]
    return PageType(statistics.median(sizes), sum(s < 8.95 for s in sizes) / len(sizes),
                    [sum(len(w.text) + 1 for w in line) - 1 for line in full])


def footer(lines: list[list[Word]]) -> str:
    """The running footer of a page: its text below the page's text area."""
    return " ".join(w.text for line in lines for w in line if line[0].y0 >= TEXT_BOTTOM)


def header(lines: list[list[Word]]) -> str:
    return " ".join(w.text for line in lines for w in line if line[0].y0 <= TEXT_TOP)


def page_text(path: Path) -> str:
    """A rendered page's words as a reader sees them: its body without tags, one space between words."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    for hidden in soup(["script", "style", "head"]) + soup.select(".tcplab-check-key"):  # .tcplab-check-key: not printed
        hidden.decompose()
    return " ".join(soup.get_text(" ").split())


def code_names(nb_path: Path) -> tuple[set[str], set[str]]:
    """(every name a notebook's code assigns, imports or defines; the modules and classes it
    calls things of): what a page must not show as the notebook's own names or calls."""
    nb = nbformat.read(nb_path, as_version=4)
    assigned, callable_ = set(), set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                callable_ |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.FunctionDef):
                callable_.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
    # An object the notebook calls methods of: its lab, page and words, and its modules (imported).
    return assigned, callable_ | ({"lab", "page", "word"} & assigned)


def python_calls(text: str, callables: set[str]) -> list[str]:
    """The calls of a notebook's own names a page's text shows (``theory.nagle_stall(…)``,
    ``PathSpec(…)``, ``Bulk(rcvbuf=…)``)."""
    if not callables:
        return []
    pattern = re.compile(r"(?<![\w.])(?:%s)(?:\.\w+)*\(" % "|".join(map(re.escape, sorted(callables, key=len, reverse=True))))
    return pattern.findall(text)
