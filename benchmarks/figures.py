"""The benchmark figures the documentation shows, drawn from what the scripts published.

Every figure is drawn from one file under ``docs/tables/``: the Markdown table a script
wrote (``<table>.md``, where the table holds all the figure needs) or the data a script
wrote beside it (``data/<name>.csv``, one row per point, e.g. the per-round accuracy of a
comparison). :func:`benchmarks.common.publish_in_docs` redraws a table's figure each time
a script rewrites the table, and this module redraws them all without rerunning anything:

    python -m benchmarks.figures [--tables docs/tables] [--out docs/img/bench] [NAME ...]

Each figure lands in ``<out>/<name>.png``, which the page beside the table shows.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.plotting import DOCS_FIGURES, DOCS_TABLES, figure, publish_figure

NUMBER = re.compile(r"[-−+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")

#: figure name -> (the table it is drawn from, the function drawing it from that table's rows)
FROM_TABLES: dict[str, tuple[str, Callable]] = {}
#: suffix of a data file -> the function drawing the figure of that name from its rows
FROM_DATA: dict[str, Callable] = {}


# -- reading tables and data -----------------------------------------------------------------------


def read_table(path: Path) -> list[dict[str, str]]:
    """The rows of the first Markdown table in ``path``, keyed by the header's cells (a
    cell the header repeats, such as ``diff.``, named after the one before it:
    ``diff. (T = 1)``)."""
    lines = [line.strip() for line in Path(path).read_text().splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    header, rows = table[0], table[2:]
    header = [
        f"{cell} ({header[i - 1]})" if header.count(cell) > 1 and i else cell
        for i, cell in enumerate(header)
    ]
    return [dict(zip(header, row)) for row in rows]


def read_data(path: Path) -> list[dict[str, str]]:
    """The rows of a data file (CSV with a header)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def numbers(cell: str) -> list[float]:
    """Every number in a table cell, in order (``**`` marks, thousands commas and the
    typographic minus understood)."""
    return [
        float(n.replace(",", "").replace("−", "-")) for n in NUMBER.findall(cell.replace("*", ""))
    ]


def number(cell: str) -> float:
    """The first number in a cell (``92.93 ± 0.31`` -> 92.93); NaN where it holds none (``-``)."""
    found = numbers(cell)
    return found[0] if found else math.nan


def spread(cell: str) -> float:
    """The ``± std`` of a ``mean ± std`` cell; NaN where there is none."""
    found = numbers(cell.split("±", 1)[1]) if "±" in cell else []
    return found[0] if found else math.nan


