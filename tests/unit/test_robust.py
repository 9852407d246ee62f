"""Robust aggregation (``aggregation=``): Flower's rules on hand-checkable models, clipping,
the bit-identical default, the configuration checks and the strategies' use of it."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from fedimb.app import config
from fedimb.core.aggregate import weighted_average
from fedimb.core.errors import ConfigError
from fedimb.core.robust import RobustSettings, clip_update, combine
from tests.strategy_rounds import fit_result, started_round


def model(*values, counter=0):
    """A two-array model: float32 weights and an int64 counter (like BatchNorm's)."""
    return [np.array(values, dtype=np.float32), np.array(counter, dtype=np.int64)]


def rule(name, **settings):
    return RobustSettings(name=name, **settings)


def test_median_is_coordinate_wise_and_keeps_integer_dtypes():
    updates = [model(1, 2, 3, counter=1), model(4, 5, 6, counter=2), model(100, -1, 0, counter=4)]
    new, reason = combine(updates, [1, 1, 1], None, rule("median"))
    assert reason is None
    np.testing.assert_array_equal(new[0], [4, 2, 3])
    assert new[0].dtype == np.float32 and new[1].dtype == np.int64 and int(new[1]) == 2


def test_trimmed_mean_cuts_beta_n_values_at_each_end():
    updates = [model(1), model(2), model(3), model(100)]
    new, _ = combine(
        updates, [1, 1, 1, 1], None, rule("trimmed_mean", beta=0.25)
    )  # int(0.25 * 4) = 1 per end
    np.testing.assert_allclose(new[0], [2.5])
    new, _ = combine(
        updates, [1, 1, 1, 1], None, rule("trimmed_mean", beta=0.2)
    )  # int(0.8) = 0: plain mean
    np.testing.assert_allclose(new[0], [26.5])


HONEST = [0.0, 0.1, -0.1, 0.05]


def test_krum_picks_the_model_closest_to_its_neighbours_in_the_honest_cluster():
    # n = 5, f = 1: each score sums the squared distances to the n - f - 2 = 2 nearest others;
    # 0.05's are 0.0025 + 0.0025 (to 0 and 0.1), the lowest
    updates = [model(x) for x in HONEST] + [model(100.0)]
    new, reason = combine(updates, [1] * 5, None, rule("krum", f=1))
    assert reason is None and new[0].tolist() == [pytest.approx(0.05)]


def test_multikrum_averages_the_n_minus_f_best_scored_models_with_the_weights():
    updates = [model(x) for x in HONEST] + [model(100.0)]
    new, _ = combine(updates, [1, 1, 1, 1, 1], None, rule("multikrum", f=1))
    np.testing.assert_allclose(new[0], [np.mean(HONEST)], rtol=1e-6)
    new, _ = combine(
        updates, [3, 1, 1, 1, 1000], None, rule("multikrum", f=1)
    )  # the outlier's weight is moot
    np.testing.assert_allclose(new[0], [(0.1 - 0.1 + 0.05) / 6], rtol=1e-6)


def test_bulyan_keeps_the_honest_range_against_two_attackers():
    honest = [model(x, -x) for x in (0.0, 0.1, -0.1, 0.05, -0.05, 0.02, 0.03, -0.02, 0.01)]
    updates = honest + [model(1e3, -1e3), model(-1e3, 1e3)]  # n = 11 = 4f + 3
    new, reason = combine(updates, [1] * 11, None, rule("bulyan", f=2))
    assert reason is None and np.all(np.abs(new[0]) <= 0.1)


@pytest.mark.parametrize("name, f, need", [("krum", 1, 5), ("multikrum", 2, 7), ("bulyan", 1, 7)])
def test_too_few_updates_for_the_rule_keep_the_model_and_say_why(name, f, need):
    updates = [model(x) for x in range(need - 1)]
    new, reason = combine(updates, [1] * (need - 1), None, rule(name, f=f))
    assert new is None
    assert reason == (
        f"aggregation={name} with f={f} needs at least {need} updates, got {need - 1}: "
        "global model unchanged"
    )


def test_clipping_scales_the_update_to_the_bound_over_all_float_arrays():
    global_weights = [np.zeros(2, np.float32), np.zeros(1, np.float32), np.array(7, np.int64)]
    client = [
        np.array([3.0, 0.0], np.float32),
        np.array([4.0], np.float32),
        np.array(9, np.int64),
    ]  # |Δ| = 5
    clipped = clip_update(client, global_weights, 1.0)
    np.testing.assert_allclose(clipped[0], [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(clipped[1], [0.8], rtol=1e-6)
    assert clipped[0].dtype == np.float32 and clipped[2].dtype == np.int64 and int(clipped[2]) == 9
    within = clip_update(client, global_weights, 5.0)
    assert all(a is b for a, b in zip(within, client))  # untouched, to the bit


def test_clipping_applies_before_the_rule():
    global_weights = model(0.0)
    updates = [model(1.0), model(-1.0), model(1e6)]
    new, _ = combine(updates, [1, 1, 1], global_weights, rule("mean", max_update_norm=2.0))
    np.testing.assert_allclose(new[0], [(1.0 - 1.0 + 2.0) / 3], rtol=1e-6)


def test_mean_without_clipping_is_weighted_average_to_the_bit():
    rng = np.random.default_rng(0)
    updates = [
        [rng.normal(size=(5, 3)).astype(np.float32), rng.integers(0, 50, size=()).astype(np.int64)]
        for _ in range(4)
    ]
    weights = [13, 7, 1, 120]
    new, reason = combine(updates, weights, None, RobustSettings.from_config(None))
    expected = weighted_average(updates, weights)
    assert reason is None
    assert all(a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(new, expected))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["aggregation=foo"], "unknown aggregation 'foo'"),
        (["aggregation=krum", "aggregation.f=-1"], "aggregation.f must be an integer >= 0, got -1"),
        (
            ["aggregation=trimmed_mean", "aggregation.beta=0.5"],
            "aggregation.beta must be in [0, 0.5), got 0.5",
        ),
        (
            ["aggregation.max_update_norm=0"],
            "aggregation.max_update_norm must be a positive number or null, got 0",
        ),
        (
            ["aggregation=bulyan", "aggregation.f=2", "num_clients=10"],
            "aggregation=bulyan with f=2 needs at least 11 updates a round, "
            "but the federation has 10 clients",
        ),
        (
            ["method=fednova", "aggregation=median"],
            "method 'fednova' does not average the client models",
        ),
        (
            ["method=feddyn", "aggregation.max_update_norm=1.0"],
            "method 'feddyn' does not average the client models",
        ),
        (["method=qffl", "aggregation=krum"], "method 'qffl' weights the client models itself"),
    ],
)
def test_bad_aggregation_settings_are_one_line_config_errors(overrides, message):
    with pytest.raises(ConfigError) as err:
        config.compose(["dataset=digits", *overrides])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_default_is_the_plain_mean_and_rules_compose():
    assert RobustSettings.from_config(config.compose(["dataset=digits"]).aggregation).is_plain_mean
    cfg = config.compose(
        ["dataset=digits", "aggregation=krum", "aggregation.f=2", "aggregation.max_update_norm=3"]
    )
    assert RobustSettings.from_config(cfg.aggregation) == RobustSettings(
        name="krum", f=2, max_update_norm=3
    )
    config.compose(
        ["dataset=digits", "method=qffl", "aggregation.max_update_norm=3"]
    )  # clipping is allowed


