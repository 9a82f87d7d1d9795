"""Nothing in a page may reach for the network; math comes from the local KaTeX."""

from __future__ import annotations

from bs4 import BeautifulSoup

from tcplab.report.offline import find_remote_references, has_math, katex_assets, scrub_remote

PAGE = """
<html><head>
<script src="https://cdn.example.org/require.js"></script>
<script src="local.js"></script>
<link rel="stylesheet" href="//fonts.example.org/css">
<style>@import url("https://fonts.example.org/x.css"); .a { background: url(http://e.org/i.png) }</style>
</head><body>
<img src="https://example.org/pic.png" alt="remote">
<img src="data:image/png;base64,AAAA" alt="inline">
<a href="https://example.org/docs">a link is not a fetch</a>
<div style="background-image: url('https://example.org/bg.png')">x</div>
</body></html>
"""


def test_remote_references_are_found():
    found = find_remote_references(PAGE)
    assert len(found) == 6, found


def test_scrub_leaves_no_remote_reference_and_keeps_local_ones():
    soup = BeautifulSoup(PAGE, "html.parser")
    removed = scrub_remote(soup)
    html = str(soup)
    assert len(removed) == 6
    assert find_remote_references(html) == []
    assert 'src="local.js"' in html and "data:image/png;base64,AAAA" in html
    assert 'href="https://example.org/docs"' in html
    assert 'data-offline-removed="https://example.org/pic.png"' in html


def test_katex_is_inlined_with_its_fonts():
    assets = katex_assets()
    assert assets is not None, "KaTeX missing: apt-get install libjs-katex"
    assert "renderMathInElement" in assets.js
    assert "data:font/woff2;base64," in assets.css
    assert "url(fonts/" not in assets.css
    assert "</script" not in assets.js


def test_missing_katex_degrades_to_tex_source(tmp_path, caplog):
    assert katex_assets(tmp_path) is None
    assert "KaTeX not found" in caplog.text


def test_math_detection():
    assert has_math("<p>$x$</p>") and has_math(r"<p>\(x\)</p>")
    assert not has_math("<p>no math here</p>")
