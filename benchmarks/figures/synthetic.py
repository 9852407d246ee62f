"""The figures of docs/benchmarks/synthetic.md: the Synthetic(α, β) studies."""

from __future__ import annotations

from benchmarks.figures.drawing import bar_figure, canvas, grouped_bars, legend_below
from benchmarks.figures.reading import floats
from benchmarks.figures.registry import drawn_from


@drawn_from("synthetic_fedprox")
def synthetic_fedprox(rows):
    """Final accuracy per data and method, mean ± std over draws. Rows of
    benchmarks/accuracy/synthetic.py (``fedprox``)."""
    data = list(dict.fromkeys(r["data"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["data"], r["method"]): r for r in rows}
    return bar_figure(
        (8, 3.8),
        data,
        {
            m: (
                floats([cell[d, m] for d in data], "final_accuracy"),
                floats([cell[d, m] for d in data], "final_std"),
            )
            for m in methods
        },
        3,
        ylabel="final test accuracy (%), mean ± std",
        ylim=(0, 110),
        title="FedAvg against FedProx on Synthetic",
    )


@drawn_from("synthetic_fairness")
def synthetic_fairness(rows):
    """Average and worst-10% accuracy over devices per row, mean ± std over draws. Rows of
    benchmarks/accuracy/synthetic.py (``fairness``)."""
    names = [f"{r['method']} ({r['sampling']}, {r['model']})" for r in rows]
    fig, ax = canvas(figsize=(8, 1.2 + 0.42 * len(rows)))
    grouped_bars(
        ax,
        names,
        {
            name: (floats(rows, key), floats(rows, f"{key}_std"))
            for name, key in (("average", "average"), ("worst 10%", "worst_10"))
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


@drawn_from("synthetic_horizon")
def synthetic_horizon(rows):
    """Average and worst-10% accuracy over devices against the round, per row. Rows of
    benchmarks/accuracy/synthetic.py (``horizon``)."""
    runs = list(dict.fromkeys((r["method"], r["sampling"]) for r in rows))
    rounds = sorted({int(r["round"]) for r in rows})
    fig, ax = canvas(figsize=(7.5, 4))
    for (method, sampling), colour in zip(runs, ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        chosen = [r for r in rows if (r["method"], r["sampling"]) == (method, sampling)]
        x = floats(chosen, "round")
        ax.plot(
            x,
            floats(chosen, "average"),
            "o-",
            color=colour,
            label=f"{method}, {sampling}: average",
        )
        ax.plot(
            x,
            floats(chosen, "worst_10"),
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


#: the draws figure's bars: legend label -> column of the data
DRAW_SHARES = {
    "largest device's share (%)": "largest_share",
    "ten largest devices' share (%)": "ten_largest_share",
    "rounds drawing the largest device (%)": "rounds_drawing_largest",
    "rounds drawing a device of the smaller half (%, mean)": "rounds_drawing_smaller_half",
}


@drawn_from("synthetic_draws")
def synthetic_draws(rows):
    """How skewed each data draw's device sizes are, and how sampling by size treats them.
    Rows of benchmarks/accuracy/synthetic.py (``draws``)."""
    return bar_figure(
        (8, 4),
        [f"draw {r['draw']}" for r in rows],
        {name: (floats(rows, key), None) for name, key in DRAW_SHARES.items()},
        2,
        ylabel="%",
        ylim=(0, 105),
        title="The three draws of Synthetic(1,1)",
    )
