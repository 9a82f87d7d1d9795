"""The house style of every tcplab figure, and the plots that are not about one flow.

Flow plots (time-sequence, throughput, windows, RTT) live beside the analysis that feeds
them; this module sets the look they share so a handout reads as one document.
"""

from __future__ import annotations

from typing import Iterable

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

#: Colours by role, the same in every figure: what was configured or predicted is grey.
PALETTE = {"configured": "#9e9e9e", "predicted": "#9e9e9e", "measured": "#1f77b4",
           "data": "#1f77b4", "ack": "#2ca02c", "window": "#ff7f0e", "retransmission": "#d62728",
           "zero_window": "#9467bd", "stall": "#8c564b"}


def use_house_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95,
                  rc={"figure.figsize": (8, 3.6), "figure.dpi": 110, "savefig.dpi": 150,
                      "axes.titleweight": "bold", "axes.titlesize": 11,
                      "font.family": ["DejaVu Sans", "Noto Sans CJK SC", "sans-serif"]})


def configured_vs_measured(rows: Iterable[dict], *, title: str = "Configured vs measured"):
    """One small panel per quantity: a grey bar for the target, a blue one for the measurement."""
    use_house_style()
    frame = pd.DataFrame(list(rows))
    long = frame.melt(id_vars=["quantity", "unit"], value_vars=["configured", "measured"],
                      var_name="kind", value_name="value").dropna(subset=["value"])
    quantities = list(frame["quantity"])
    fig, axes = plt.subplots(1, len(quantities), figsize=(3.2 * len(quantities), 3.2), squeeze=False)
    for ax, quantity in zip(axes[0], quantities):
        part = long[long["quantity"] == quantity]
        sns.barplot(data=part, x="kind", y="value", hue="kind", palette=PALETTE, ax=ax, legend=False)
        unit = part["unit"].iloc[0] if len(part) else ""
        ax.set_title(quantity, fontsize=9)
        ax.set_xlabel("")
        ax.set_ylabel(unit)
        for bar, value in zip(ax.patches, part["value"]):
            ax.annotate(f"{value:.3g}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def rtt_samples(samples_s: Iterable[float], configured_s: float, *, title: str = "Round trips over TCP"):
    """Distribution of measured round trips against the configured value."""
    use_house_style()
    ms = pd.Series([s * 1e3 for s in samples_s], name="round trip (ms)")
    fig, ax = plt.subplots(figsize=(8, 2.8))
    sns.histplot(ms, bins=30, color=PALETTE["measured"], ax=ax)
    ax.axvline(configured_s * 1e3, color=PALETTE["configured"], linestyle="--", label="configured")
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    return fig
