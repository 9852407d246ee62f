"""What the leaderboard says beside its table (:mod:`leaderboard_limits`): the runs that
ended at chance, counted against the test set's majority class, from run summaries and
from the record of the plan before, and the smallest detectable difference per set-up."""

from __future__ import annotations

import pytest

from benchmarks.accuracy import leaderboard_limits as limits
from fedimb.cli.results.compare_stats import detectable_difference


def test_a_run_within_the_margin_of_the_majority_class_ended_at_chance():
    summaries = [
        {"method": "moon", "seed": 1, "final_accuracy": 0.12},  # 0.10 + 0.02: at chance
        {"method": "moon", "seed": 0, "final_accuracy": 0.1201},
        {"method": "fedavg", "seed": 0, "final_accuracy": 0.9},
        {"method": "feddyn", "seed": 3, "final_accuracy": None},  # no test score: not counted
    ]
    assert limits.runs_at_chance(summaries, lambda seed: 0.1) == [("moon", 1, 0.12)]
    assert limits.runs_at_chance(summaries, lambda seed: 0.0 if seed else 0.1) == []
    assert limits.named([("moon", 1, 0.12)], 4) == "1 of 4: moon s1 (12.0%)"


def test_the_record_before_counts_the_dir01_runs_that_ended_at_chance():
    summaries = limits.recorded_summaries(limits.BEFORE, "dir01")
    assert len(summaries) == 27 * 5
    found = limits.runs_at_chance(summaries, lambda seed: 0.1)  # mnist5k: 100 a class
    assert [(m, s) for m, s, _ in found] == [
        ("creff", 2),
        ("fedconcat", 1),
        ("feddecorr", 0),
        ("feddyn", 0),
        ("feddyn", 1),
        ("moon", 0),
        ("moon", 1),
        ("moon", 2),
    ]


def test_the_majority_class_of_a_test_set_drawn_from_the_seed():
    assert limits.test_chance(("dataset=mnist5k",)) == 0.1
    synthetic = ("dataset=synthetic", "dataset.alpha=1", "dataset.beta=1", "partition=natural")
    shares = {limits.test_chance((*synthetic, f"seed={seed}")) for seed in range(3)}
    assert len(shares) == 3 and all(0.1 < share < 1 for share in shares)


class Row:
    def __init__(self, label, values):
        self.label, self.values = label, values


class Comparison:
    def __init__(self, reference, methods):
        self.reference, self.methods = reference, methods


def test_the_detectable_difference_rests_on_the_median_paired_spread():
    reference = Row("fedavg", {0: 0.5, 1: 0.5, 2: 0.5})
    rows = [
        Row("a", {0: 0.5, 1: 0.6, 2: 0.7}),  # differences 0, 0.1, 0.2: sd 0.1
        Row("b", {0: 0.5, 1: 0.5, 2: 0.5}),  # sd 0
        Row("c", {0: 0.1, 1: 0.5, 2: 0.9}),  # sd 0.4
        Row("d", {0: 0.5}),  # one pair: no spread
    ]
    found = limits.detectable(Comparison("fedavg", [reference, *rows]))
    assert found["pairs"] == 3 and found["tests"] == 4
    assert found["median_sd"] == pytest.approx(0.1)
    assert found["difference"] == pytest.approx(detectable_difference(3, 4, 0.1))
