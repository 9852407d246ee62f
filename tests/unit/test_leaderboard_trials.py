"""The replay of a tuning's trials from its recorded values (the TPE sampler's seed is
fixed, so the values decide the parameters), and the learning-rate table built on it."""

from __future__ import annotations

import math

import optuna
import pytest

from benchmarks.accuracy import leaderboard_trials

OVERRIDES = ["dataset=digits", "partition=dirichlet", "num_clients=3"]


def recorded_tuning(values_of, trials: int = 6) -> tuple[dict, list[float]]:
    """A tuning as the sweeper runs it (TPE, seed 0, 2 random trials) over fedavg's one
    knob, scored by ``values_of``: its record and the rates its trials got."""
    sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=2)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    rates, values = [], []
    for _ in range(trials):
        trial = study.ask()
        rate = trial.suggest_float("train.lr", 0.001, 0.3, log=True)
        rates.append(rate)
        values.append(values_of(rate))
        study.tell(trial, values[-1])
    record = {
        "setup": "digits",
        "method": "fedavg",
        "overrides": OVERRIDES,
        "values": values,
        "best_params": study.best_params,
    }
    return record, rates


def peak_at_a_tenth(rate: float) -> float:
    return 1.0 - (math.log10(rate) + 1.0) ** 2 / 10


def test_the_replay_gives_every_trial_the_rate_it_was_run_with():
    record, rates = recorded_tuning(peak_at_a_tenth)
    replayed = leaderboard_trials.replay(record, sampler_seed=0, random_trials=2)
    assert [t["params"]["train.lr"] for t in replayed] == rates
    assert [t["value"] for t in replayed] == record["values"]


def test_a_replay_that_does_not_find_the_recorded_best_stops():
    record, _ = recorded_tuning(peak_at_a_tenth)
    with pytest.raises(SystemExit, match="the sampler or the search space changed"):
        leaderboard_trials.replay(record, sampler_seed=1, random_trials=2)


def test_the_rate_table_counts_each_bin():
    trials = leaderboard_trials.with_best(
        [
            {"params": {"train.lr": 0.002}, "value": 0.10},  # at chance (0.1 + 0.02)
            {"params": {"train.lr": 0.0025}, "value": 0.50},
            {"params": {"train.lr": 0.2}, "value": 0.95},  # the best
            {"params": {"train.lr": 0.25}, "value": None},  # failed: scores 0, at chance
        ]
    )
    rows = {row["rates"]: row for row in leaderboard_trials.rate_rows(trials, chance=0.1)}
    assert rows["[0.001, 0.003)"] == {
        "rates": "[0.001, 0.003)",
        "trials": 2,
        "at_chance": 1,
        "median": 0.30,
        "best": 0.50,
        "chosen": 0,
    }
    assert rows["[0.1, 0.3)"]["trials"] == 2 and rows["[0.1, 0.3)"]["chosen"] == 1
    assert rows["[0.1, 0.3)"]["at_chance"] == 1 and rows["[0.01, 0.03)"]["trials"] == 0
