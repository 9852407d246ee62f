"""The figures of docs/asynchronous.md: test accuracy, and the rare classes' recall,
against simulated time."""

from __future__ import annotations

import warnings

import numpy as np

from benchmarks.figures.drawing import canvas
from benchmarks.figures.reading import floats
from benchmarks.figures.registry import drawn_from


@drawn_from("asynchronous", "asynchronous_classes")
def asynchronous(rows):
    """One panel per set-up, one line per mode: the mean over seeds of the last test's
    accuracy (or the rare classes' recall, where the rows hold it) at each simulated second
    (each seed's curve held between its tests), up to the time the slowest seed of the mode
    ended. Rows of benchmarks/accuracy/asynchronous.py."""
    score = "rare_recall" if "rare_recall" in rows[0] else "accuracy"
    label = "recall of the 3 rarest classes" if score == "rare_recall" else "test accuracy"
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    fig, axes = canvas(ncols=len(setups), figsize=(5.5 * len(setups), 4), squeeze=False)
    for ax, setup in zip(axes[0], setups):
        mine = [r for r in rows if r["setup"] == setup]
        end = max(floats(mine, "time"))
        grid = np.linspace(0, end, 200)
        for mode in dict.fromkeys(r["mode"] for r in mine):
            seeds = dict.fromkeys(r["seed"] for r in mine if r["mode"] == mode)
            curves = []
            for seed in seeds:
                run = [r for r in mine if r["mode"] == mode and r["seed"] == seed]
                times, accuracy = np.array(floats(run, "time")), np.array(floats(run, score))
                index = np.searchsorted(times, grid, side="right") - 1
                curve = np.where(index >= 0, accuracy[np.clip(index, 0, None)], np.nan)
                curve[grid > times[-1]] = np.nan
                curves.append(curve)
            with warnings.catch_warnings():  # past every seed's end: no value, no line
                warnings.simplefilter("ignore", RuntimeWarning)
                ax.plot(grid, np.nanmean(np.array(curves), axis=0), label=mode)
        ax.set(xlabel="simulated seconds", ylabel=f"{label} (mean over seeds)", title=setup)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


@drawn_from("asynchronous_deployed")
def asynchronous_deployed(rows):
    """One line per run (repeat and mode): a marker where each step was applied and a bar
    to the run's end, against the server's seconds. Rows of
    benchmarks/perf/asynchronous_deployed.py (a run's last row is its end)."""
    runs = list(dict.fromkeys((int(r["repeat"]), r["mode"]) for r in rows))
    fig, ax = canvas(figsize=(7, 0.6 * len(runs) + 1.4))
    colours = {"sync": "tab:blue", "fedbuff": "tab:orange"}
    for y, (repeat, mode) in enumerate(runs):
        run = [r for r in rows if (int(r["repeat"]), r["mode"]) == (repeat, mode)]
        seconds = floats(run, "seconds")
        ax.plot([0, seconds[-1]], [y, y], color=colours.get(mode, "k"), lw=6, alpha=0.25)
        ax.plot(seconds[:-1], [y] * (len(seconds) - 1), "o", color=colours.get(mode, "k"))
    ax.set(
        yticks=range(len(runs)),
        yticklabels=[f"{mode}, repeat {repeat}" for repeat, mode in runs],
        xlabel="seconds since the server started (dots: a round or step applied)",
        title="Deployed, one node slow: synchronous rounds and FedBuff steps",
    )
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    return fig
