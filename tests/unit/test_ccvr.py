"""CCVR: a client's per-class moments (eq. 1), their pooling (eqs. 2-3) against the pooled
raw features, virtual features, rejected statistics, and a calibration that changes the
classifier alone."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from clients.ccvr import (
    CALIBRATION_MODEL,
    FEATURE_COUNTS,
    FEATURE_COVARIANCES,
    FEATURE_MEANS,
    flatten_weights,
    unflatten_weights,
)
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core import payload, protocol
from fedimb.core.feature_stats import class_moments, pooled_moments, sample_virtual_features
from strategies.ccvr import covariance_problem

SMALL = ["method=ccvr", "dataset=digits", "num_clients=3", "dropout=none", "train.local_epochs=1"]


def test_one_clients_moments_are_the_hand_computed_ones():
    # class 0: (1,2), (3,4): mean (2,3), deviations ±(1,1), covariance (1·1+1·1)/(2−1) each
    features = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    means, covariances, counts = class_moments(features, np.array([0, 0, 1]), 3)
    np.testing.assert_array_equal(counts, [2, 1, 0])
    np.testing.assert_allclose(means, [[2, 3], [5, 0], [0, 0]])
    np.testing.assert_allclose(covariances[0], [[2, 2], [2, 2]])
    np.testing.assert_array_equal(covariances[1:], 0)  # one feature, and none


def test_pooling_two_clients_by_hand_in_one_dimension():
    # client A holds {0, 2}: μ = 1, Σ = 2, N = 2; client B holds {4}: μ = 4, Σ = 0, N = 1.
    # Eq. 2: μ = (2·1 + 1·4)/3 = 2. Eq. 3: (1/2)·2 + (2·1² + 1·4²)/2 − (3/2)·2² = 1 + 9 − 6 = 4,
    # the unbiased variance of {0, 2, 4}: (4 + 0 + 4)/2
    mean, covariance, counts = pooled_moments(
        [np.array([[1.0]]), np.array([[4.0]])],
        [np.array([[[2.0]]]), np.array([[[0.0]]])],
        [np.array([2]), np.array([1])],
    )
    assert mean[0, 0] == pytest.approx(2.0)
    assert covariance[0, 0, 0] == pytest.approx(4.0)
    assert counts.tolist() == [3]


def test_pooled_moments_equal_those_of_the_pooled_raw_features():
    rng = np.random.default_rng(0)
    clients = [
        (rng.normal(size=(7, 3)) + 2, np.array([0, 0, 0, 1, 1, 1, 1])),
        (rng.normal(size=(5, 3)) * 3, np.array([0, 0, 1, 1, 2])),  # class 2: a single feature
        (rng.normal(size=(4, 3)) - 1, np.array([0, 0, 0, 0])),
    ]
    moments = [class_moments(z, y, 4) for z, y in clients]
    mean, covariance, counts = pooled_moments(*zip(*moments))
    z = np.concatenate([c[0] for c in clients])
    y = np.concatenate([c[1] for c in clients])
    for c in (0, 1):
        np.testing.assert_allclose(mean[c], z[y == c].mean(axis=0), atol=1e-12)
        np.testing.assert_allclose(covariance[c], np.cov(z[y == c], rowvar=False), atol=1e-12)
    assert counts.tolist() == [9, 6, 1, 0]
    np.testing.assert_allclose(mean[2], z[y == 2][0])
    np.testing.assert_array_equal(covariance[2:], 0)  # N_c = 1 and N_c = 0: no spread
    np.testing.assert_array_equal(mean[3], 0)


def test_virtual_features_follow_the_pooled_gaussian_and_skip_absent_classes():
    mean = np.array([[1.0, -2.0], [0.0, 0.0], [5.0, 5.0]])
    covariance = np.array([[[2.0, 0.5], [0.5, 1.0]], np.eye(2), np.zeros((2, 2))])
    counts = np.array([10, 0, 1])
    x, y = sample_virtual_features(mean, covariance, counts, 20000, np.random.default_rng(0))
    assert x.dtype == np.float32 and sorted(set(y.tolist())) == [0, 2]
    assert (y == 0).sum() == (y == 2).sum() == 20000
    np.testing.assert_allclose(x[y == 0].mean(axis=0), mean[0], atol=0.05)
    np.testing.assert_allclose(np.cov(x[y == 0], rowvar=False), covariance[0], atol=0.06)
    np.testing.assert_allclose(x[y == 2], np.tile(mean[2], (20000, 1)))  # zero covariance
    again, _ = sample_virtual_features(mean, covariance, counts, 20000, np.random.default_rng(0))
    np.testing.assert_array_equal(x, again)


def test_the_model_travels_flattened_and_comes_back_as_it_was():
    weights = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(4, dtype=np.int64)]
    back = unflatten_weights(flatten_weights(weights), weights)
    assert [w.dtype for w in back] == [np.float32, np.int64]
    assert all(np.array_equal(a, b) for a, b in zip(weights, back))
    with pytest.raises(ValueError):
        unflatten_weights(np.zeros(5, np.float32), weights)


def test_implausible_covariances_are_named():
    assert covariance_problem(np.array([[[1.0, 0.0], [0.0, 2.0]]])) is None
    assert "symmetric" in covariance_problem(np.array([[[1.0, 1.0], [0.0, 2.0]]]))
    assert "negative" in covariance_problem(np.array([[[-1.0, 0.0], [0.0, 2.0]]]))


def test_wrong_statistics_are_left_out_of_the_calibration():
    fed = InProcessFederation([*SMALL, "num_rounds=1"])
    strategy = fed.strategy
    fed.round(1)
    honest = strategy.registry.query(
        [0],
        {
            **strategy.fit_config(1),
            **payload.pack(
                {CALIBRATION_MODEL: flatten_weights(parameters_to_ndarrays(fed.parameters))}
            ),
        },
    )[0]
    arrays = payload.unpack(honest)
    n = honest[protocol.NUM_EXAMPLES]
    asymmetric = arrays[FEATURE_COVARIANCES].copy()
    asymmetric[0, 0, 1] += 1.0
    crafted = {
        0: honest,
        1: {**honest, **payload.pack({FEATURE_COVARIANCES: arrays[FEATURE_COVARIANCES][:, :2]})},
        2: {**honest, **payload.pack({FEATURE_COVARIANCES: asymmetric})},
        3: {**honest, **payload.pack({FEATURE_COUNTS: arrays[FEATURE_COUNTS] + 1})},
        4: {k: v for k, v in honest.items() if k != payload.PREFIX + FEATURE_MEANS},
    }
    strategy.registry.query = lambda pids, question: crafted
    valid = strategy.client_statistics(1, parameters_to_ndarrays(fed.parameters))
    assert len(valid) == 1 and n > 0
    assert strategy.round_log.extra["clients_left_out"] == 4
    assert "left out of the calibration" in strategy.round_log.messages[-1]


def test_the_calibration_changes_only_the_head_and_is_the_final_model():
    fed = InProcessFederation([*SMALL, "num_rounds=2"])
    strategy = fed.strategy
    seen = {}
    calibrate = strategy.calibrate

    def spy(server_round, weights):
        seen["before"] = [w.copy() for w in weights]
        seen["after"] = calibrate(server_round, weights)
        return seen["after"]

    strategy.calibrate = spy
    first = fed.round(1)
    assert "before" not in seen and "calibration_clients" not in first.get("extra", {})
    record = fed.round(2)
    before, after = seen["before"], seen["after"]
    *encoder_before, head_w, head_b = before
    *encoder_after, new_w, new_b = after
    assert all(np.array_equal(a, b) for a, b in zip(encoder_before, encoder_after))
    assert not np.array_equal(head_w, new_w) and not np.array_equal(head_b, new_b)
    final = parameters_to_ndarrays(fed.parameters)
    assert all(np.array_equal(a, b) for a, b in zip(final, after))
    extra = record["extra"]
    assert extra["calibration_clients"] == 3 and extra["virtual_features"] > 0
    assert 0 <= extra["uncalibrated_accuracy"] <= 1
    assert record["timing"]["retrain_head"] >= 0
    assert record["clients"]["rejected"] == 0
