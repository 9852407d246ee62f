"""The figures of ``fedimb compare``, one panel per set-up: each method's mean with its 95% t
interval (the reference's mean as a vertical line), and the accuracy per round, mean over
seeds with a 95% t band, on the test split and, dashed, the validation split where runs
scored it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fedimb.cli.results.compare_stats import CONFIDENCE, SetupComparison, t_interval
from fedimb.cli.results.compare_tables import in_percent
from fedimb.cli.results.report_tables import metric_curve
from fedimb.cli.results.run_records import RunRecord


def _panels(count: int, width: float, height: float):
    """A figure with ``count`` panels, at most three per row, and its axes in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def _colour(index: int) -> str:
    """The colour of a set-up's ``index``-th method, the same in both figures."""
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return colours[index % len(colours)]


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def interval_plot(comparisons: list[SetupComparison], path: Path) -> None:
    """Per set-up, each method's mean with its t interval as a horizontal error bar."""
    fig, axes = _panels(
        len(comparisons), 5.5, 0.5 + 0.45 * max(len(c.methods) for c in comparisons)
    )
    for ax, comparison in zip(axes, comparisons):
        scale = 100.0 if in_percent(comparison.metric) else 1.0
        rows = [m for m in comparison.methods if m.interval is not None][::-1]
        for y, row in enumerate(rows):
            interval = row.interval
            assert interval is not None
            mean = interval.mean * scale
            colour = _colour(comparison.methods.index(row))
            if interval.low is not None and interval.high is not None:
                error = [[mean - interval.low * scale], [interval.high * scale - mean]]
                ax.errorbar(mean, y, xerr=error, fmt="o", capsize=4, color=colour)
            else:
                ax.plot(mean, y, "o", mfc="none", color=colour)  # one run: no interval
        reference = next((m for m in rows if m.label == comparison.reference), None)
        if reference is not None and reference.interval is not None:
            ax.axvline(reference.interval.mean * scale, color="grey", ls="--", lw=1)
        ax.set_yticks(range(len(rows)), [m.label for m in rows], fontsize=8)
        unit = " (%)" if scale == 100.0 else ""
        ax.set(xlabel=f"{comparison.metric}{unit}, {CONFIDENCE:.0%} t interval")
        ax.set_title(comparison.name, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    _save(fig, path)


def mean_curve(runs: list[RunRecord], split: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The rounds every run scored ``split``'s accuracy in, the mean over runs and the half
    width of its t interval (0 from a single run)."""
    curves = [metric_curve(run, "accuracy", split) for run in runs]
    curves = [c for c in curves if c]
    if not curves:
        return [], np.array([]), np.array([])
    rounds = sorted(set.intersection(*(set(c) for c in curves)))
    means, halves = [], []
    for r in rounds:
        interval = t_interval([c[r] for c in curves])
        means.append(interval.mean)
        halves.append(0.0 if interval.high is None else interval.high - interval.mean)
    return rounds, np.array(means), np.array(halves)


def curves_plot(comparisons: list[SetupComparison], path: Path) -> None:
    """Per set-up, each method's test (and validation) accuracy per round with a t band."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = _panels(len(comparisons), 6.0, 4.0)
    for ax, comparison in zip(axes, comparisons):
        for i, row in enumerate(comparison.methods):
            colour = _colour(i)
            for split, style in (("test", "-"), ("validation", "--")):
                rounds, mean, half = mean_curve(row.runs, split)
                if not rounds:
                    continue
                ax.plot(rounds, 100 * mean, style, color=colour, label=f"{row.label} ({split})")
                ax.fill_between(
                    rounds, 100 * (mean - half), 100 * (mean + half), color=colour, alpha=0.15
                )
        ax.set(xlabel="round", ylabel="accuracy (%)", ylim=(0, 100))
        ax.set_title(f"{comparison.name}: mean, {CONFIDENCE:.0%} t band", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(fig, path)
