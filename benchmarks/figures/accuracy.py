"""The figures of docs/benchmarks/accuracy.md: the method comparisons and their studies."""

from __future__ import annotations

from functools import partial

import numpy as np

from benchmarks.figures.drawing import bar_figure, canvas, legend_below
from benchmarks.figures.reading import floats
from benchmarks.figures.registry import drawn_from, from_data


def method_accuracy(rows: list[dict[str, str]], title: str):
    """Final accuracy per method as a dot with ±std whiskers over seeds (dots, not bars, so
    the axis can zoom in on differences of a point), the best accuracy as a diamond. Rows
    of benchmarks/accuracy/compare_methods.py."""
    fig, ax = canvas(figsize=(7, 1.2 + 0.34 * len(rows)))
    places = np.arange(len(rows))
    ax.errorbar(
        floats(rows, "final_accuracy"),
        places,
        xerr=floats(rows, "final_accuracy_std"),
        fmt="o",
        capsize=3,
        color="tab:blue",
        label="final accuracy, mean ± std over seeds",
    )
    if any(r["best_accuracy"] for r in rows):
        ax.plot(
            floats(rows, "best_accuracy"),
            places,
            "D",
            color="tab:orange",
            markersize=5,
            label="best accuracy, mean over seeds",
        )
    ax.set_yticks(places, [r["method"] for r in rows])
    ax.set(xlabel="test accuracy (%)", title=title, ylim=(len(rows) - 0.5, -0.5))
    ax.grid(alpha=0.3)
    legend_below(ax, 2)
    return fig


#: the method comparisons of compare_methods.py and their titles
COMPARISONS = {
    "rebafl_mnist5k": "ReBaFL and the label-skew baselines",
    "astraea_mnist5k": "Astraea and its ablations",
    "grpfed_mnist5k": "GRP-FED and the fairness / personalisation baselines",
    "stateful_mnist5k_alpha0.1": "Stateful baselines under Adam, Dir(0.1)",
    "stateful_mnist5k_alpha0.5": "Stateful baselines under Adam, Dir(0.5)",
}


for _table, _title in COMPARISONS.items():
    drawn_from(_table)(partial(method_accuracy, title=_title))


