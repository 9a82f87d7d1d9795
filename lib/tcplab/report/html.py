"""Executed notebook → self-contained HTML page, code hidden, ready to print on A4.

nbconvert renders only the cells (template ``templates/nbconvert/tcplab_cells``: the
lab template's cell markup without its page head), with code inputs and prompts
excluded and images embedded as data URIs. tcplab then wraps the cells in its own
page (``templates/case.html.j2``) that carries:

* ``templates/report.css`` — A4 ``@page`` rules with margin boxes (running header
  and footer: case, edition, kernel, backend, mode, page number — chromium prints
  CSS margin boxes) and a font stack with Noto Sans CJK so Chinese text renders;
* math typeset locally by KaTeX, inlined into the page (see :mod:`.offline`);
* nothing fetched from the network: whatever an output referenced remotely is
  removed (:func:`.offline.scrub_remote`).

The same cell rendering feeds the handout (:mod:`.handout`), where ids are prefixed
per case so that two notebooks' "Setup" headings do not collide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat

from ..course import case_number
from .context import ReportContext
from .editions import apply_edition
from .glossary import PAGE_NAME as GLOSSARY_PAGE, Glossary, link_terms
from .offline import MathAssets, has_math, katex_assets, scrub_remote
from .parameters import fill_notebook
from .templating import TEMPLATES_DIR, render

__all__ = [
    "RenderedCells", "render_cells", "case_page", "render_case_page", "write_case_html",
    "notebook_title", "notebook_error", "page_assets", "PageAssets", "load_notebook",
    "section_anchor",
]

NBCONVERT_TEMPLATES = TEMPLATES_DIR / "nbconvert"
CELLS_TEMPLATE = "tcplab_cells"
#: Cells papermill adds to point at the failing cell; the report says it in its own words.
_PAPERMILL_MARKER_TAG = "papermill-error-cell-tag"
_CASE_NUMBER = re.compile(r"^\d{2}\s*·\s*")
_H1 = re.compile(r"^\s{0,3}#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class RenderedCells:
    """One notebook's cells as HTML, and the stylesheet nbconvert made for them."""

    html: str
    css: str
    removed_references: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PageAssets:
    css: str
    math: MathAssets | None


def section_anchor(case_id: str) -> str:
    """A stable, valid HTML id for a case's section (also the prefix of its cells' ids)."""
    return "case-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", case_id).strip("-") or "x")


def load_notebook(nb: nbformat.NotebookNode | str | Path) -> nbformat.NotebookNode:
    if isinstance(nb, (str, Path)):
        return nbformat.read(str(nb), as_version=4)
    return nb


@lru_cache(maxsize=1)
def _exporter():
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name=CELLS_TEMPLATE,
                            extra_template_basedirs=[str(NBCONVERT_TEMPLATES)])
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.embed_images = True
    return exporter


