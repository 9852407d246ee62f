"""A trial of ``fedimb tune`` scored on every tuning seed (:func:`run_seeds`): the seeds'
mean validation objective, or diverged where any seed fails, ends at chance or falls from
its best (:mod:`fedimb.cli.tune.divergence`), without running the seeds after it."""

from __future__ import annotations

import json
import math

import pytest

from fedimb.app.configuration.compose import compose
from fedimb.cli.tune.divergence import Divergence
from fedimb.cli.tune.trial import FAILED_OBJECTIVE, run_seeds

RULES = Divergence(chance_margin=0.02, drop=0.2)


def summary(objective, best=None, chance=0.1, completed=True, rounds=20, final=None):
    return {
        "completed": completed,
        "validation_objective": objective,
        "validation_best_accuracy": objective if best is None else best,
        "final_validation_accuracy": objective if final is None else final,
        "validation_chance": chance,
        "rounds": rounds,
    }


def config(*seeds):
    return compose(["dataset=digits", f"tune.seeds=[{','.join(map(str, seeds))}]"])


def fake_runs(by_seed):
    """A run that writes the summary of its seed, and the seeds it ran."""
    ran = []

    def run(cfg, folder):
        ran.append(int(cfg.seed))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text(json.dumps(by_seed[int(cfg.seed)]))

    return run, ran


def test_a_trial_on_two_seeds_scores_their_mean_each_in_its_folder(tmp_path):
    run, ran = fake_runs({100: summary(0.8), 101: summary(0.7, best=0.72)})
    record = run_seeds(config(100, 101), tmp_path, run)
    assert ran == [100, 101]
    assert record["objective"] == pytest.approx(0.75) and record["failed"] is None
    assert [r["seed"] for r in record["seeds"]] == [100, 101]
    assert (
        json.loads((tmp_path / "s101" / "summary.json").read_text())["validation_objective"] == 0.7
    )


def test_one_seed_at_chance_diverges_the_trial(tmp_path):
    run, ran = fake_runs({100: summary(0.9), 101: summary(0.115, chance=0.1)})
    record = run_seeds(config(100, 101), tmp_path, run)
    assert record["objective"] == FAILED_OBJECTIVE == 0.0
    assert record["failed"] == "seed 101: at chance: 0.1150 <= majority class 0.1000 + 0.02"


def test_a_seed_that_falls_from_its_best_stops_the_trial_before_the_next_seed(tmp_path):
    run, ran = fake_runs({100: summary(0.5, best=0.9), 101: summary(0.9)})
    record = run_seeds(config(100, 101), tmp_path, run)
    assert ran == [100]
    assert record["objective"] == 0.0
    assert record["failed"] == "seed 100: fell from its best: 0.5000 < (1 - 0.2) x 0.9000"


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (summary(math.nan), "no finite validation objective (nan)"),
        (summary(0.8, completed=False), "the run did not complete"),
    ],
)
def test_a_failed_or_nan_seed_diverges_the_trial(tmp_path, result, why):
    run, _ = fake_runs({100: result})
    record = run_seeds(config(100), tmp_path, run)
    assert record["objective"] == 0.0 and record["failed"] == why
    assert (tmp_path / "summary.json").is_file()  # one seed: the trial's own folder


#: rules whose edges are exact in binary floating point
EDGES = Divergence(chance_margin=0.25, drop=0.25)


@pytest.mark.parametrize(
    ("objective", "best", "chance", "diverged"),
    [
        (0.5, 0.5, 0.25, True),  # exactly at the margin: chance
        (0.5001, 0.5001, 0.25, False),
        (0.5625, 0.75, None, False),  # 0.5625 = (1 - 0.25) x 0.75: not below
        (0.5624, 0.75, None, True),
        (0.6, 0.6, 0.4, True),  # a majority class of 40%: a model predicting it
    ],
)
def test_the_divergence_rules_at_their_edges(objective, best, chance, diverged):
    reason = EDGES.reason(summary(objective, best=best, chance=chance), window=3)
    assert (reason is not None) == diverged, reason


def test_a_run_shorter_than_the_objectives_window_is_not_compared_with_its_best():
    # two rounds, a window of three: the objective averages in the initial model
    short = summary(0.25, best=0.45, chance=0.1, rounds=2)
    assert RULES.reason(short, window=3) is None
    assert RULES.reason({**short, "rounds": 3}, window=3).startswith("fell from its best")


def test_a_run_still_climbing_has_not_fallen_from_its_best():
    # the last three rounds 0.40, 0.55, 0.75: the mean is below 0.8 x the best, the last is it
    climbing = summary(0.5667, best=0.75, final=0.75)
    assert RULES.reason(climbing, window=3) is None
    assert RULES.reason({**climbing, "final_validation_accuracy": 0.5}, window=3) is not None


def test_the_personal_objective_is_judged_on_the_personal_validation_shares():
    personal = {
        "rounds": 20,
        "validation_chance": 0.5,  # the server's share: not the clients'
        "personal_validation_objective": 0.4,
        "personal_validation_best_accuracy": 0.9,
        "personal_validation_final_accuracy": 0.35,
    }
    reason = RULES.reason(personal, window=3, key="personal_validation_objective")
    assert reason == "fell from its best: 0.4000 < (1 - 0.2) x 0.9000"
    steady = {**personal, "personal_validation_best_accuracy": 0.45}
    assert RULES.reason(steady, window=3, key="personal_validation_objective") is None
