"""``tcplab diagnose -o REPORT.html``: one flow's diagnosis as a self-contained HTML page,
rendered through the report's templating with the flow's figures (:mod:`tcplab.plots`)
inlined as PNGs."""

from __future__ import annotations

import base64
import io
from pathlib import Path

__all__ = ["FIGURES", "write_page"]

#: Figures of the page: the plot functions of :mod:`tcplab.plots` taking (packets, flow).
FIGURES = ("time_sequence", "throughput", "window_and_inflight", "rtt")


def write_page(result, table, path, *, source: str, language: str | None = None) -> None:
    """The diagnosis ``result`` of a flow of ``table``, its numbers and figures, to ``path``."""
    from ..words import Messages
    from .templating import render

    html = render("diagnosis.html.j2", messages=Messages(language), source=source, result=result,
                  metrics=_metric_rows(result.metrics), figures=_figures(table, result.metrics.flow))
    Path(path).write_text(html, encoding="utf-8")


def _figures(table, flow: int) -> list[dict]:
    """Each figure of :data:`FIGURES` as a base64 PNG, or why the flow has nothing to draw for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .. import plots

    out = []
    for name in FIGURES:
        try:
            fig = getattr(plots, name)(table.packets, flow)
        except ValueError as exc:  # nothing to draw (a flow without RTT samples): say so instead
            out.append({"name": name, "png": None, "missing": str(exc)})
            continue
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        plt.close(fig)
        out.append({"name": name, "png": base64.b64encode(buf.getvalue()).decode("ascii")})
    return out


def _metric_rows(m) -> list[tuple[str, str]]:
    rows = []
    for key, value in m.to_dict().items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v:.3g}" if isinstance(v, float) else f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, float):
            value = f"{value:.6g}"
        rows.append((key, "-" if value is None or value == "" else str(value)))
    return rows
