"""The leaderboard's plan without running it: which methods it ranks, its cost estimate from
a calibration (start-up once per process, rounds scaled by FedAvg's set-up ratio), the
order of its set-ups (cheapest first), and its cells checked before anything runs: every
(set-up, method) composes, and a cell that does not stops the script at once, named."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.accuracy import leaderboard, leaderboard_suites
from fedimb.app.configuration.keys import group_choices


def test_every_method_but_the_presets_and_those_without_a_global_model_is_ranked():
    methods = leaderboard_suites.suite_methods()
    assert methods[0] == "fedavg"
    excluded = set(leaderboard_suites.EXCLUDED)
    assert sorted(methods) == sorted(set(group_choices("method")) - excluded)
    assert {"grpfed_tuned", "astraea_aug", "astraea_sched", "local", "lg_fedavg"}.isdisjoint(
        methods
    )


def test_the_estimate_multiplies_the_calibration_out_over_the_plan():
    suite = dataclasses.replace(
        leaderboard_suites.smoke_suite(),
        setups={"a": [], "b": []},
        calibration_setup="a",
        trials=3,
        seeds=[0, 1],
        tuning_seeds=[100, 101],
        rounds=1000,
    )
    timings = {
        "a/fedavg": {"start": 6.0, "round": 2.0},
        "a/fedprox": {"start": 6.0, "round": 4.0},
        "b/fedavg": {"start": 6.0, "round": 1.0},
    }
    # set-up b runs at half a's rounds: fedprox there is 6 + 1000 * 4 * 0.5 = 2006 s a run
    assert leaderboard.run_seconds(suite, timings, "b", "fedprox") == 2006.0
    # a tuning starts once: 6 + 3 trials * 2 tuning seeds * 1000 rounds * 2 s
    assert leaderboard.step_seconds(suite, timings, "a", "fedavg", "tuning") == 12006.0
    rows = leaderboard.estimate_rows(suite, timings, jobs=2)
    # the figure's data: the hours unrounded
    assert rows[0] == {
        "phase": "tuning",
        "setup": "a",
        "runs": 12,
        "hours": 18006 / 3600,
        "jobs": 2,
    }
    lines = leaderboard.estimate_lines(rows)
    # tuning a: (12006 + 24006) / 2 jobs = 18006 s; b: (6006 + 12006) / 2 = 9006 s; report
    # runs a: 2 seeds * (2006 + 4006) / 2 = 6012 s; b: 2 * (1006 + 2006) / 2 = 3012 s
    assert lines == [
        "| phase | set-up | runs | hours (2 at a time) |",
        "|---|---|---|---|",
        "| tuning | a | 12 | 5.00 |",
        "| tuning | b | 12 | 2.50 |",
        "| report runs | a | 4 | 1.67 |",
        "| report runs | b | 4 | 0.84 |",
        "| **total** | | | **10.01** |",
    ]
    # b's runs cost half of a's: b runs first
    assert leaderboard.cheapest_first(suite, timings) == ["b", "a"]
    # a longer horizon for b: its rounds, and so its runs, three times as many
    longer = dataclasses.replace(suite, horizons={"b": 3000})
    assert leaderboard.run_seconds(longer, timings, "b", "fedprox") == 6 + 3000 * 4 * 0.5
    assert "num_rounds=3000" in leaderboard.setup_settings(longer, "b")


def test_every_cell_of_the_full_suite_composes():
    leaderboard.check_cells(leaderboard_suites.full_suite())


def test_a_cell_that_does_not_compose_is_named_before_anything_runs():
    suite = leaderboard_suites.full_suite()
    # Synthetic without the linear encoder that FedBABU, FedConcat and others train apart
    without_encoder = [o for o in suite.setups["synthetic"] if not o.startswith("model")]
    bad = dataclasses.replace(
        suite, setups={"synthetic": without_encoder}, methods=["fedavg", "fedbabu"]
    )
    with pytest.raises(SystemExit) as info:
        leaderboard.check_cells(bad)
    message = str(info.value)
    assert message.startswith("1 cells of the plan are not valid:")
    assert "synthetic fedbabu: " in message and "synthetic fedavg" not in message


def test_a_method_that_refuses_a_set_up_is_excluded_there_and_only_there():
    suite = leaderboard_suites.full_suite()
    on_text = suite.setup_methods("shakespeare")
    assert "fedconcat_id" not in on_text and "fedconcat_id" in suite.setup_methods("dir01")
    assert len(on_text) == len(suite.methods) - 2
    # without the exclusion, the cell is named before anything runs
    with pytest.raises(SystemExit, match="shakespeare fedconcat_id: "):
        leaderboard.check_cells(dataclasses.replace(suite, excluded={}))
    # a method's own overrides on a set-up: FedConcat's classifier stage fits 10 rounds
    stage = "method.strategy.classifier_rounds=5"
    assert stage in leaderboard.setup_settings(suite, "shakespeare", "fedconcat")
    assert stage not in leaderboard.setup_settings(suite, "shakespeare", "fedavg")
    assert stage not in leaderboard.setup_settings(suite, "dir01", "fedconcat")
    refused = leaderboard_suites.SHAKESPEARE_EXCLUDED
    lines = leaderboard.excluded_lines(suite)
    assert lines[:2] == [
        f"Not run on shakespeare: fedconcat_id ({refused['fedconcat_id']}).",
        f"Not run on shakespeare: fedloge ({refused['fedloge']}).",
    ]
    # the long horizon: one line naming every method left out, for the one reason
    assert len(lines) == 3 and lines[2].startswith("Not run on dir01_long: afl, astraea, ")
    assert lines[2].endswith(f" ({leaderboard_suites.LONG_HORIZON_LEFT_OUT}).")
    # the personalised suite names no exclusion of set-ups it does not run
    assert leaderboard.excluded_lines(leaderboard_suites.personal_suite()) == []


def test_the_long_horizon_runs_the_reference_and_the_drift_corrections_only():
    suite = leaderboard_suites.full_suite()
    assert suite.setup_methods("dir01_long") == [
        "fedavg", "fedavgm", "feddyn", "fednova", "fedprox", "moon", "scaffold"
    ]  # fmt: skip
    assert suite.setup_methods("dir01") == suite.methods


def test_an_excluded_cell_costs_nothing_and_is_not_waited_for(tmp_path):
    suite = dataclasses.replace(
        leaderboard_suites.smoke_suite(),
        setups={"a": [], "b": []},
        calibration_setup="a",
        excluded={"b": {"fedprox": "refuses b"}},
    )
    timings = {
        "a/fedavg": {"start": 0.0, "round": 1.0},
        "a/fedprox": {"start": 0.0, "round": 3.0},
        "b/fedavg": {"start": 0.0, "round": 1.0},
    }
    runs = {row["setup"]: row["runs"] for row in leaderboard.estimate_rows(suite, timings, 1)}
    assert runs == {"a": 4, "b": 2}  # 2 trials x 1 tuning seed per method; b: FedAvg only
    assert leaderboard.planned_runs(suite, "a") == 4 and leaderboard.planned_runs(suite, "b") == 2


def test_every_cell_of_the_personal_suite_composes():
    suite = leaderboard_suites.personal_suite()
    assert suite.methods[0] == suite.reference == "fedavg_ft" and "local" in suite.methods
    leaderboard.check_cells(suite)


def test_every_method_with_a_personal_model_is_in_the_personal_table():
    from clients.base_personal import PersonalEvaluation
    from fedimb.app.configuration.components import import_class
    from fedimb.app.configuration.compose import compose

    personal = set()
    for method in group_choices("method"):
        conf = compose([f"method={method}"]).method
        client = import_class(str(conf.client._target_))
        strategy = import_class(str(conf.strategy._target_))
        own_model = getattr(client, "personal_model", None) not in (
            None,
            PersonalEvaluation.personal_model,
        )
        if own_model or getattr(strategy, "ensemble_global_test", False):
            personal.add(method)
    presets = {"grpfed_tuned"}
    assert personal - presets <= set(leaderboard_suites.PERSONAL_METHODS)
    assert {"fedavg_ft", "local", "lg_fedavg", "fedrod", "pfedme"} <= personal
