"""``tcplab diagnose -o REPORT.html``: one flow's diagnosis as a self-contained HTML page,
rendered through the report's templating with the flow's figures (:mod:`tcplab.plots`)
inlined as PNGs. The page, its figures and its table of numbers are written in the
``language`` given (its names as ``metric.<field>``, its word values as ``cell.<word>``);
nothing of the process (``TCPLAB_LANG``) is changed to draw them."""

from __future__ import annotations

import base64
import io
from pathlib import Path

__all__ = ["FIGURES", "write_page"]

#: Figures of the page: the plot functions of :mod:`tcplab.plots` taking (packets, flow).
FIGURES = ("time_sequence", "throughput", "window_and_inflight", "rtt")


def write_page(result, table, path, *, source: str, language: str | None = None) -> None:
    """The diagnosis ``result`` of a flow of ``table``, its numbers and figures, to ``path``, in
    ``language`` (None: ``$TCPLAB_LANG``, else English)."""
    from ..words import Messages
    from .templating import render

    words = Messages(language)
    html = render("diagnosis.html.j2", messages=words, source=source, result=result,
                  metrics=_metric_rows(result.metrics, words),
                  figures=_figures(table, result.metrics.flow, words.language))
    Path(path).write_text(html, encoding="utf-8")


def _figures(table, flow: int, language: str) -> list[dict]:
    """Each figure of :data:`FIGURES` as a base64 PNG, or why the flow has nothing to draw for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .. import plots

    out = []
    for name in FIGURES:
        try:
            fig = getattr(plots, name)(table.packets, flow, language=language)
        except ValueError as exc:  # nothing to draw (a flow without RTT samples): say so instead
            out.append({"name": name, "png": None, "missing": str(exc)})
            continue
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        plt.close(fig)
        out.append({"name": name, "png": base64.b64encode(buf.getvalue()).decode("ascii")})
    return out


def _metric_rows(m, words) -> list[tuple[str, str, str]]:
    """(field, its name in the page's language, value) for each number of the flow: a field's
    name is ``metric.<field>`` (the field itself, which is also its ``--json`` key, where no
    key has it); a word value (on, unknown, client, True) is ``cell.<word>``; endpoints,
    numbers, ``ss`` fields and the diagnosis's codes stay as they are."""
    rows = []
    for key, value in m.to_dict().items():
        if isinstance(value, dict):
            shown = ", ".join(f"{_part(words, key, k)}: {v:.3g}" if isinstance(v, float) else
                              f"{_part(words, key, k)}: {_word(v, words)}" for k, v in value.items()) or "-"
        elif value is None or value == "":
            shown = "-"
        elif isinstance(value, float):
            shown = f"{value:.6g}"
        else:
            shown = _word(value, words)
        rows.append((key, words.metric(key), shown))
    return rows


def _part(words, field: str, name: str) -> str:
    """A part of a number that holds several (``gap_s_by_reason``'s reasons, ``telemetry_summary``'s
    values) as ``metric.<field>.<part>``; the part's own name (a reason's code, an ``ss``
    field) where no key has it."""
    key = f"metric.{field}.{name}"
    return words(key) if words.has(key) else name


def _word(value, words) -> str:
    """A value as the page writes it: a word (or a flag, True/False) through ``cell.*``."""
    return words.cell(str(value)) if isinstance(value, (str, bool)) else str(value)