def column(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([number(row[key]) for row in rows])


def errors(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([spread(row[key]) for row in rows])


def label(row: dict[str, str]) -> str:
    """The first cell of a row: what the row is."""
    return next(iter(row.values())).replace("`", "")


# -- registering -----------------------------------------------------------------------------------


def from_table(*names: str):
    """Register a drawer for the figures ``names``, each drawn from the table of the same name."""

    def register(draw: Callable) -> Callable:
        for name in names:
            FROM_TABLES[name] = (name, draw)
        return draw

    return register


def from_data(suffix: str):
    """Register a drawer for every data file ``data/<name><suffix>.csv``."""

    def register(draw: Callable) -> Callable:
        FROM_DATA[suffix] = draw
        return draw

    return register


# -- shared plot shapes ----------------------------------------------------------------------------


def grouped_bars(
    ax,
    groups: list[str],
    series: dict[str, tuple[np.ndarray, np.ndarray | None]],
    horizontal: bool = False,
) -> None:
    """One group of bars per entry of ``groups``, one bar per series (values, error bars)."""
    width = 0.8 / len(series)
    places = np.arange(len(groups))
    for i, (name, (values, errs)) in enumerate(series.items()):
        where = places - 0.4 + width * (i + 0.5)
        if horizontal:
            ax.barh(where, values, height=width, xerr=errs, label=name, capsize=2)
        else:
            ax.bar(where, values, width=width, yerr=errs, label=name, capsize=2)
    if horizontal:
        ax.set_yticks(places, groups)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(places, groups)
        ax.grid(axis="y", alpha=0.3)


def stacked_bars(ax, bars: list[str], parts: dict[str, np.ndarray]) -> None:
    """One horizontal bar per entry of ``bars``, stacked from ``parts`` in order, each part
    labelled with its value where it is wide enough."""
    left = np.zeros(len(bars))
    total = max(float(sum(parts.values()).max()), 1e-9)
    for name, values in parts.items():
        drawn = ax.barh(bars, values, left=left, label=name)
        ax.bar_label(
            drawn,
            labels=[f"{v:.1f}" if v >= 0.06 * total else "" for v in values],
            label_type="center",
            fontsize=7,
        )
        left = left + values
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def canvas(*args, **kwargs):
    """:func:`benchmarks.plotting.figure` laid out by matplotlib's constrained layout, which
    keeps a legend outside the plots clear of them."""
    return figure(*args, layout="constrained", **kwargs)


def legend_below(ax, columns: int = 3) -> None:
    """The legend of ``ax`` under the figure, where it covers no data."""
    ax.figure.legend(
        *ax.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=columns,
        fontsize=8,
        frameon=False,
    )


def bar_figure(
    size: tuple[float, float],
    groups: list[str],
    series: dict[str, tuple[np.ndarray, np.ndarray | None]],
    legend_columns: int,
    horizontal: bool = False,
    **settings,
):
    """A figure of :func:`grouped_bars` with the axes ``settings`` and the legend below."""
    _, ax = canvas(figsize=size)
    grouped_bars(ax, groups, series, horizontal=horizontal)
    return finish(ax, legend_columns, **settings)


def finish(ax, legend_columns: int, **settings):
    """The figure of ``ax`` with the axes ``settings`` set and the legend below."""
    ax.set(**settings)
    legend_below(ax, legend_columns)
    return ax.figure


def columns_without_errors(rows, columns: dict[str, str]) -> dict[str, tuple[np.ndarray, None]]:
    """Bar series without error bars: legend label -> the values of that table column."""
    return {name: (column(rows, key), None) for name, key in columns.items()}


def method_accuracy(rows: list[dict[str, str]], title: str):
    """Final accuracy per method as a dot with ±std whiskers over seeds (dots, not bars, so
    the axis can zoom in on differences of a point), the best accuracy as a diamond."""
    fig, ax = canvas(figsize=(7, 1.2 + 0.34 * len(rows)))
    places = np.arange(len(rows))
    ax.errorbar(
        column(rows, "final accuracy (%)"),
        places,
        xerr=errors(rows, "final accuracy (%)"),
        fmt="o",
        capsize=3,
        color="tab:blue",
        label="final accuracy, mean ± std over seeds",
    )
    if "best accuracy (%)" in rows[0]:
        ax.plot(
            column(rows, "best accuracy (%)"),
            places,
            "D",
            color="tab:orange",
            markersize=5,
            label="best accuracy, mean over seeds",
        )
    ax.set_yticks(places, [label(r) for r in rows])
    ax.set(xlabel="test accuracy (%)", title=title, ylim=(len(rows) - 0.5, -0.5))
    ax.grid(alpha=0.3)
    legend_below(ax, 2)
    return fig


# -- performance -----------------------------------------------------------------------------------


def time_bars(rows, size: tuple[float, float], bars: dict[str, str], **settings):
    """Two horizontal bars per table row (legend label -> table column) without error bars."""
    return bar_figure(
        size,
        [label(r) for r in rows],
        columns_without_errors(rows, bars),
        2,
        horizontal=True,
        **settings,
    )


#: timing tables drawn as two bars per row: figure size, legend label -> table column, axes
TIME_BARS = {
    "perf_fedavg": (
        (8.5, 3.2),
        {
            "rounds 2+ (s per round)": "seconds per round (rounds 2+, wall clock)",
            "first round (s)": "first round",
        },
        {"xlabel": "seconds", "title": "FedAvg: fedimb against a plain PyTorch loop"},
    ),
    "perf_methods": (
        (7, 7.5),
        {
            "fedimb (Flower simulation)": "fedimb s/round (rounds 2+, wall clock)",
            "the same rounds in one process": "one process s/round",
        },
        {"xlabel": "seconds per round (rounds 2+)", "title": "Every method: seconds per round"},
    ),
    "gpu_methods": (
        (7, 7.5),
        {"GPU": "GPU s/round", "the same machine's CPU": "CPU s/round"},
        {"xlabel": "seconds per round (rounds 2+)", "title": "Every method: GPU against CPU"},
    ),
}
for _table, (_size, _bars, _settings) in TIME_BARS.items():
    from_table(_table)(partial(time_bars, size=_size, bars=_bars, **_settings))


def log_log(ax, xlabel: str, ylabel: str, ticks) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(ticks))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, which="both")


