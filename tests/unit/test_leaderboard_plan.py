"""The leaderboard's plan without running it: which methods it ranks, and its cost estimate
from a calibration (start-up once per process, rounds scaled by FedAvg's set-up ratio)."""

from __future__ import annotations

import dataclasses

from benchmarks.accuracy import leaderboard
from fedimb.app.config_keys import group_choices


def test_every_method_but_the_presets_and_those_without_a_global_model_is_ranked():
    methods = leaderboard.suite_methods()
    assert methods[0] == "fedavg"
    assert sorted(methods) == sorted(set(group_choices("method")) - set(leaderboard.EXCLUDED))
    assert {"grpfed_tuned", "astraea_aug", "astraea_sched", "local", "lg_fedavg"}.isdisjoint(
        methods
    )


def test_the_estimate_multiplies_the_calibration_out_over_the_plan():
    suite = dataclasses.replace(
        leaderboard.smoke_suite(),
        setups={"a": [], "b": []},
        calibration_setup="a",
        trials=3,
        seeds=[0, 1],
        rounds=1000,
    )
    timings = {
        "a/fedavg": {"start": 6.0, "round": 2.0},
        "a/fedprox": {"start": 6.0, "round": 4.0},
        "b/fedavg": {"start": 6.0, "round": 1.0},
    }
    # set-up b runs at half a's rounds: fedprox there is 6 + 1000 * 4 * 0.5 = 2006 s a run
    assert leaderboard.run_seconds(suite, timings, "b", "fedprox") == 2006.0
    # a tuning starts once: 6 + 3 trials * 1000 rounds * 2 s
    assert leaderboard.step_seconds(suite, timings, "a", "fedavg", "tuning") == 6006.0
    lines = leaderboard.estimate_lines(suite, timings, jobs=2)
    # tuning a: (6006 + 12006) / 2 jobs = 9006 s; b: (3006 + 6006) / 2 = 4506 s; report
    # runs a: 2 seeds * (2006 + 4006) / 2 = 6012 s; b: 2 * (1006 + 2006) / 2 = 3012 s
    assert lines == [
        "| phase | set-up | runs | hours (2 at a time) |",
        "|---|---|---|---|",
        "| tuning | a | 6 | 2.50 |",
        "| tuning | b | 6 | 1.25 |",
        "| report runs | a | 4 | 1.67 |",
        "| report runs | b | 4 | 0.84 |",
        "| **total** | | | **6.26** |",
    ]
