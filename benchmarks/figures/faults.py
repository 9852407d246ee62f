"""The figures of docs/faults.md: the fault and attack matrices and the Byzantine study."""

from __future__ import annotations

from functools import partial

import numpy as np

from benchmarks.figures.drawing import canvas, plt_colours
from benchmarks.figures.registry import drawn_from, from_data


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


def check_grid(rows, what: str, checks: tuple[str, ...], title: str):
    """One row per fault or attack (the ``what`` column), one column per runtime and check:
    green yes (True), red no (False), grey where a cell was not measured or the runtime has
    no such cell (empty). Rows of benchmarks/faults.py and benchmarks/attacks.py."""
    from matplotlib.colors import ListedColormap

    faults = list(dict.fromkeys(r[what] for r in rows))
    runtimes = list(dict.fromkeys(r["runtime"] for r in rows))
    cell = {(r[what], r["runtime"]): r for r in rows}
    codes = {"True": 0, "": 1, "False": 2}
    grid = np.array(
        [
            [codes[cell[f, rt][c]] if (f, rt) in cell else 1 for rt in runtimes for c in checks]
            for f in faults
        ]
    )
    fig, ax = canvas(figsize=(8, 0.9 + 0.3 * len(faults)))
    ax.imshow(
        grid, cmap=ListedColormap(["#8fd18f", "#d9d9d9", "#f08080"]), vmin=0, vmax=2, aspect="auto"
    )
    words = {1: "n/a", 2: "no"}
    for i in range(len(faults)):
        for j in range(grid.shape[1]):
            if grid[i, j]:  # green is "yes": only the exceptions are written
                ax.text(j, i, words[grid[i, j]], ha="center", va="center", fontsize=8)
    ax.set_xticks(
        range(grid.shape[1]),
        [c.replace("_", " ") for _ in runtimes for c in checks],
        fontsize=7,
        rotation=30,
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
        ("survived", "counted", "lost_nothing"),
        "The fault matrix: client 1 misbehaves in round 2",
    ),
    "attack_matrix": (
        "attack",
        ("survived", "counted", "unharmed"),
        "The attack matrix: client 1 attacks in every round",
    ),
}


for _table, (_what, _checks, _title) in CHECK_GRIDS.items():
    drawn_from(_table)(partial(check_grid, what=_what, checks=_checks, title=_title))