@from_data("_rounds")
def accuracy_rounds(rows, table: str):
    """Test accuracy per round, mean over seeds with a ±std band, one line per method."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = canvas(figsize=(7.5, 4.2))
    for method in dict.fromkeys(r["method"] for r in rows):
        points = sorted(
            (int(r["round"]), float(r["mean"]), float(r["std"] or "nan"))  # no band for one run
            for r in rows
            if r["method"] == method
        )
        rounds, mean, std = (np.array(v) for v in zip(*points))
        ax.plot(rounds, 100 * mean, label=method, lw=1.3)
        ax.fill_between(rounds, 100 * (mean - std), 100 * (mean + std), alpha=0.15)
    runs = sorted({r["runs"] for r in rows})
    ax.set(
        xlabel="round",
        ylabel="test accuracy (%), mean ± std over seeds",
        ylim=(0, 100),
        title=f"{COMPARISONS.get(table, table)} ({'/'.join(runs)} seeds per method)",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", ncol=2)
    return fig


@drawn_from("fedconcat_mnist5k")
def fedconcat(rows):
    """Final accuracy per partition and method, mean ± std over seeds. Rows of
    benchmarks/accuracy/fedconcat_matched.py."""
    partitions = list(dict.fromkeys(r["partition"] for r in rows))
    cell = {(r["partition"], r["method"]): r for r in rows}
    series = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        chosen = [cell[p, method] for p in partitions]
        series[method] = (floats(chosen, "final_accuracy"), floats(chosen, "final_std"))
    return bar_figure(
        (7, 3.6),
        partitions,
        series,
        3,
        ylabel="final test accuracy (%), mean ± std",
        ylim=(0, 100),
        xlabel="partition",
        title="FedConcat against FedAvg, communication matched",
    )


@drawn_from("grpfed_sensitivity")
def grpfed_sensitivity(rows):
    """GRP-FED's final T_g and T_l over its (q_0, η_q) grid as heat maps, FedAvg's in the
    titles. Rows of benchmarks/accuracy/grpfed_sensitivity.py."""
    cells = {(float(r["q0"]), float(r["eta_q"])): r for r in rows if r["q0"] != ""}
    q0s, etas = sorted({q for q, _ in cells}), sorted({e for _, e in cells})
    fedavg = next(r for r in rows if r["row"] == "fedavg")
    fig, axes = canvas(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("T_g", "T_l")):
        grid = np.array([[float(cells[q, e][key]) for e in etas] for q in q0s])
        image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
        middle = (grid.min() + grid.max()) / 2
        for i in range(len(q0s)):
            for j in range(len(etas)):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="k" if grid[i, j] > middle else "w",
                )
        ax.set(
            xticks=range(len(etas)),
            xticklabels=[f"{e:g}" for e in etas],
            yticks=range(len(q0s)),
            yticklabels=[f"{q:g}" for q in q0s],
            xlabel="η_q",
            ylabel="q_0",
            title=f"GRP-FED final {key} (%); FedAvg {float(fedavg[key]):.1f}",
        )
        fig.colorbar(image, ax=ax, label="%")
    return fig


@drawn_from("perfedavg_curvature")
def perfedavg_curvature(rows):
    """The largest and the median over clients of λ_max against the round, per set-up.
    Rows of benchmarks/accuracy/perfedavg_curvature.py."""
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    rounds = sorted({int(r["round"]) for r in rows})
    fig, ax = canvas(figsize=(7, 3.8))
    for name, colour in zip(setups, ("tab:blue", "tab:orange")):
        chosen = [r for r in rows if r["setup"] == name]
        x = floats(chosen, "round")
        largest, median = floats(chosen, "largest"), floats(chosen, "median")
        ax.plot(x, largest, "o-", color=colour, label=f"{name}: largest over clients")
        ax.plot(x, median, "o--", color=colour, label=f"{name}: median over clients")
    ax.set(
        xlabel="round",
        ylabel="largest Hessian eigenvalue of a\nclient's loss at the global model",
        xticks=rounds,
        title="Per-FedAvg: curvature along training",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def alpha_panels(rows):
    """One panel per Dirichlet α of the rows, sharing the y axis: (figure, axes, the αs)."""
    alphas = list(dict.fromkeys(r["alpha"] for r in rows))
    fig, axes = canvas(1, len(alphas), figsize=(5 * len(alphas), 3.8), sharey=True, squeeze=False)
    return fig, list(axes[0]), alphas


@drawn_from("normalization_mnist5k")
def normalization(rows):
    """Normalised − original final accuracy per method, one panel per α, at the first
    temperature of the rows. Rows of benchmarks/accuracy/normalization_compare.py."""
    fig, axes, alphas = alpha_panels(rows)
    rows = [r for r in rows if r["temperature"] == rows[0]["temperature"]]
    for ax, alpha in zip(axes, alphas):
        chosen = [r for r in rows if r["alpha"] == alpha]
        ax.bar(
            range(len(chosen)),
            floats(chosen, "difference"),
            yerr=floats(chosen, "difference_std"),
            capsize=3,
            color="tab:green",
        )
        ax.set_xticks(range(len(chosen)), [r["method"] for r in chosen], rotation=30)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(title=f"Dir({alpha})")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("normalised − original,\nfinal accuracy (points, mean ± std)")
    fig.suptitle("Contribution normalisation: change in final accuracy")
    return fig


@drawn_from("normalization_temperature")
def normalization_temperature(rows):
    """Normalised − original final accuracy against the temperature of eq. 8, a line per
    method, one panel per α. Rows of benchmarks/accuracy/normalization_compare.py."""
    fig, axes, alphas = alpha_panels(rows)
    temperatures = [float(t) for t in dict.fromkeys(r["temperature"] for r in rows)]
    for ax, alpha in zip(axes, alphas):
        here = [r for r in rows if r["alpha"] == alpha]
        for method in dict.fromkeys(r["method"] for r in here):
            chosen = [r for r in here if r["method"] == method]
            ax.errorbar(
                floats(chosen, "temperature"),
                floats(chosen, "difference"),
                yerr=floats(chosen, "difference_std"),
                marker="o",
                capsize=2,
                label=method,
            )
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="temperature T", title=f"Dir({alpha})")
        ax.set_xticks(temperatures, [f"{t:g}" for t in temperatures])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("normalised − original,\nfinal accuracy (points, mean ± std)")
    axes[-1].legend(fontsize=8)
    fig.suptitle("Contribution normalisation: the temperature of eq. 8")
    return fig


@drawn_from("stability")
def stability(rows):
    """Final accuracy (mean over seeds) per method and setting as a heat map, with the
    collapsed runs written where there are any. Rows of benchmarks/accuracy/stability.py."""
    settings = list(dict.fromkeys((r["momentum"], r["alpha"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r["momentum"], r["alpha"]): r for r in rows}
    grid = np.array([[float(cell[m, *s]["final_accuracy"]) for s in settings] for m in methods])
    fig, ax = canvas(figsize=(7, 0.9 + 0.42 * len(methods)))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    for i, method in enumerate(methods):
        for j, setting in enumerate(settings):
            row = cell[method, *setting]
            collapsed = int(row["collapsed"])
            note = f"\n{collapsed}/{row['runs']} collapsed" if collapsed else ""
            ax.text(j, i, f"{grid[i, j]:.1f}{note}", ha="center", va="center", fontsize=7)
    ax.set_xticks(
        range(len(settings)), [f"momentum {m}\nDir({a})" for m, a in settings], fontsize=8
    )
    ax.set_yticks(range(len(methods)), methods, fontsize=8)
    ax.set_title("Final test accuracy (%), mean over seeds, under SGD")
    fig.colorbar(image, ax=ax, label="final test accuracy (%)")
    return fig


@drawn_from("distillation_regimes", "regulariser_regimes")
def optimiser_regimes(rows):
    """One panel per local optimiser: each method's test accuracy against the round, the
    mean over seeds; FedAvg in black. Rows of benchmarks/accuracy/distillation_regimes.py
    and regulariser_regimes.py."""
    regimes = list(dict.fromkeys(r["regime"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = canvas(1, len(regimes), figsize=(5 * len(regimes), 3.8), sharey=True, squeeze=False)
    others = iter(f"C{i}" for i in range(10))
    colours = {m: "k" if m == "fedavg" else next(others) for m in methods}
    for ax, regime in zip(axes[0], regimes):
        for method in methods:
            chosen = [r for r in rows if r["regime"] == regime and r["method"] == method]
            rounds = sorted({int(r["round"]) for r in chosen})
            mean = [
                np.mean([float(r["accuracy"]) for r in chosen if int(r["round"]) == x])
                for x in rounds
            ]
            style = ":" if method == "bsm_fedavg" else "-"
            ax.plot(rounds, mean, style, color=colours[method], lw=1.4, label=method)
        ax.set(xlabel="round", title=f"local SGD at lr 0.01, {regime}")
        ax.grid(alpha=0.3)
    axes[0][0].set(ylabel="test accuracy (mean over seeds)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    return fig
