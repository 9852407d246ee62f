"""The figures of docs/benchmarks/synthetic.md: the Synthetic(α, β) studies."""

from __future__ import annotations

import numpy as np

from benchmarks.figures.drawing import (
    bar_figure,
    canvas,
    columns_without_errors,
    grouped_bars,
    legend_below,
)
from benchmarks.figures.reading import column, errors, label, number, spread
from benchmarks.figures.registry import from_table


@from_table("synthetic_fedprox")
def synthetic_fedprox(rows):
    data = list(dict.fromkeys(r["data"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["data"], r["method"]): r for r in rows}
    key = "final accuracy (%)"
    return bar_figure(
        (8, 3.8),
        data,
        {
            m: (
                np.array([number(cell[d, m][key]) for d in data]),
                np.array([spread(cell[d, m][key]) for d in data]),
            )
            for m in methods
        },
        3,
        ylabel="final test accuracy (%), mean ± std",
        ylim=(0, 110),
        title="FedAvg against FedProx on Synthetic",
    )


@from_table("synthetic_fairness")
def synthetic_fairness(rows):
    names = [f"{r['method']} ({r['sampling']}, {r['model']})" for r in rows]
    fig, ax = canvas(figsize=(8, 1.2 + 0.42 * len(rows)))
    grouped_bars(
        ax,
        names,
        {
            k.replace(" (%)", ""): (column(rows, k), errors(rows, k))
            for k in ("average (%)", "worst 10% (%)")
        },
        horizontal=True,
    )
    ax.set(
        xlabel="test accuracy over devices (%), mean ± std over draws",
        xlim=(0, 100),
        title="Accuracy over devices on Synthetic(1,1)",
    )
    ax.tick_params(axis="y", labelsize=8)
    legend_below(ax, 2)
    return fig


@from_table("synthetic_horizon")
def synthetic_horizon(rows):
    runs = list(dict.fromkeys((r["method"], r["sampling"]) for r in rows))
    rounds = sorted({int(number(r["round"])) for r in rows})
    fig, ax = canvas(figsize=(7.5, 4))
    for (method, sampling), colour in zip(runs, ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        chosen = [r for r in rows if (r["method"], r["sampling"]) == (method, sampling)]
        x = [number(r["round"]) for r in chosen]
        ax.plot(
            x,
            column(chosen, "average (%)"),
            "o-",
            color=colour,
            label=f"{method}, {sampling}: average",
        )
        ax.plot(
            x,
            column(chosen, "worst 10% (%)"),
            "s--",
            color=colour,
            label=f"{method}, {sampling}: worst 10%",
        )
    ax.set(
        xscale="log",
        xlabel="round",
        ylabel="test accuracy over devices (%)",
        ylim=(0, 100),
        title="q-FFL over 20,000 rounds",
    )
    ax.set_xticks(rounds, [f"{r:,}" for r in rounds])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    legend_below(ax, 2)
    return fig


@from_table("synthetic_draws")
def synthetic_draws(rows):
    keys = [k for k in rows[0] if k.endswith("(%)") or k.endswith("(%, mean)")]
    return bar_figure(
        (8, 4),
        [f"draw {label(r)}" for r in rows],
        columns_without_errors(rows, {k: k for k in keys}),
        2,
        ylabel="%",
        ylim=(0, 105),
        title="The three draws of Synthetic(1,1)",
    )
