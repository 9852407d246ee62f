"""Robust aggregation (``aggregation=``): Flower's rules on hand-checkable models, clipping,
centred clipping, bucketing, the set-aside clients, the bit-identical default, the
configuration checks and the strategies' use of it."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from fedimb.app.configuration import compose as config
from fedimb.core.aggregate import weighted_average
from fedimb.core.errors import ConfigError
from fedimb.core.robust import (
    RobustSettings,
    bucket_means,
    buckets,
    clip_update,
    combine,
    combine_recorded,
    krum_scores,
)
from tests.strategy_rounds import fit_result, started_round


def model(*values, counter=0):
    """A two-array model: float32 weights and an int64 counter (like BatchNorm's)."""
    return [np.array(values, dtype=np.float32), np.array(counter, dtype=np.int64)]


def rule(name, **settings):
    return RobustSettings(name=name, **{"max_attackers": 0, **settings})


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


def test_centered_clip_cuts_only_the_outlier_and_iterates():
    # v0 = 0 (the global model), tau = 3; distances 1, 2, 10: only the last is clipped
    # iteration 1: v1 = 0 + (1 + 2 + 10 * 3/10) / 3 = 2
    # iteration 2: distances -1, 0, 8: v2 = 2 + (-1 + 0 + 8 * 3/8) / 3 = 2 + 2/3 = 8/3
    updates = [model(1, counter=1), model(2, counter=2), model(10, counter=6)]
    one = rule("centered_clip", tau=3.0, iterations=1)
    new, reason, aside = combine_recorded(updates, [1, 1, 1], model(0), one)
    assert reason is None and aside == [2]  # 10 > 3: its weight was cut
    np.testing.assert_allclose(new[0], [2.0], rtol=1e-6)
    assert new[0].dtype == np.float32 and new[1].dtype == np.int64 and int(new[1]) == 3
    two = rule("centered_clip", tau=3.0, iterations=2)
    new, _, aside = combine_recorded(updates, [1, 1, 1], model(0), two)
    np.testing.assert_allclose(new[0], [8 / 3], rtol=1e-6)
    assert aside == [2]  # in the last iteration 8 > 3
    # the floats ignore the weights (uniform 1/n); the counter is their weighted mean:
    # rint((1 + 2 + 100 * 6) / 102) = rint(5.91) = 6
    new, _, _ = combine_recorded(updates, [1, 1, 100], model(0), two)
    np.testing.assert_allclose(new[0], [8 / 3], rtol=1e-6)
    assert int(new[1]) == 6


def test_centered_clip_takes_the_distance_over_all_float_arrays_together():
    # |(3, 4)| = 5 > tau = 2.5: scaled by 1/2 to (1.5, 2); |(0, ±1)| = 1 is kept
    # v1 = ((1.5 + 0 + 0) / 3, (2 + 1 - 1) / 3) = (0.5, 2/3)
    def two_arrays(a, b):
        return [np.array([a], np.float32), np.array([b], np.float32)]

    updates = [two_arrays(3, 4), two_arrays(0, 1), two_arrays(0, -1)]
    new, _, aside = combine_recorded(
        updates, [1, 1, 1], two_arrays(0, 0), rule("centered_clip", tau=2.5, iterations=1)
    )
    np.testing.assert_allclose([new[0][0], new[1][0]], [0.5, 2 / 3], rtol=1e-6)
    assert aside == [0]


def test_bucketing_draws_a_seeded_permutation_and_combines_bucket_means():
    assert buckets(6, 2, rng_seed=3) == [[2, 5], [4, 1], [3, 0]]
    assert buckets(6, 2, rng_seed=3) == buckets(6, 2, rng_seed=3)  # reproducible
    assert buckets(6, 2, rng_seed=7) == [[5, 2], [0, 4], [1, 3]]  # another round, other buckets
    assert buckets(5, 2, rng_seed=7) == [[2, 0], [4, 1], [3]]  # ⌈5/2⌉ = 3, the last one smaller
    updates = [model(x, counter=c) for x, c in zip((0, 1, 2, 3, 4, 100), (1, 1, 2, 2, 5, 5))]
    weights = [1, 2, 3, 4, 5, 6]
    means, bucket_weights = bucket_means(updates, weights, buckets(6, 2, rng_seed=3))
    # (2 + 100) / 2, (4 + 1) / 2, (3 + 0) / 2; counters rint(3.5) = 4, rint(3) = 3, rint(1.5) = 2
    assert [float(m[0][0]) for m in means] == [51.0, 2.5, 1.5]
    assert [int(m[1]) for m in means] == [4, 3, 2]
    assert bucket_weights == [3 + 6, 5 + 2, 4 + 1]
    # the median of the bucket means; f = 1 of 3 buckets: the lowest (clients 3, 0) and the
    # highest (2, 5) are set aside
    new, reason, aside = combine_recorded(
        updates, weights, None, rule("median", max_attackers=1, bucket_size=2), rng_seed=3
    )
    assert reason is None and new[0].tolist() == [2.5] and int(new[1]) == 3
    assert aside == [0, 2, 3, 5]


def test_bucketing_sets_aside_the_clients_of_a_bucket_the_rule_sets_aside():
    updates = [model(x) for x in (0.0, 0.1, -0.1, 0.05, 0.02, -0.02, 0.03, -0.03, 100.0)]
    assert buckets(9, 2, rng_seed=0) == [[4, 5], [2, 6], [3, 8], [7, 0], [1]]
    # bucket means 0, -0.035, 50.025, -0.015, 0.1 with weights 2, 2, 2, 2, 1; Multi-Krum with
    # f = 1 drops 50.025: (0 * 2 - 0.035 * 2 - 0.015 * 2 + 0.1 * 1) / 7 = 0
    settings = rule("multikrum", max_attackers=1, bucket_size=2)
    new, reason, aside = combine_recorded(updates, [1] * 9, None, settings, rng_seed=0)
    assert reason is None and aside == [3, 8]  # the outlier's bucket, with its honest partner
    np.testing.assert_allclose(new[0], [0.0], atol=1e-7)
    # 5 buckets are Multi-Krum's 2f + 3: 8 updates make 4 buckets, too few
    new, reason, aside = combine_recorded(updates[:8], [1] * 8, None, settings, rng_seed=0)
    assert new is None and aside == []
    assert reason == (
        "aggregation=multikrum with f=1 and bucket_size=2 needs at least 9 updates, got 8: "
        "global model unchanged"
    )
    with pytest.raises(ValueError, match="bucketing needs rng_seed"):
        combine(updates, [1] * 9, None, settings)


# one obvious outlier (client 4); each honest client is the lowest in one coordinate
OUTLIER = [
    model(0.0, 0.2, 0.1),
    model(0.1, 0.0, 0.2),
    model(0.2, 0.1, 0.0),
    model(0.1, 0.1, 0.1),
    model(100.0, 100.0, 100.0),
]


@pytest.mark.parametrize(
    "settings, expected, set_aside",
    [
        (rule("mean"), 20.08, []),
        (rule("mean", max_update_norm=1.0), None, [4]),  # clipped
        (rule("median", max_attackers=1), 0.1, [4]),  # each honest client is cut in 1 of 3
        (rule("median"), 0.1, []),  # f = 0: the median keeps all n - 2f values
        (rule("trimmed_mean", max_attackers=1), 0.4 / 3, [4]),  # cut 1 per side
        (rule("trimmed_mean", beta=0.25), 0.4 / 3, [4]),  # int(0.25 * 5) = 1 per side
        (rule("krum", max_attackers=1), 0.1, [0, 1, 2, 4]),  # scores .08, .08, .08, .04, 6e4
        (rule("multikrum", max_attackers=1), 0.1, [4]),
        (rule("multikrum", f=1, max_attackers=3), 0.1, [4]),  # f wins over max_attackers
        # |c_k| = 0.224, 0.224, 0.224, 0.173 < 1 = tau; the outlier (173.2) pulls 100 / 173.2
        # per coordinate: (0.4 + 0.57735) / 5
        (rule("centered_clip", tau=1.0, iterations=1), 0.977350 / 5, [4]),
    ],
)
def test_each_rule_records_the_clients_it_set_aside(settings, expected, set_aside):
    new, reason, aside = combine_recorded(OUTLIER, [1] * 5, model(0, 0, 0), settings)
    assert reason is None and aside == set_aside
    if expected is not None:
        np.testing.assert_allclose(new[0], [expected] * 3, rtol=1e-5)


def test_bulyan_records_the_clients_outside_its_krum_selection():
    # n = 7 = 4f + 3 with f = 1: repeated Krum selects theta = n - 2f = 5 models, the closest
    # first, so the farthest honest model (1.0) and the outlier (100) are left
    updates = [model(x) for x in (0.0, 0.1, -0.1, 0.2, -0.2, 1.0, 100.0)]
    new, reason, aside = combine_recorded(updates, [1] * 7, None, rule("bulyan", max_attackers=1))
    assert reason is None and aside == [5, 6]
    assert new[0].tolist() == [0.0]  # mean of the beta = theta - 2f = 3 values nearest 0


def test_krum_selection_from_own_scores_is_flowers_model():
    from flwr.server.strategy.aggregate import aggregate_krum

    rng = np.random.default_rng(1)
    updates = [
        [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=4).astype(np.float32)]
        for _ in range(8)
    ]
    weights = [float(w) for w in rng.integers(1, 9, size=8)]
    results = [(u, w) for u, w in zip(updates, weights)]
    scores = krum_scores(updates, 2)
    chosen = int(np.argmin(scores))
    flower = aggregate_krum(results, num_malicious=2, to_keep=0)
    assert all(np.array_equal(a, b) for a, b in zip(updates[chosen], flower))
    new, _, aside = combine_recorded(updates, weights, None, rule("krum", f=2))
    assert aside == [k for k in range(8) if k != chosen]
    assert all(np.array_equal(a, b) for a, b in zip(new, flower))
    kept = [k for k in range(8) if k not in np.argsort(scores)[-2:]]  # the 2 worst scores
    flower = aggregate_krum(results, num_malicious=2, to_keep=6)
    mean = weighted_average([updates[k] for k in kept], [weights[k] for k in kept])
    assert all(np.allclose(a, b, rtol=1e-6) for a, b in zip(mean, flower))
    _, _, aside = combine_recorded(updates, weights, None, rule("multikrum", f=2))
    assert aside == sorted(set(range(8)) - set(kept))


