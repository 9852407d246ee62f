"""What a leaderboard table can and cannot tell, written beside it: the report runs that
ended at chance (in this plan and in the record of the plan before it, whose tuning read
one seed), and per set-up the smallest difference the paired test detects.

A run ended at chance where its final test accuracy is within :data:`CHANCE_MARGIN` of the
test set's majority-class share (what a model that predicts one class scores), the margin
of ``tune.divergence.chance_margin``. The smallest detectable difference is
:func:`fedimb.cli.results.compare_stats.detectable_difference` with the set-up's number
of paired seeds, its number of tests (Holm's first threshold is 0.05 over it), 80% power
and the median over methods of the standard deviation of their paired differences with
the reference: a "not distinguishable" reads as "smaller than this, or not there"."""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import common

#: a report run within this of the majority-class share ended at chance
CHANCE_MARGIN = 0.02
#: the record of the plan before this one (five report seeds, tuning on one seed)
BEFORE = common.REPO / "benchmarks" / "results" / "leaderboard_one_tuning_seed"
POWER = 0.8


@functools.cache
def test_chance(overrides: tuple[str, ...]) -> float:
    """The test set's majority-class share under a set-up's ``overrides`` (with its seed:
    a generated data set's test set is drawn from it)."""
    from fedimb.app.configuration.build import plain
    from fedimb.app.configuration.compose import compose
    from fedimb.core.data.datasets import load_dataset

    labels = np.asarray(load_dataset(plain(compose(list(overrides)).dataset)).y_test)
    return float(np.bincount(labels).max() / len(labels))


def at_chance(final_accuracy: float | None, chance: float) -> bool:
    return final_accuracy is not None and final_accuracy <= chance + CHANCE_MARGIN


def runs_at_chance(
    summaries: list[dict], chance: Callable[[int], float]
) -> list[tuple[str, int, float]]:
    """(method, seed, final accuracy) of the runs that ended at chance, ``chance(seed)``
    the majority-class share of a seed's test set."""
    return sorted(
        (str(s["method"]), int(s["seed"]), float(s["final_accuracy"]))
        for s in summaries
        if at_chance(s.get("final_accuracy"), chance(int(s["seed"])))
    )


def recorded_summaries(record: Path, setup: str) -> list[dict]:
    """The report runs' summaries a leaderboard record holds for ``setup``."""
    path = record / f"{setup}.jsonl"
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(r["files"]["summary.json"]) for r in lines if r.get("step") == "run"]


def comparison_summaries(comparison) -> list[dict]:
    """The summaries of every run a :class:`SetupComparison` compares."""
    return [run.summary for row in comparison.methods for run in row.runs]


def chance_lines(rows: list[dict]) -> list[str]:
    """The table of runs at chance per set-up, before and after, each run named."""
    lines = [
        "| set-up | majority class (seed 0) | before: runs at chance | after: runs at chance |",
        "|---|---|---|---|",
    ]
    for row in rows:
        before = "—" if row["before"] is None else named(row["before"], row["before_runs"])
        after = "running" if row["after"] is None else named(row["after"], row["after_runs"])
        lines.append(f"| {row['setup']} | {row['chance']:.3f} | {before} | {after} |")
    return lines


def named(runs: list[tuple[str, int, float]], total: int) -> str:
    listed = ", ".join(f"{m} s{s} ({100 * a:.1f}%)" for m, s, a in runs)
    return f"{len(runs)} of {total}" + (f": {listed}" if listed else "")


def paired_sd(row, reference) -> float | None:
    """The standard deviation (ddof 1) of a row's differences with the reference, paired
    by seed; None below two pairs."""
    keys = set(row.values) & set(reference.values)
    if len(keys) < 2:
        return None
    return float(np.std([row.values[k] - reference.values[k] for k in keys], ddof=1))


def detectable(comparison) -> dict | None:
    """A set-up's smallest detectable difference and what it rests on, or None where no
    method was paired with the reference on two seeds."""
    from fedimb.cli.results.compare_stats import detectable_difference

    reference = next((m for m in comparison.methods if m.label == comparison.reference), None)
    if reference is None:
        return None
    others = [m for m in comparison.methods if m is not reference]
    spreads = [sd for sd in (paired_sd(m, reference) for m in others) if sd is not None]
    if not spreads:
        return None
    pairs = len(reference.values)
    sd = statistics.median(spreads)
    return {
        "pairs": pairs,
        "tests": len(others),
        "median_sd": sd,
        "difference": detectable_difference(pairs, len(others), sd, POWER),
    }


def detectable_lines(found: dict[str, dict | None]) -> list[str]:
    lines = [
        "| set-up | paired seeds | tests | median sd of a paired difference | "
        "smallest detectable difference |",
        "|---|---|---|---|---|",
    ]
    for setup, row in found.items():
        if row is not None:
            lines.append(
                f"| {setup} | {row['pairs']} | {row['tests']} | {100 * row['median_sd']:.2f} "
                f"points | **{100 * row['difference']:.2f} points** |"
            )
    return lines