@from_table("perf_scale")
def perf_scale(rows):
    fig, (time_ax, memory_ax) = canvas(1, 2, figsize=(9, 3.8))
    clients = column(rows, "clients")
    for key, name in (
        ("start-up (s)", "start-up"),
        ("round 1 (s)", "round 1"),
        ("s/round (rounds 2+)", "rounds 2+, per round"),
    ):
        time_ax.plot(clients, column(rows, key), "o-", label=name)
    log_log(time_ax, "virtual clients (10% sampled per round)", "seconds", clients)
    time_ax.legend(fontsize=8)
    memory_ax.plot(
        clients, column(rows, "peak memory, all processes (MiB)"), "o-", color="tab:purple"
    )
    log_log(
        memory_ax,
        "virtual clients (10% sampled per round)",
        "peak memory, all processes (MiB)",
        clients,
    )
    memory_ax.set(yscale="linear", ylim=(0, None))
    fig.suptitle("Many virtual clients (Flower simulation)")
    return fig


@from_table("synthetic_scale")
def synthetic_scale(rows):
    fig, axes = canvas(1, 3, figsize=(11, 3.8))
    devices = column(rows, "devices")
    keys = (
        ("round 1 (s)", "round 1 (s)"),
        ("s/round (rounds 2+)", "seconds per round, rounds 2+"),
        ("peak memory, all processes (MiB)", "peak memory, all processes (MiB)"),
    )
    for ax, (key, ylabel) in zip(axes, keys):
        series = lambda r: (r["runtime"], r["method"], r.get("sampled", "10"))  # noqa: E731
        for run in dict.fromkeys(series(r) for r in rows):
            chosen = [i for i, r in enumerate(rows) if series(r) == run]
            ax.plot(
                devices[chosen],
                column([rows[i] for i in chosen], key),
                "o-" if run[1] == "fedavg" else "s--",
                label=f"{run[0]}, {run[1]}, {run[2]} sampled",
            )
        log_log(ax, "devices", ylabel, devices)
    axes[-1].set(yscale="linear", ylim=(0, None))
    legend_below(axes[1], 4)
    fig.suptitle("Many devices on Synthetic")
    return fig


@from_table("perf_deployment")
def perf_deployment(rows):
    fig, axes = canvas(1, 2, figsize=(8, 3.4))
    nodes = list(dict.fromkeys(r["SuperNodes"] for r in rows))
    for ax, (key, ylabel) in zip(
        axes,
        (
            ("round 1 (s)", "round 1 (seconds)"),
            ("rounds 2+ (s per round)", "seconds per round, rounds 2+"),
        ),
    ):
        series = {
            code: (
                np.array(
                    [
                        number(r[key])
                        for n in nodes
                        for r in rows
                        if r["SuperNodes"] == n and r["code"] == code
                    ]
                ),
                None,
            )
            for code in dict.fromkeys(r["code"] for r in rows)
        }
        grouped_bars(ax, nodes, series)
        ax.set(xlabel="SuperNodes", ylabel=ylabel)
    axes[-1].legend(title="code", fontsize=8)
    fig.suptitle("Deployment on loopback: round latency")
    return fig


@from_table("perf_breakdown_3clients", "perf_breakdown_10clients")
def perf_breakdown(rows):
    columns = [key for key in rows[0] if key != "phase (s)"]
    phases = {
        "discover": "server: discover",
        "waiting for the last reply": "server: last_reply",
        "aggregate": "server: aggregate",
        "test": "server: test",
        "checkpoint": "server: checkpoint",
    }
    by_phase = {r["phase (s)"]: r for r in rows}
    _, ax = canvas(figsize=(7.5, 0.9 + 0.45 * len(columns)))
    stacked_bars(
        ax,
        columns,
        {
            name: np.array([number(by_phase[phase][c]) for c in columns])
            for name, phase in phases.items()
        },
    )
    return finish(
        ax, 5, xlabel="seconds (server side of a round)", title="Where a round's time goes"
    )


