"""The figure of docs/privacy.md: accuracy against the privacy budget."""

from __future__ import annotations

from benchmarks.figures.drawing import canvas
from benchmarks.figures.reading import column, errors, number
from benchmarks.figures.registry import from_table


@from_table("privacy")
def privacy(rows):
    """Final accuracy against the noise multiplier, a line per method with its std over
    seeds; the run without DP as a dashed line of the method's colour."""
    fig, ax = canvas(figsize=(6, 4))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        noised = [r for r in mine if not r["noise multiplier σ"].startswith("none")]
        key = "test accuracy (mean ± std)"
        line = ax.errorbar(
            column(noised, "noise multiplier σ"),
            column(noised, key),
            yerr=errors(noised, key),
            marker="o",
            capsize=3,
            label=method,
        )
        for r in mine:
            if r["noise multiplier σ"].startswith("none"):
                ax.axhline(
                    number(r[key]),
                    ls="--",
                    color=line[0].get_color(),
                    alpha=0.6,
                    label=f"{method} without DP",
                )
    ax.set(
        xlabel="noise multiplier σ (privacy=dp_server_fixed)",
        ylabel="final test accuracy, mean ± std",
        title="Accuracy under Flower's server-side DP",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
