"""The figure of docs/privacy.md: accuracy against the privacy budget."""

from __future__ import annotations

from benchmarks.figures.drawing import canvas
from benchmarks.figures.reading import floats
from benchmarks.figures.registry import drawn_from


@drawn_from("privacy")
def privacy(rows):
    """Final accuracy against the ε the run spent (log scale), a line per method with its
    std over seeds; the run without DP (no noise multiplier) as a dashed line of the
    method's colour. Rows of benchmarks/accuracy/privacy.py."""
    fig, ax = canvas(figsize=(6, 4))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        noised = [r for r in mine if r["noise_multiplier"] != "" and r["epsilon"] != ""]
        line = ax.errorbar(
            floats(noised, "epsilon"),
            floats(noised, "accuracy"),
            yerr=floats(noised, "accuracy_std"),
            marker="o",
            capsize=3,
            label=method,
        )
        for r in mine:
            if r["noise_multiplier"] == "":
                ax.axhline(
                    float(r["accuracy"]),
                    ls="--",
                    color=line[0].get_color(),
                    alpha=0.6,
                    label=f"{method} without DP",
                )
    ax.set(
        xscale="log",
        xlabel="ε spent at δ (privacy=dp_server_fixed, replace-one)",
        ylabel="final test accuracy, mean ± std",
        title="Accuracy under Flower's server-side DP",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