def strategy_round(*overrides: str, num_clients: int = 5):
    return started_round("dataset=digits", *overrides, num_clients=num_clients)


def byzantine_round(*overrides: str):
    strategy, nodes, base = strategy_round(*overrides)
    honest = [
        [a + 0.01 * (k + 1) if np.issubdtype(a.dtype, np.floating) else a for a in base]
        for k in range(4)
    ]
    attack = [a - 1e3 if np.issubdtype(a.dtype, np.floating) else a for a in base]
    results = [(nodes[k], fit_result(honest[k])) for k in range(4)] + [
        (nodes[4], fit_result(attack))
    ]
    new, _ = strategy.aggregate_fit(1, results, [])
    return strategy, base, new


@pytest.mark.parametrize(
    "overrides",
    [
        ["aggregation=median"],
        ["aggregation=krum"],
        ["aggregation=multikrum"],
        ["aggregation=trimmed_mean", "aggregation.beta=0.2"],
    ],
)
def test_a_strategy_with_a_robust_rule_ignores_a_byzantine_client(overrides):
    strategy, base, new = byzantine_round(*overrides)
    drift = max(float(np.abs(n - b).max()) for n, b in zip(parameters_to_ndarrays(new), base))
    assert drift <= 0.04 + 1e-5  # within the honest updates' range
    _, _, mean = byzantine_round()
    assert max(float(np.abs(n - b).max()) for n, b in zip(parameters_to_ndarrays(mean), base)) > 100


