"""HTML page → PDF, printed by headless chromium (Debian's ``chromium`` package).

Chromium is the renderer that gets the report right: CSS paged media with margin boxes
and named pages, system CJK fonts, and KaTeX's script runs before printing. Each print
gets a fresh profile directory and every background service switched off, and host
names resolve to nothing, so a stray remote reference fails fast instead of waiting for
a network that is not there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..files import partial_name
from .print_fonts import print_font_css

__all__ = ["ChromiumNotFound", "PdfError", "find_chromium", "html_to_pdf", "first_pages", "DEFAULT_TIMEOUT_S"]

DEFAULT_TIMEOUT_S = 120
#: A page's head: its opening tag (group 1) and its closing tag (group 2).
_HEAD = re.compile(r"(<head\b[^>]*>).*?(</head>)", re.DOTALL | re.IGNORECASE)
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class ChromiumNotFound(RuntimeError):
    """No chromium to print with."""


class PdfError(RuntimeError):
    """Chromium ran but did not produce the PDF."""


def find_chromium(explicit: str | Path | None = None) -> str:
    """The browser to print with: ``explicit``, else ``TCPLAB_CHROMIUM``, else the first on PATH."""
    wanted = explicit or os.environ.get("TCPLAB_CHROMIUM")
    if wanted:
        found = shutil.which(str(wanted))
        if not found:
            raise ChromiumNotFound(f"chromium not found at {wanted!r} (from "
                                   f"{'the argument' if explicit else 'TCPLAB_CHROMIUM'})")
        return found
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumNotFound(
        "PDF output needs headless chromium, which is not installed: "
        "apt-get install chromium (or set TCPLAB_CHROMIUM to a chromium binary), "
        "or ask for formats=('html',) only.")


def chromium_command(chromium: str, html_path: Path, pdf_path: Path,
                     profile_dir: Path) -> list[str]:
    return [
        chromium,
        "--headless",
        "--no-sandbox",  # we run as root in the lab, where chromium refuses its sandbox
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--allow-file-access-from-files",
        f"--user-data-dir={profile_dir}",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf_path}",
        html_path.resolve().as_uri(),
    ]


def html_to_pdf(html_path: str | Path, pdf_path: str | Path, *,
                chromium: str | Path | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> Path:
    """Print ``html_path`` to ``pdf_path`` (A4 and margins come from the page's CSS)."""
    html_path = Path(html_path)
    target = Path(pdf_path)
    pdf_path = target.resolve()
    if not html_path.is_file():
        raise FileNotFoundError(f"no HTML to print: {html_path}")
    binary = find_chromium(chromium)
    pdf_path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and moved into place, so a failed print never leaves a
    # truncated PDF that looks like a result.
    partial = partial_name(pdf_path)
    partial.unlink(missing_ok=True)
    _print(binary, html_path, partial, timeout_s)
    partial.replace(pdf_path)
    return target


def _print_copy(html_path: Path, folder: Path) -> Path:
    """The page as chromium is to print it: ``html_path`` itself, or where the page has CJK
    text, a copy in ``folder`` that declares the CJK font with TrueType outlines
    (:mod:`.print_fonts`), its relative references resolved from ``html_path``'s folder."""
    page = html_path.read_text(encoding="utf-8")
    head = _HEAD.search(page)
    fonts = print_font_css(page) if head else ""
    if not fonts:
        return html_path
    copy = folder / html_path.name
    # The base comes first, so that every reference of the head resolves from the page's folder.
    base = f'<base href="{html_path.resolve().parent.as_uri()}/">'
    copy.write_text(f"{page[:head.end(1)]}{base}{page[head.end(1):head.start(2)]}<style>\n{fonts}\n</style>\n"
                    f"{page[head.start(2):]}", encoding="utf-8")
    return copy


def _print(binary: str, source: Path, partial: Path, timeout_s: float) -> None:
    from ..lab.state import checkpoint, die_with_parent

    with tempfile.TemporaryDirectory(prefix="tcplab-chromium-") as profile:
        printed = _print_copy(source, Path(profile))
        command = chromium_command(binary, printed, partial, Path(profile))
        # Chromium ends with us, however we end (a killed `tcplab report` must leave no browser).
        with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "HOME": profile}, preexec_fn=die_with_parent) as proc:
            checkpoint("rendering")
            try:
                _, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                proc.communicate()
                partial.unlink(missing_ok=True)
                raise PdfError(f"chromium did not finish printing {source} within "
                               f"{timeout_s:g} s") from exc
    if proc.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        detail = _last_lines(stderr.decode("utf-8", "replace"))
        raise PdfError(f"chromium failed to print {source} (exit {proc.returncode}): {detail}")


def _last_lines(text: str, n: int = 5) -> str:
    # Chromium's stderr is mostly D-Bus noise from a machine without a session bus.
    lines = [ln for ln in text.splitlines() if ln.strip() and "dbus" not in ln.lower()]
    return " | ".join(lines[-n:]) or "no message"


def first_pages(pdf_path: str | Path, headers: dict[str, str], *, timeout_s: float = 60) -> dict[str, int]:
    """The page (from 1) on which each key's running header first appears at the top of a page
    of ``pdf_path``: how a contents page learns the page numbers the print gave its sections.
    Empty when poppler's ``pdftotext`` is missing or fails: the contents then go without."""
    tool = shutil.which("pdftotext")
    if tool is None:
        return {}
    try:
        text = subprocess.run([tool, "-layout", "-enc", "UTF-8", str(pdf_path), "-"], capture_output=True, text=True,
                              timeout=timeout_s, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return {}
    # -layout keeps a header on one line (else CJK runs may land on their own); pdftotext may
    # space Latin and CJK runs apart: compare without any whitespace.
    tops = ["".join(next((ln for ln in page.splitlines() if ln.strip()), "").split()) for page in text.split("\f")]
    found = {}
    for key, header in headers.items():
        wanted = "".join(header.split())
        page = next((number for number, top in enumerate(tops, 1) if top.startswith(wanted)), None)
        if page is not None:
            found[key] = page
    return found
