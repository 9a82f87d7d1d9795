"""The docs hold together: a README that fits on a screen, relative links that lead to a file
(and, with a #fragment, to a heading of it), and an index that lists every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
INDEX = DOCS / "README.md"
README_MAX_LINES = 200

#: Pages that other branches are writing: links to them are allowed until they land.
#: Empty this when those branches are merged.
FORTHCOMING: set[str] = set()

#: An inline Markdown link or image: [text](target) or [text](target "title").
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def outside_fences(text: str) -> list[str]:
    """The lines of Markdown ``text`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def links(text: str) -> list[str]:
    """The targets of the inline links of ``text``, leaving out code (fenced or inline)."""
    return [m.group(1) for line in outside_fences(text) for m in LINK.finditer(CODE_SPAN.sub("", line))]


def anchors(text: str) -> set[str]:
    """The fragments GitHub gives the headings of ``text``: lower case, punctuation dropped,
    spaces as hyphens, a repeated one numbered."""
    times: dict[str, int] = {}
    found = set()
    for line in outside_fences(text):
        m = HEADING.match(line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            found.add(f"{slug}-{times[slug]}" if slug in times else slug)
            times[slug] = times.get(slug, 0) + 1
    return found


def relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)  # http:, https:, mailto:, …


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_readme_fits_on_a_screen():
    lines = len(read(README).splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the rest belongs in docs/"


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page):
    broken = []
    for target in filter(relative, links(read(page))):
        file_part, _, fragment = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        name = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if name in FORTHCOMING:
            continue
        if not dest.exists():
            broken.append(f"{target}: there is no {name}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(read(dest)):
            broken.append(f"{target}: {name} has no heading #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_in_the_index():
    listed = {(DOCS / t.partition("#")[0]).resolve() for t in links(read(INDEX)) if relative(t)}
    missing = sorted(p.name for p in DOCS.glob("*.md") if p != INDEX and p.resolve() not in listed)
    assert not missing, f"docs/README.md does not link {', '.join(missing)}"


def test_links_in_code_are_not_links_and_headings_get_githubs_anchors():
    text = "\n".join([
        "# Zero flakes, measured: the `stress` script",
        "## Notes", "## Notes",
        "See [the lab](using-the-lab.md#run-records) and [a site](https://example.org).",
        "Not a link: `[x](nowhere.md)`.",
        "```sh", "echo [y](nowhere-either.md)", "# not a heading", "```",
    ])
    assert links(text) == ["using-the-lab.md#run-records", "https://example.org"]
    assert [t for t in links(text) if relative(t)] == ["using-the-lab.md#run-records"]
    assert anchors(text) == {"zero-flakes-measured-the-stress-script", "notes", "notes-1"}
