"""The CJK font a PDF embeds, given TrueType outlines so the PDF carries it as a CID font.

Chromium's PDF writer (Skia) embeds a TrueType-outline font as a CID font, subset, with its
Unicode map, but a font with CFF outlines — every Noto CJK font Debian installs — as Type 3
glyph procedures: outlines that no PDF tool can name as a font, that prepress checks refuse,
and that some readers draw without hinting. So before a page is printed, the Noto Sans CJK
SC faces (regular and bold) are cut down to the characters that page uses, their cubic
outlines turned into TrueType's quadratic ones (fontTools, already installed by
matplotlib), and the page's print copy declares them under the family name the stylesheet
already asks for. The HTML a reader opens is not changed: it uses the installed font.
"""

from __future__ import annotations

import base64
import html
import io
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["SANS", "MONO", "Stack", "FontFace", "find_face", "truetype_subset", "print_font_css"]



@dataclass(frozen=True)
class Stack:
    """Two families of a font stack in ``templates/report.css``: the one that draws first,
    and the one after it that carries Simplified Chinese."""

    first: str
    cjk: str


SANS = Stack("DejaVu Sans", "Noto Sans CJK SC")
MONO = Stack("DejaVu Sans Mono", "Noto Sans Mono CJK SC")
#: The weights the stylesheet uses: body text and bold (headings, strong, table heads).
WEIGHTS = (400, 700)
#: Largest error, in font units (of 1000 per em), allowed where a cubic curve becomes
#: quadratic ones: a thousandth of the type size, below what a print shows.
_CURVE_TOLERANCE = 1.0
#: CJK Radicals Supplement, where the scripts that DejaVu lacks begin.
_FIRST_CJK = 0x2E80
#: What a page shows in the monospaced stack (``--mono``): code, preformatted text.
_CODE = re.compile(r"<(pre|code|kbd|samp)\b[^>]*>(.*?)</\1>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class FontFace:
    path: Path
    index: int  # the face's number in a font collection (.ttc)


@lru_cache(maxsize=None)
def find_face(family: str, weight: int) -> FontFace | None:
    """The installed face of ``family`` nearest ``weight``, as fontconfig finds it; None
    where fontconfig is missing or offers only another family in its place."""
    tool = shutil.which("fc-match")
    if tool is None:
        return None
    style = "bold" if weight >= 600 else "regular"
    try:
        found = subprocess.run([tool, "-f", "%{family}\t%{file}\t%{index}", f"{family}:{style}"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    families, _, rest = found.partition("\t")
    path, _, index = rest.partition("\t")
    if family not in families.split(",") or not path:
        return None
    return FontFace(Path(path), int(index or 0))


@lru_cache(maxsize=8)  # the handout is printed twice: once to learn its page numbers
def truetype_subset(face: FontFace, text: str) -> bytes | None:
    """``face`` cut down to the characters of ``text``, with TrueType outlines; None where
    the face has none of them."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(str(face.path), fontNumber=face.index, lazy=True)
    cmap = font.getBestCmap()
    if not any(ord(c) in cmap for c in set(text)):
        return None
    options = subset.Options()
    options.layout_features = ["*"]  # vertical forms, CJK punctuation widths
    options.name_IDs = ["*"]
    # Hints and subroutines stay as the subsetter's defaults leave them: the CFF table that holds
    # them is replaced below, so taking them out first would be time spent for nothing.
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    if "glyf" not in font:
        _cff_to_glyf(font)
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def _cff_to_glyf(font) -> None:
    """Replace ``font``'s CFF outlines by TrueType ones (quadratic curves, a glyf table)."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import newTable

    glyphs = font.getGlyphSet()
    order = font.getGlyphOrder()
    glyf = newTable("glyf")
    glyf.glyphOrder = order
    glyf.glyphs = {}
    for name in order:
        pen = TTGlyphPen(glyphs)
        # TrueType winds outer contours clockwise, PostScript counter-clockwise.
        glyphs[name].draw(Cu2QuPen(pen, _CURVE_TOLERANCE, reverse_direction=True))
        glyf[name] = pen.glyph()
    font["loca"] = newTable("loca")
    font["glyf"] = glyf
    for tag in ("CFF ", "VORG"):
        if tag in font:
            del font[tag]
    maxp = font["maxp"]
    maxp.tableVersion = 0x00010000  # the TrueType maxp, with instruction limits (none used)
    for limit in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
                  "maxStackElements", "maxSizeOfInstructions", "maxComponentElements"):
        setattr(maxp, limit, 0)
    maxp.maxZones = 1
    font["head"].glyphDataFormat = 0
    post = font["post"]
    post.formatType = 2.0  # glyph names, which a CFF font kept in its CFF table
    post.extraNames = []
    post.mapping = {}
    post.glyphOrder = None
    font.sfntVersion = "\0\1\0\0"


def print_font_css(page_html: str) -> str:
    """``@font-face`` rules that give the print of ``page_html`` TrueType CJK faces holding
    every character it uses that DejaVu cannot draw (markup, stylesheet and margin boxes
    alike; the monospaced face only where code shows CJK); empty where it uses none, or
    where the faces are not installed (the print then uses what is)."""
    code = "".join(m.group(2) for m in _CODE.finditer(page_html))
    rules = []
    for stack, text in ((SANS, html.unescape(page_html)), (MONO, html.unescape(code))):
        drawn_first = _characters(find_face(stack.first, 400))
        used = "".join(sorted({c for c in text if ord(c) > 0x7F and ord(c) not in drawn_first}))
        if not any(ord(c) >= _FIRST_CJK for c in used):
            continue
        for weight in WEIGHTS:
            face = find_face(stack.cjk, weight)
            if face is None:
                return ""
            data = truetype_subset(face, used)
            if data is None:
                continue
            rules.append(f'@font-face {{ font-family: "{stack.cjk}"; font-weight: {weight}; '
                         f'src: url(data:font/ttf;base64,{base64.b64encode(data).decode("ascii")}) '
                         f'format("truetype"); }}')
    return "\n".join(rules)


@lru_cache(maxsize=None)
def _characters(face: FontFace | None) -> frozenset[int]:
    if face is None:
        return frozenset()
    from fontTools.ttLib import TTFont

    return frozenset(TTFont(str(face.path), fontNumber=face.index, lazy=True).getBestCmap())