def startup_bars(rows, names: list[str]):
    """Command to round 0, round 0 to round 1, round 1 to exit: differences of the medians."""
    keys = ("command to round 0 (s)", "command to round 1 (s)", "command to exit (s)")
    marks = np.array([[number(r[k]) for k in keys] for r in rows])
    _, ax = canvas(figsize=(8.5, 1.5 + 0.45 * len(rows)))
    stacked_bars(
        ax,
        names,
        {
            "command to round 0": marks[:, 0],
            "round 1": marks[:, 1] - marks[:, 0],
            "round 1 to exit": marks[:, 2] - marks[:, 1],
        },
    )
    xlabel = "seconds from the command\n(medians; each part is the difference of two medians)"
    return finish(ax, 3, xlabel=xlabel, title="From the command to the first result")


@from_table("perf_startup")
def perf_startup(rows):
    return startup_bars(rows, [f"{r['runtime']}, {r['code']}" for r in rows])


@from_table("perf_startup_floor")
def perf_startup_floor(rows):
    return startup_bars(rows, [label(r) for r in rows])


@from_table("perf_startup_steps")
def perf_startup_steps(rows):
    steps = [r for r in rows if not label(r).startswith("...")]
    _, ax = canvas(figsize=(8, 2.8))
    stacked_bars(
        ax, ["simulation"], {label(r): np.array([number(r["median (min–max)"])]) for r in steps}
    )
    xlabel = "seconds from the command to round 1 (median of each step)"
    return finish(ax, 2, xlabel=xlabel, title="Start-up, step by step")


@from_table("perf_process_start")
def perf_process_start(rows):
    parts = [k for k in rows[0] if k not in ("fedimb cache", "total", "scikit-learn imported")]
    _, ax = canvas(figsize=(7, 2.6))
    stacked_bars(ax, [label(r) for r in rows], {p: column(rows, p) for p in parts})
    return finish(ax, 4, xlabel="seconds", title="A fresh client process before it trains")


@from_table("perf_edge_node")
def perf_edge_node(rows):
    timed = [
        r for r in rows if r["arm64, emulated"].endswith(" s") and "," not in r["arm64, emulated"]
    ]
    fig, ax = canvas(figsize=(8, 3.4))
    places = np.arange(len(timed))
    for offset, key, colour in (
        (-0.12, "arm64, emulated", "tab:red"),
        (0.12, "native", "tab:blue"),
    ):
        for i, row in enumerate(timed):
            low, high = numbers(row[key])[0], numbers(row[key])[-1]
            ax.plot(
                [low, high],
                [i + offset] * 2,
                "-o",
                color=colour,
                lw=3,
                markersize=5,
                label=key if i == 0 else None,
            )
    ax.set_yticks(places, [label(r).split(" (")[0] for r in timed], fontsize=8)
    ax.invert_yaxis()
    ax.set(
        xscale="log",
        xlabel="seconds (log scale; a line spans the table's range over rounds 1–3)",
        title="An arm64 edge node under QEMU",
    )
    ax.grid(axis="x", alpha=0.3, which="both")
    legend_below(ax, 2)
    return fig


# -- accuracy --------------------------------------------------------------------------------------


#: the method comparisons of compare_methods.py and their titles
COMPARISONS = {
    "rebafl_mnist5k": "ReBaFL and the label-skew baselines",
    "astraea_mnist5k": "Astraea and its ablations",
    "grpfed_mnist5k": "GRP-FED and the fairness / personalisation baselines",
    "stateful_mnist5k_alpha0.1": "Stateful baselines under Adam, Dir(0.1)",
    "stateful_mnist5k_alpha0.5": "Stateful baselines under Adam, Dir(0.5)",
}
for _table, _title in COMPARISONS.items():
    from_table(_table)(partial(method_accuracy, title=_title))


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


@from_table("fedconcat_mnist5k")
def fedconcat(rows):
    methods = [k for k in rows[0] if k != "partition"]
    return bar_figure(
        (7, 3.6),
        [label(r) for r in rows],
        {m: (column(rows, m), errors(rows, m)) for m in methods},
        3,
        ylabel="final test accuracy (%), mean ± std",
        ylim=(0, 100),
        xlabel="partition",
        title="FedConcat against FedAvg, communication matched",
    )


def grid_cell(row: str) -> tuple[float, float] | None:
    found = re.fullmatch(r"grpfed q0=(\S+) η_q=(\S+)", row)
    return (float(found[1]), float(found[2])) if found else None


