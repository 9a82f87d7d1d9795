"""Keep report pages self-contained: local math typesetting, no network at view time.

Math: KaTeX from Debian's ``libjs-katex`` (``/usr/share/javascript/katex``, fonts from
``fonts-katex``) is inlined into each page — script, stylesheet and the woff2 fonts as
data URIs — and typesets ``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]`` and equation
environments when the page loads. KaTeX rather than MathJax because it typesets
synchronously in one file: the page is finished before chromium prints it, and one
HTML file can be mailed around without a folder of assets. Pages without math get no
KaTeX at all. Without ``libjs-katex`` the TeX source stays visible, with a warning.
``TCPLAB_KATEX_DIR`` points elsewhere for a non-Debian system.

Network: :func:`scrub_remote` removes what would be fetched from elsewhere (scripts,
stylesheets, images, frames from ``http(s)://`` or ``//``) from rendered HTML, e.g.
a plotting library's CDN loader in an output.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "MathAssets", "katex_assets", "has_math", "scrub_remote", "find_remote_references",
    "DEFAULT_KATEX_DIR",
]

log = logging.getLogger(__name__)

DEFAULT_KATEX_DIR = Path("/usr/share/javascript/katex")

_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
# Attributes through which a tag makes the browser fetch something.
_FETCHING_ATTRS = {
    "script": ("src",), "link": ("href",), "img": ("src", "srcset"), "iframe": ("src",),
    "video": ("src", "poster"), "audio": ("src",), "source": ("src", "srcset"),
    "embed": ("src",), "object": ("data",), "track": ("src",), "input": ("src",),
}
_CSS_REMOTE = re.compile(
    r"""@import\s+(?:url\()?\s*['"]?(?:https?:)?//[^;]*;?"""
    r"""|url\(\s*['"]?(?:https?:)?//[^)]*\)""",
    re.IGNORECASE)
_MATH_HINT = re.compile(r"\$|\\\(|\\\[|\\begin\{")


@dataclass(frozen=True)
class MathAssets:
    """KaTeX ready to paste into a page: ``css`` goes in a ``<style>``, ``js`` in a ``<script>``."""

    css: str
    js: str


_AUTO_RENDER_CALL = """
renderMathInElement(document.body, {
  delimiters: [
    {left: "$$", right: "$$", display: true},
    {left: "\\\\[", right: "\\\\]", display: true},
    {left: "\\\\begin{equation}", right: "\\\\end{equation}", display: true},
    {left: "\\\\begin{equation*}", right: "\\\\end{equation*}", display: true},
    {left: "\\\\begin{align}", right: "\\\\end{align}", display: true},
    {left: "\\\\begin{align*}", right: "\\\\end{align*}", display: true},
    {left: "$", right: "$", display: false},
    {left: "\\\\(", right: "\\\\)", display: false}
  ],
  ignoredClasses: ["jp-RenderedText", "tcplab-nomath"],
  throwOnError: false
});
"""


def _inline_fonts(css: str, fonts_dir: Path) -> str:
    """Point each @font-face at one embedded font file instead of three relative URLs."""

    def replace(match: re.Match[str]) -> str:
        sources = match.group(1)
        for ext, fmt in (("woff2", "woff2"), ("woff", "woff"), ("ttf", "truetype")):
            name = re.search(r"url\(\s*['\"]?(?:[^)'\"]*/)?([^/)'\"]+\." + ext + r")['\"]?\s*\)",
                             sources)
            if name and (fonts_dir / name.group(1)).is_file():
                data = base64.b64encode((fonts_dir / name.group(1)).read_bytes()).decode("ascii")
                return f"src:url(data:font/{ext};base64,{data}) format('{fmt}')"
        # A font we cannot embed must not become a relative URL that resolves to nothing.
        return "src:local('Noto Serif')"

    return re.sub(r"src\s*:\s*([^;}]*)", replace, css)


@lru_cache(maxsize=None)
def _katex_assets(katex_dir: str) -> MathAssets | None:
    base = Path(katex_dir)
    js_path = base / "katex.min.js"
    if not js_path.is_file():
        js_path = base / "katex.js"
    auto_path = base / "contrib" / "auto-render.min.js"
    if not auto_path.is_file():
        auto_path = base / "contrib" / "auto-render.js"
    css_path = base / "katex.min.css"
    if not css_path.is_file():
        css_path = base / "katex.css"
    missing = [p for p in (js_path, auto_path, css_path) if not p.is_file()]
    if missing:
        log.warning("KaTeX not found (%s): math stays as TeX source. Install Debian's "
                    "libjs-katex or set TCPLAB_KATEX_DIR.", ", ".join(map(str, missing)))
        return None
    css = _inline_fonts(css_path.read_text(encoding="utf-8"), base / "fonts")
    # "</script" inside inline code would end the element early.
    js = "\n".join(p.read_text(encoding="utf-8").replace("</script", "<\\/script")
                   for p in (js_path, auto_path))
    return MathAssets(css=css, js=js + "\n" + _AUTO_RENDER_CALL)


def katex_assets(katex_dir: str | Path | None = None) -> MathAssets | None:
    """KaTeX with fonts inlined, or None (with a warning) when it is not installed."""
    chosen = katex_dir or os.environ.get("TCPLAB_KATEX_DIR") or DEFAULT_KATEX_DIR
    return _katex_assets(str(chosen))


def has_math(html: str) -> bool:
    """Whether a page may hold TeX for KaTeX; a stray dollar sign only costs page size."""
    return bool(_MATH_HINT.search(html))


def is_remote(url: str | None) -> bool:
    return bool(url) and bool(_REMOTE.match(url))


def _fetching_references(soup):
    """(tag, attribute, value) for every attribute through which the page would fetch remotely."""
    for tag in soup.find_all(list(_FETCHING_ATTRS)):
        for attr in _FETCHING_ATTRS[tag.name]:
            value = tag.get(attr)
            if isinstance(value, list):
                value = " ".join(value)
            if not value:
                continue
            # srcset lists "url width" pairs; a data: URI contains commas but is never remote.
            if attr == "srcset":
                urls = [part.strip().split(" ")[0] for part in value.split(",")]
            else:
                urls = [value]
            if any(is_remote(u) for u in urls):
                yield tag, attr, value


def scrub_remote(soup) -> list[str]:
    """Remove every network reference from a BeautifulSoup tree; return what was removed.

    Scripts and stylesheets from elsewhere are dropped whole (nothing offline could
    stand in for them); other elements keep their place but lose the remote URL, which
    moves to ``data-offline-removed`` so a reader of the source can see what it was.
    """
    removed: list[str] = []
    for tag, attr, value in list(_fetching_references(soup)):
        if tag.decomposed:
            continue
        removed.append(value)
        if tag.name in ("script", "link"):
            tag.decompose()
        else:
            del tag[attr]
            tag["data-offline-removed"] = value
    for style in soup.find_all("style"):
        text = style.string or ""
        if _CSS_REMOTE.search(text):
            removed.extend(m.group(0) for m in _CSS_REMOTE.finditer(text))
            style.string = _CSS_REMOTE.sub("", text)
    for tag in soup.find_all(style=_CSS_REMOTE):
        removed.extend(m.group(0) for m in _CSS_REMOTE.finditer(tag["style"]))
        tag["style"] = _CSS_REMOTE.sub("", tag["style"])
    if removed:
        log.warning("removed %d network reference(s) from the report: %s",
                    len(removed), ", ".join(removed[:5]))
    return removed


def find_remote_references(html: str) -> list[str]:
    """Every URL in ``html`` that a browser would fetch from the network (for checks and tests)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    found = [f"<{tag.name} {attr}={value}>" for tag, attr, value in _fetching_references(soup)]
    for style in soup.find_all("style"):
        found.extend(m.group(0) for m in _CSS_REMOTE.finditer(style.string or ""))
    for tag in soup.find_all(style=True):
        found.extend(m.group(0) for m in _CSS_REMOTE.finditer(tag["style"]))
    return found
