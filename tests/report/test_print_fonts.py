"""The CJK faces a print embeds: cut to the page's characters, redrawn with TrueType outlines
that keep the font's shapes and widths (the whole print is tested in test_i18n)."""

from __future__ import annotations

import base64
import io
import re

from fontTools.pens.boundsPen import BoundsPen
from fontTools.ttLib import TTFont

from tcplab.report.print_fonts import MONO, SANS, find_face, print_font_css, truetype_subset

TEXT = "零窗口，接收窗口（拥塞窗口）。慢启动"


def _faces(css: str) -> dict[tuple[str, int], TTFont]:
    rules = re.findall(r'font-family: "([^"]+)"; font-weight: (\d+); src: url\(data:font/ttf;base64,([^)]+)\)', css)
    return {(family, int(weight)): TTFont(io.BytesIO(base64.b64decode(data))) for family, weight, data in rules}


def test_a_face_is_cut_to_the_text_and_keeps_its_shapes_and_widths():
    face = find_face(SANS.cjk, 400)
    assert face is not None and face.path.suffix in (".ttc", ".otc", ".otf")
    cut = TTFont(io.BytesIO(truetype_subset(face, TEXT)))
    assert "glyf" in cut and "CFF " not in cut and cut.sfntVersion == "\0\1\0\0"
    whole = TTFont(str(face.path), fontNumber=face.index, lazy=True)
    whole_cmap, cut_cmap = whole.getBestCmap(), cut.getBestCmap()
    assert set(cut_cmap) == {ord(c) for c in TEXT}
    glyphs = whole.getGlyphSet()
    for char in TEXT:
        original, redrawn = whole_cmap[ord(char)], cut_cmap[ord(char)]
        assert cut["hmtx"][redrawn] == whole["hmtx"][original], char
        pen = BoundsPen(glyphs)
        glyphs[original].draw(pen)
        glyph = cut["glyf"][redrawn]
        glyph.recalcBounds(cut["glyf"])
        # Quadratic curves through the cubic ones, a unit of 1000 per em away at most.
        assert all(abs(a - b) <= 1.5 for a, b in
                   zip(pen.bounds, (glyph.xMin, glyph.yMin, glyph.xMax, glyph.yMax))), (char, pen.bounds)


def test_a_page_without_cjk_prints_with_the_installed_fonts():
    assert print_font_css("<html><head></head><body><p>Window Full – 16 KB × 2 ≈ 32 KB, café</p>"
                          "<pre>ss -ti</pre></body></html>") == ""


def test_a_page_gets_the_faces_its_text_needs():
    body = _faces(print_font_css(f"<html><head></head><body><h1>{TEXT}</h1><pre>ss -ti</pre></body></html>"))
    assert set(body) == {(SANS.cjk, 400), (SANS.cjk, 700)}
    assert {chr(c) for c in body[SANS.cjk, 700].getBestCmap()} == set(TEXT)
    # Code in Chinese needs the monospaced face too, with only the code's characters.
    code = _faces(print_font_css("<html><head></head><body><p>零窗口</p><pre>接收 &amp; 窗口</pre></body></html>"))
    assert set(code) == {(SANS.cjk, 400), (SANS.cjk, 700), (MONO.cjk, 400), (MONO.cjk, 700)}
    assert {chr(c) for c in code[MONO.cjk, 400].getBestCmap()} == set("接收窗口")
    # Characters DejaVu draws (first in both stacks) stay out of the faces.
    assert {chr(c) for c in code[SANS.cjk, 400].getBestCmap()} == set("零窗口接收")