@from_table("grpfed_sensitivity")
def grpfed_sensitivity(rows):
    cells = {grid_cell(label(r)): r for r in rows if grid_cell(label(r))}
    q0s, etas = sorted({q for q, _ in cells}), sorted({e for _, e in cells})
    fedavg = next(r for r in rows if label(r) == "fedavg")
    fig, axes = canvas(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("final T_g (%)", "final T_l (%)")):
        grid = np.array([[number(cells[q, e][key]) for e in etas] for q in q0s])
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
            title=f"GRP-FED {key}; FedAvg {number(fedavg[key]):.1f}",
        )
        fig.colorbar(image, ax=ax, label="%")
    return fig


@from_table("perfedavg_curvature")
def perfedavg_curvature(rows):
    rounds = [int(number(k)) for k in rows[0] if k.startswith("round ")]
    fig, ax = canvas(figsize=(7, 3.8))
    for row, colour in zip(rows, ("tab:blue", "tab:orange")):
        pairs = np.array([numbers(row[f"round {r}"]) for r in rounds])
        name = label(row).split(" (")[0]
        ax.plot(rounds, pairs[:, 0], "o-", color=colour, label=f"{name}: largest over clients")
        ax.plot(rounds, pairs[:, 1], "o--", color=colour, label=f"{name}: median over clients")
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
    alphas = list(dict.fromkeys(r["α"] for r in rows))
    fig, axes = canvas(1, len(alphas), figsize=(5 * len(alphas), 3.8), sharey=True, squeeze=False)
    return fig, list(axes[0]), alphas


@from_table("normalization_mnist5k")
def normalization(rows):
    fig, axes, alphas = alpha_panels(rows)
    key = "difference (points)"
    for ax, alpha in zip(axes, alphas):
        chosen = [r for r in rows if r["α"] == alpha]
        ax.bar(
            range(len(chosen)),
            column(chosen, key),
            yerr=errors(chosen, key),
            capsize=3,
            color="tab:green",
        )
        ax.set_xticks(range(len(chosen)), [r["method"].split(" (")[0] for r in chosen], rotation=30)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(title=f"Dir({alpha})")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("normalised − original,\nfinal accuracy (points, mean ± std)")
    fig.suptitle("Contribution normalisation: change in final accuracy")
    return fig


@from_table("normalization_temperature")
def normalization_temperature(rows):
    fig, axes, alphas = alpha_panels(rows)
    keys = list(rows[0])
    temperatures = [(number(k), f"diff. ({k})") for k in keys if k.startswith("T = ")]
    for ax, alpha in zip(axes, alphas):
        for row in (r for r in rows if r["α"] == alpha):
            ax.errorbar(
                [t for t, _ in temperatures],
                [number(row[d]) for _, d in temperatures],
                yerr=[spread(row[d]) for _, d in temperatures],
                marker="o",
                capsize=2,
                label=row["method"],
            )
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="temperature T", title=f"Dir({alpha})")
        ax.set_xticks([t for t, _ in temperatures], [f"{t:g}" for t, _ in temperatures])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("normalised − original,\nfinal accuracy (points, mean ± std)")
    axes[-1].legend(fontsize=8)
    fig.suptitle("Contribution normalisation: the temperature of eq. 8")
    return fig