def notebook_title(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The notebook's own title: metadata ``title``, else its first level-1 heading, without
    the case's number ("01 · "), which pages and contents put before every title themselves
    (a case that failed before publishing its title had it twice)."""
    title = nb.metadata.get("title")
    if title:
        return str(title)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = _H1.search(cell.source)
            if match:
                return _CASE_NUMBER.sub("", match.group(1))
    return fallback


def notebook_error(nb: nbformat.NotebookNode) -> tuple[str, str] | None:
    """(one-line error, traceback) of the first cell that raised, or None if none did."""
    from nbconvert.filters.ansi import strip_ansi

    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                line = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                return line, strip_ansi("\n".join(output.get("traceback", [])))
    return None


def _postprocess(cells_html: str, id_prefix: str, dress=None) -> tuple[str, list[str]]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(cells_html, "html.parser")
    removed = scrub_remote(soup)
    for anchor in soup.select("a.anchor-link"):
        anchor.decompose()
    if id_prefix:
        # Only markdown cells and cell anchors: ids inside outputs (an SVG's clip paths)
        # are referenced by their own markup and must stay as they are.
        for cell in soup.select("div.jp-Cell"):
            if cell.get("id"):
                cell["id"] = id_prefix + cell["id"]
        for md in soup.select("div.jp-MarkdownCell"):
            for tag in md.find_all(id=True):
                tag["id"] = id_prefix + tag["id"]
            for link in md.find_all("a", href=True):
                if link["href"].startswith("#") and len(link["href"]) > 1:
                    link["href"] = "#" + id_prefix + link["href"][1:]
    if dress is not None:  # after the ids: its links point outside the cells
        dress(soup)
    # Serialising through BeautifulSoup also turns nbconvert's numeric entities back
    # into characters, so the page's text is searchable as written (中文, not &#20013;).
    return str(soup), removed


def _as_shown(cell: nbformat.NotebookNode, language: str | None = None,
              edition: str = "instructor") -> nbformat.NotebookNode:
    """A worksheet cell becomes its box (the page hides code, and a student needs the questions
    and room to answer; the student's box ends with "stop here"); every other cell stays as it is."""
    from .worksheet import WORKSHEET_TAG, worksheet_box

    if cell.get("cell_type") != "code" or WORKSHEET_TAG not in cell.get("metadata", {}).get("tags", []):
        return cell
    box = worksheet_box(cell.source, language=language, stop=edition == "student")
    return cell if box is None else nbformat.v4.new_markdown_cell(box, id=cell.get("id"))


def render_cells(nb: nbformat.NotebookNode | str | Path, *, edition: str = "instructor",
                 id_prefix: str = "", base_dir: str | Path | None = None,
                 language: str | None = None, case_id: str | None = None,
                 glossary: Glossary | None = None) -> RenderedCells:
    """The cells of ``nb`` as the given edition shows them, code hidden, offline-safe.

    ``base_dir`` is where relative image paths in markdown cells are looked up
    (the notebook's folder; defaults to the notebook file's folder when given a path).
    ``language``: of the words the page adds (a worksheet's box); the cells are as given
    (:func:`tcplab.i18n.translate_notebook` translates them). ``case_id``: a case of the course,
    whose page states its units under its title; ``glossary``: the course's, to which the
    first use of each term on the page links (:mod:`.glossary`).
    """
    if base_dir is None and isinstance(nb, (str, Path)):
        base_dir = Path(nb).parent
    nb = fill_notebook(apply_edition(load_notebook(nb), edition, language=language))  # prose states the parameters it ran with
    nb.cells = [_as_shown(c, language, edition) for c in nb.cells
                if _PAPERMILL_MARKER_TAG not in c.get("metadata", {}).get("tags", [])]
    resources = {"metadata": {"path": str(base_dir or "."), "name": "notebook"}}
    body, res = _exporter().from_notebook_node(nb, resources=resources)
    css = "\n".join(res.get("inlining", {}).get("css", []))
    html, removed = _postprocess(body, id_prefix, dress=lambda soup: _dress(soup, case_id, language, glossary))
    return RenderedCells(html=html, css=css, removed_references=removed)


def _dress(soup, case_id: str | None, language: str | None, glossary: Glossary | None) -> None:
    """What a case's page adds to its cells: the units it writes in, under its title (with the
    case's own remark where its words have one, ``units.<case>``), and links from each term's first
    use to the glossary."""
    from bs4 import BeautifulSoup

    from ..words import Messages

    if case_id is not None:
        t = Messages(language)
        title = soup.find("h1")
        if title is not None:
            own = t(f"units.{case_id}") if t.has(f"units.{case_id}") else ""
            pointer = t("glossary.pointer", href="#glossary") if glossary is not None else ""
            line = t("page.units", own=own + " " if own else "", glossary=pointer)
            title.insert_after(BeautifulSoup(f'<p class="tcplab-units">{line}</p>', "html.parser"))
    if glossary is not None:
        link_terms(soup, glossary)


def page_assets(bodies: list[str], extra_css: list[str] = (), *,
                katex_dir: str | Path | None = None) -> PageAssets:
    """Stylesheets and, only if some body holds TeX, the KaTeX bundle for one page."""
    css = [(TEMPLATES_DIR / "report.css").read_text(encoding="utf-8")]
    css.extend(c for c in dict.fromkeys(extra_css) if c)
    math = katex_assets(katex_dir) if any(has_math(b) for b in bodies) else None
    return PageAssets(css="\n".join(css), math=math)


def case_page(cells: RenderedCells, *, context: ReportContext, case_id: str, title: str,
              error: str | None = None, traceback: str | None = None,
              katex_dir: str | Path | None = None) -> str:
    """A whole HTML page for one case, from cells already rendered."""
    t = context.messages()
    assets = page_assets([cells.html], [cells.css], katex_dir=katex_dir)
    # On a case's own page the glossary is its own page beside it (the handout holds it).
    linked = cells.html.replace('href="#glossary', f'href="{GLOSSARY_PAGE}.html#glossary')
    return render(
        "case.html.j2", messages=t, context=context, case_id=case_id,
        anchor=section_anchor(case_id), title=title, number=case_number(case_id),
        cells=linked, error=error, traceback=traceback, assets=assets,
        language=t.language, environment_line=context.environment_line(t),
    )


def render_case_page(nb: nbformat.NotebookNode | str | Path, *, context: ReportContext,
                     case_id: str, title: str | None = None, error: str | None = None,
                     traceback: str | None = None, base_dir: str | Path | None = None,
                     katex_dir: str | Path | None = None) -> str:
    """A whole HTML page for one executed notebook."""
    if base_dir is None and isinstance(nb, (str, Path)):
        base_dir = Path(nb).parent
    nb = load_notebook(nb)
    cells = render_cells(nb, edition=context.edition, base_dir=base_dir, language=context.language)
    return case_page(cells, context=context, case_id=case_id,
                     title=title or notebook_title(nb, case_id), error=error,
                     traceback=traceback, katex_dir=katex_dir)


def write_case_html(executed_nb: str | Path, html_path: str | Path, *, context: ReportContext,
                    case_id: str | None = None, title: str | None = None,
                    error: str | None = None, traceback: str | None = None,
                    base_dir: str | Path | None = None,
                    katex_dir: str | Path | None = None) -> Path:
    """Render ``executed_nb`` to ``html_path``; return the path written."""
    html_path = Path(html_path)
    page = render_case_page(executed_nb, context=context,
                            case_id=case_id or Path(executed_nb).stem, title=title,
                            error=error, traceback=traceback, base_dir=base_dir,
                            katex_dir=katex_dir)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(page, encoding="utf-8")
    return html_path