def test_a_strategy_round_with_too_few_updates_for_krum_keeps_the_model():
    strategy, nodes, base = strategy_round("aggregation=krum")  # f = 1: 5 updates needed
    new, _ = strategy.aggregate_fit(
        1, [(nodes[k], fit_result([a for a in base])) for k in range(4)], []
    )
    assert new is None
    assert any(
        "aggregation=krum with f=1 needs at least 5 updates, got 4" in m
        for m in strategy.round_log.messages
    )


def robust_overrides(method: str) -> list[str] | None:
    """The strongest ``aggregation`` settings ``method`` accepts: Krum with clipping where it
    averages client models, clipping alone where its weights are the method, else None."""
    for overrides in (
        ["aggregation=krum", "aggregation.f=0", "aggregation.max_update_norm=1.0"],
        ["aggregation.max_update_norm=1.0"],
    ):
        try:
            config.compose([f"method={method}", "dataset=digits", "num_clients=3", *overrides])
            return overrides
        except ConfigError:
            continue
    return None


@pytest.mark.parametrize("method", config.group_choices("method"))
def test_every_method_trains_with_the_strongest_aggregation_it_accepts(method):
    from fedimb.app.in_process import InProcessFederation

    overrides = robust_overrides(method)
    if overrides is None:
        with pytest.raises(ConfigError, match="does not average the client models"):
            config.compose([f"method={method}", "dataset=digits", "aggregation=median"])
        return
    fed = InProcessFederation(
        [
            f"method={method}",
            "dataset=digits",
            "num_clients=3",
            "num_rounds=2",
            "train.local_epochs=1",
            "dropout=none",
            *config.smoke_overrides(method),
            *overrides,
        ]
    )
    initial = parameters_to_ndarrays(fed.parameters)
    for rnd in range(1, fed.strategy.total_rounds() + 1):
        record = fed.round(rnd)
        assert record["clients"]["rejected"] == 0 and record["clients"]["errors"] == 0
    final = parameters_to_ndarrays(fed.parameters)
    assert any(not np.array_equal(a, b) for a, b in zip(initial, final))


@pytest.mark.parametrize("method", ["fedavgm", "pfedme", "scaffold", "rebafl"])
def test_a_server_step_after_the_average_is_skipped_when_the_rule_has_too_few_updates(method):
    from fedimb.app.in_process import InProcessFederation

    fed = InProcessFederation(
        [
            f"method={method}",
            "dataset=digits",
            "num_clients=5",
            "fraction_fit=0.8",
            "num_rounds=1",
            "train.local_epochs=1",
            "dropout=none",
            "aggregation=krum",
        ]
    )
    initial = parameters_to_ndarrays(fed.parameters)
    record = fed.round(1)  # 4 of 5 clients sampled; Krum with f = 1 needs 5
    assert record["clients"]["succeeded"] == 4
    assert any("needs at least 5 updates, got 4" in m for m in record["messages"])
    assert all(
        np.array_equal(a, b) for a, b in zip(initial, parameters_to_ndarrays(fed.parameters))
    )