@from_table("stability")
def stability(rows):
    settings = list(dict.fromkeys((r["momentum"], r["α"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r["momentum"], r["α"]): r for r in rows}
    grid = np.array(
        [[number(cell[m, *s]["final accuracy (%)"]) for s in settings] for m in methods]
    )
    fig, ax = canvas(figsize=(7, 0.9 + 0.42 * len(methods)))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    for i, method in enumerate(methods):
        for j, setting in enumerate(settings):
            collapsed = cell[method, *setting]["collapsed runs"]
            note = f"\n{collapsed} collapsed" if not collapsed.startswith("0/") else ""
            ax.text(j, i, f"{grid[i, j]:.1f}{note}", ha="center", va="center", fontsize=7)
    ax.set_xticks(
        range(len(settings)), [f"momentum {m}\nDir({a})" for m, a in settings], fontsize=8
    )
    ax.set_yticks(range(len(methods)), methods, fontsize=8)
    ax.set_title("Final test accuracy (%), mean over seeds, under SGD")
    fig.colorbar(image, ax=ax, label="final test accuracy (%)")
    return fig


# -- the leaderboard -------------------------------------------------------------------------------


@from_data("_attackers")
def byzantine_skew(rows, subject: str):
    """Final test accuracy against the number of attackers, one panel per set-up, one line
    per robust rule in the same colour on every panel (dashed: with buckets); rows of
    benchmarks/byzantine_skew.py."""
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    colours = dict(zip(rules, plt_colours(len(rules))))
    fig, axes = canvas(1, len(setups), figsize=(4.6 * len(setups) + 1.8, 4), sharey=True)
    axes = list(np.atleast_1d(axes))
    for ax, setup in zip(axes, setups):
        for rule in rules:
            points = sorted(
                (int(r["attackers"]), float(r["final_accuracy"]))
                for r in rows
                if r["setup"] == setup and r["rule"] == rule and r["final_accuracy"]
            )
            if points:
                style = "--" if "buckets" in rule else "-"
                ax.plot(*zip(*points), style, marker="o", color=colours[rule], label=rule)
        counts = sorted({int(r["attackers"]) for r in rows})
        ax.set(title=setup, xlabel="attackers of 20", xticks=counts, ylim=(0, 1))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("final test accuracy")
    handles = {h.get_label(): h for ax in axes for h in ax.get_lines()}
    axes[-1].legend(
        [handles[r] for r in rules if r in handles],
        [r for r in rules if r in handles],
        fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
    )
    fig.suptitle(subject.removeprefix("byzantine_skew_").replace("_", " "))
    return fig


def plt_colours(count: int) -> list:
    """``count`` distinct colours (matplotlib's tab20 for more than ten)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i) for i in range(count)]


@from_data("leaderboard")
def leaderboard(rows, subject: str):
    """Per set-up, each method's seed-paired difference to the reference (the first row)
    with its 95% t interval, 0 as a line, the differences Holm calls real in colour: the
    paired difference, not the means' intervals, which also hold how much the seeds' draws
    differ from one another."""
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    tallest = max(sum(r["setup"] == s for r in rows) for s in setups)
    fig, axes = canvas(1, len(setups), figsize=(4.2 * len(setups), 1.5 + 0.28 * tallest))
    for ax, setup in zip(np.atleast_1d(axes), setups):
        shown = [r for r in rows if r["setup"] == setup and r["mean"]]
        reference = shown[0]["method"]
        diff = np.array([100 * float(r["difference"] or 0) for r in shown])
        low = np.array([100 * float(r["difference_low"] or r["difference"] or 0) for r in shown])
        high = np.array([100 * float(r["difference_high"] or r["difference"] or 0) for r in shown])
        real = np.array([r["holm_p"] != "" and float(r["holm_p"]) < 0.05 for r in shown])
        places = np.arange(len(shown))
        for chosen, colour in ((~real, "C0"), (real, "C3")):
            ax.errorbar(
                diff[chosen],
                places[chosen],
                xerr=[(diff - low)[chosen], (high - diff)[chosen]],
                fmt="o",
                ms=4,
                capsize=2,
                color=colour,
            )
        ax.axvline(0, color="grey", lw=0.8, ls="--")
        ax.set_yticks(places, [r["method"] for r in shown], fontsize=7)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        ax.set(title=setup, xlabel=f"points against {reference} (paired by seed)")
    return fig


@from_table("leaderboard_cost")
def leaderboard_cost(rows):
    """The leaderboard's estimated hours per set-up, tuning and report runs stacked."""
    hours = next(k for k in rows[0] if k.startswith("hours"))
    shown = [r for r in rows if r["set-up"]]
    setups = list(dict.fromkeys(r["set-up"] for r in shown))
    parts = {
        phase: np.array(
            [
                sum(number(r[hours]) for r in shown if (r["phase"], r["set-up"]) == (phase, s))
                for s in setups
            ]
        )
        for phase in dict.fromkeys(r["phase"] for r in shown)
    }
    _, ax = canvas(figsize=(7, 1.2 + 0.4 * len(setups)))
    stacked_bars(ax, setups, parts)
    return finish(ax, len(parts), xlabel=hours, title="The leaderboard's estimated cost")


# -- Synthetic -------------------------------------------------------------------------------------


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


# -- faults ----------------------------------------------------------------------------------------


def check_grid(rows, what: str, checks: tuple[str, ...], title: str):
    """One row per fault or attack (the ``what`` column, up to its colon), one column per
    runtime and check: green yes, red no, grey where the runtime has no such cell."""
    from matplotlib.colors import ListedColormap

    faults = list(dict.fromkeys(r[what].split(":")[0] for r in rows))
    runtimes = list(dict.fromkeys(r["runtime"] for r in rows))
    cell = {(r[what].split(":")[0], r["runtime"]): r for r in rows}
    codes = {"yes": 0, "n/a": 1, "no": 2}
    shown = {"not measured": "n/a"}  # and "**no**" is "no"

    def code(value: str) -> int:
        value = value.strip("*")
        return codes.get(shown.get(value, value), 2)

    grid = np.array(
        [
            [code(cell[f, rt][c]) if (f, rt) in cell else 1 for rt in runtimes for c in checks]
            for f in faults
        ]
    )
    fig, ax = canvas(figsize=(8, 0.9 + 0.3 * len(faults)))
    ax.imshow(
        grid, cmap=ListedColormap(["#8fd18f", "#d9d9d9", "#f08080"]), vmin=0, vmax=2, aspect="auto"
    )
    words = {v: k for k, v in codes.items()}
    for i in range(len(faults)):
        for j in range(grid.shape[1]):
            if grid[i, j]:  # green is "yes": only the exceptions are written
                ax.text(j, i, words[grid[i, j]], ha="center", va="center", fontsize=8)
    ax.set_xticks(
        range(grid.shape[1]), [c for _ in runtimes for c in checks], fontsize=7, rotation=30
    )
    ax.set_yticks(range(len(faults)), faults, fontsize=8)
    for k, runtime in enumerate(runtimes):
        ax.text(k * len(checks) + 1, -0.9, runtime, ha="center", fontsize=9, weight="bold")
        if k:
            ax.axvline(k * len(checks) - 0.5, color="k", lw=1.5)
    ax.set_title(f"{title} (green: yes)", pad=22)
    return fig


#: the check matrices: table -> (the column naming a row, the checks, title)
CHECK_GRIDS = {
    "fault_matrix": (
        "fault",
        ("survived", "counted", "lost nothing"),
        "The fault matrix: client 1 misbehaves in round 2",
    ),
    "attack_matrix": (
        "attack",
        ("survived", "counted", "unharmed"),
        "The attack matrix: client 1 attacks in every round",
    ),
}
for _table, (_what, _checks, _title) in CHECK_GRIDS.items():
    from_table(_table)(partial(check_grid, what=_what, checks=_checks, title=_title))


# -- drawing ---------------------------------------------------------------------------------------


def data_figure(path: Path) -> tuple[str, Callable] | None:
    """(what the figure shows: the file's name less its suffix, drawer) of a data file,
    or None where no drawer reads it."""
    for suffix, draw in FROM_DATA.items():
        if path.stem.endswith(suffix):
            return path.stem.removesuffix(suffix), draw
    return None


def redraw(name: str, tables: Path = DOCS_TABLES, out: Path = DOCS_FIGURES) -> Path | None:
    """Draw figure ``name`` from its table or data file into ``out``; the path, or None
    where no figure of that name is drawn or its source is missing."""
    if name in FROM_TABLES:
        table, draw = FROM_TABLES[name]
        source = Path(tables) / f"{table}.md"
        return publish_figure(name, draw(read_table(source)), out) if source.exists() else None
    source = Path(tables) / "data" / f"{name}.csv"
    found = data_figure(source) if source.exists() else None
    if found is None:
        return None
    subject, draw = found
    return publish_figure(name, draw(read_data(source), subject), out)


def names(tables: Path = DOCS_TABLES) -> list[str]:
    """Every figure whose table or data file exists under ``tables``."""
    drawn = [
        name for name, (table, _) in FROM_TABLES.items() if (Path(tables) / f"{table}.md").exists()
    ]
    data = sorted(p.stem for p in (Path(tables) / "data").glob("*.csv") if data_figure(p))
    return drawn + data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables", type=Path, default=DOCS_TABLES, help="where the tables and data/ are"
    )
    parser.add_argument("--out", type=Path, default=DOCS_FIGURES, help="where the figures go")
    parser.add_argument(
        "names", nargs="*", help="figures to draw (default: every one whose source exists)"
    )
    args = parser.parse_args(argv)
    known = names(args.tables)
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(
            f"no table or data file draws {', '.join(unknown)} (known: {', '.join(known)})"
        )
    for name in args.names or known:
        redraw(name, args.tables, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