def test_trimmed_mean_without_beta_cuts_max_attackers_values_per_side():
    updates = [model(x) for x in (1, 2, 3, 10, 50, 100)]
    new, _ = combine(updates, [1] * 6, None, rule("trimmed_mean", max_attackers=1))
    np.testing.assert_allclose(new[0], [(2 + 3 + 10 + 50) / 4])
    new, _ = combine(updates, [1] * 6, None, rule("trimmed_mean", max_attackers=2))
    np.testing.assert_allclose(new[0], [(3 + 10) / 2])
    new, reason = combine(updates[:4], [1] * 4, None, rule("trimmed_mean", max_attackers=2))
    assert new is None and reason.startswith("aggregation=trimmed_mean with f=2 needs at least 5")


def test_max_attackers_sets_f_where_f_is_not_given():
    cfg = config.compose(["dataset=digits", "aggregation=bulyan", "aggregation.max_attackers=2"])
    settings = RobustSettings.from_config(cfg.aggregation)
    assert settings.f is None and settings.attackers == 2
    cfg = config.compose(
        ["dataset=digits", "aggregation=krum", "aggregation.max_attackers=2", "aggregation.f=0"]
    )
    assert RobustSettings.from_config(cfg.aggregation).attackers == 0


@pytest.mark.parametrize(
    "section, message",
    [
        ({"max_attackers": 1.5}, "aggregation.max_attackers must be an integer >= 0, got 1.5"),
        ({"max_attackers": "two"}, "aggregation.max_attackers must be an integer >= 0, got 'two'"),
        ({"name": "krum", "f": True}, "aggregation.f must be an integer >= 0, got True"),
        ({"name": "median", "bucket_size": 2.0}, "aggregation.bucket_size must be an integer >= 1"),
        (
            {"name": "centered_clip", "tau": float("inf"), "iterations": 1},
            "aggregation.tau must be a positive",
        ),
        (
            {"name": "centered_clip", "tau": 1.0, "iterations": 1.0},
            "aggregation.iterations must be an integer",
        ),
    ],
)
def test_from_config_refuses_bad_values_in_one_line(section, message):
    with pytest.raises(ConfigError) as err:
        RobustSettings.from_config({"name": "mean", "max_attackers": 0, **section})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_mean_without_clipping_is_weighted_average_to_the_bit():
    rng = np.random.default_rng(0)
    updates = [
        [rng.normal(size=(5, 3)).astype(np.float32), rng.integers(0, 50, size=()).astype(np.int64)]
        for _ in range(4)
    ]
    weights = [13, 7, 1, 120]
    new, reason = combine(updates, weights, None, rule("mean"))
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
            "aggregation.beta must be in [0, 0.5) or null, got 0.5",
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
        (
            ["aggregation=krum", "aggregation.max_attackers=-1"],
            "aggregation.max_attackers must be an integer >= 0, got -1",
        ),
        (
            ["aggregation=median", "aggregation.max_attackers=1.5"],
            "aggregation.max_attackers must be an integer >= 0, got 1.5",
        ),
        (
            ["aggregation=krum", "aggregation.bucket_size=0"],
            "aggregation.bucket_size must be an integer >= 1, got 0",
        ),
        (
            ["aggregation=mean", "aggregation.bucket_size=2"],
            "aggregation.bucket_size changes nothing in aggregation=mean",
        ),
        (
            ["aggregation=centered_clip", "aggregation.tau=0"],
            "aggregation.tau must be a positive number, got 0",
        ),
        (
            ["aggregation=centered_clip", "aggregation.tau=-1.5"],
            "aggregation.tau must be a positive number, got -1.5",
        ),
        (
            ["aggregation=centered_clip", "aggregation.iterations=0"],
            "aggregation.iterations must be an integer >= 1, got 0",
        ),
        (
            ["aggregation=krum", "aggregation.bucket_size=2", "num_clients=8"],
            "aggregation=krum with f=1 and bucket_size=2 needs at least 9 updates a round, "
            "but the federation has 8 clients",
        ),
        (
            ["aggregation=trimmed_mean", "aggregation.max_attackers=2", "num_clients=4"],
            "aggregation=trimmed_mean with f=2 needs at least 5 updates a round, "
            "but the federation has 4 clients",
        ),
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
        name="krum", f=2, max_update_norm=3, max_attackers=1
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
        ["aggregation=trimmed_mean"],
        ["aggregation=centered_clip"],
    ],
)
def test_a_strategy_with_a_robust_rule_ignores_a_byzantine_client(overrides):
    strategy, base, new = byzantine_round(*overrides)
    drift = max(float(np.abs(n - b).max()) for n, b in zip(parameters_to_ndarrays(new), base))
    assert drift <= 0.04 + 1e-5  # within the honest updates' range
    _, _, mean = byzantine_round()
    # the plain mean leaves the honest range (the strategy's own bound on outsized update
    # norms may shorten the attack, so no larger drift is asserted)
    mean_drift = max(float(np.abs(n - b).max()) for n, b in zip(parameters_to_ndarrays(mean), base))
    assert mean_drift > 0.04 + 1e-5


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
    from fedimb.app.runtimes.in_process import InProcessFederation

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
    from fedimb.app.runtimes.in_process import InProcessFederation

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
