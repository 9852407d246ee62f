"""The figures of docs/benchmarks/leaderboard.md: the leaderboard and its cost."""

from __future__ import annotations

import numpy as np

from benchmarks.figures.drawing import canvas, finish, stacked_bars
from benchmarks.figures.registry import drawn_from, from_data


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


@drawn_from("leaderboard_cost")
def leaderboard_cost(rows):
    """The leaderboard's estimated hours per set-up, tuning and report runs stacked. Rows of
    benchmarks/accuracy/leaderboard.py (``--estimate-only``)."""
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    parts = {
        phase: np.array(
            [
                sum(float(r["hours"]) for r in rows if (r["phase"], r["setup"]) == (phase, s))
                for s in setups
            ]
        )
        for phase in dict.fromkeys(r["phase"] for r in rows)
    }
    _, ax = canvas(figsize=(7, 1.2 + 0.4 * len(setups)))
    stacked_bars(ax, setups, parts)
    hours = f"hours ({rows[0]['jobs']} at a time)"
    return finish(ax, len(parts), xlabel=hours, title="The leaderboard's estimated cost")
