"""Aggregation math: weighted averaging, weight normalisation, model diversity."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.core.aggregate import normalised_weights, weight_diversity, weighted_average


def test_weighted_average_hand_values():
    a = [
        np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32),
        np.array([0.0, 4.0], dtype=np.float32),
    ]
    b = [
        np.array([[5.0, 6.0], [7.0, 8.0]], dtype=np.float32),
        np.array([4.0, 0.0], dtype=np.float32),
    ]
    out = weighted_average([a, b], [1, 3])
    assert len(out) == 2
    # (1*a + 3*b) / 4
    np.testing.assert_allclose(out[0], [[4.0, 5.0], [6.0, 7.0]])
    np.testing.assert_allclose(out[1], [3.0, 1.0])
    assert out[0].dtype == np.float32 and out[1].dtype == np.float32
    assert out[0].shape == (2, 2)


def test_weighted_average_float64_preserved_and_exact():
    a = [np.array([0.1])]
    b = [np.array([0.7])]
    out = weighted_average([a, b], [2.0, 1.0])
    assert out[0].dtype == np.float64
    assert out[0][0] == pytest.approx((2 * 0.1 + 0.7) / 3)


def test_weighted_average_integer_dtype_rounded():
    a = [np.array([1, 10], dtype=np.int64)]
    b = [np.array([2, 20], dtype=np.int64)]
    out = weighted_average([a, b], [1, 3])
    # 1.75 -> 2, 17.5 -> 18 (round half to even)
    assert out[0].dtype == np.int64
    np.testing.assert_array_equal(out[0], [2, 18])


def test_weighted_average_single_update_is_identity():
    a = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    out = weighted_average([a], [5])
    np.testing.assert_array_equal(out[0], a[0])


def test_weighted_average_does_not_modify_inputs():
    a = [np.array([1.0, 2.0])]
    b = [np.array([3.0, 4.0])]
    weighted_average([a, b], [1, 1])
    np.testing.assert_array_equal(a[0], [1.0, 2.0])
    np.testing.assert_array_equal(b[0], [3.0, 4.0])


@pytest.mark.parametrize(
    "weights", [[0, 0], [1, -1], [-1, -2], [1, float("nan")], [1, float("inf")]]
)
def test_weighted_average_bad_weights(weights):
    a = [np.array([1.0])]
    with pytest.raises(ValueError):
        weighted_average([a, a], weights)


def test_weighted_average_length_mismatch():
    a = [np.array([1.0])]
    with pytest.raises(ValueError):
        weighted_average([a, a], [1.0])
    with pytest.raises(ValueError):
        weighted_average([], [])


def test_weighted_average_layer_count_mismatch():
    a = [np.array([1.0]), np.array([2.0])]
    b = [np.array([1.0])]
    with pytest.raises(ValueError):
        weighted_average([a, b], [1, 1])


def test_normalised_weights():
    np.testing.assert_allclose(normalised_weights([1, 3]), [0.25, 0.75])
    np.testing.assert_allclose(normalised_weights([0, 2]), [0.0, 1.0])
    with pytest.raises(ValueError):
        normalised_weights([])


def test_weight_diversity_skips_integer_layers():
    models = [
        [np.array([[0.0, 0.0]], dtype=np.float32), np.array([7], dtype=np.int64)],
        [np.array([[2.0, 0.0]], dtype=np.float32), np.array([9], dtype=np.int64)],
    ]
    assert weight_diversity(models) == pytest.approx(1.0)
    assert (
        weight_diversity([[np.array([1], dtype=np.int64)], [np.array([5], dtype=np.int64)]]) == 0.0
    )


def test_weight_diversity_hand_value():
    models = [[np.array([0.0, 0.0])], [np.array([2.0, 0.0])]]
    assert weight_diversity(models) == pytest.approx(1.0)


def test_weight_diversity_three_models_two_layers():
    # flattened: [0,0,0], [3,0,0], [0,3,0]; mean [1,1,0]
    # squared distances: 2, 5, 5 -> mean 4
    models = [
        [np.array([0.0, 0.0]), np.array([0.0])],
        [np.array([3.0, 0.0]), np.array([0.0])],
        [np.array([0.0, 3.0]), np.array([0.0])],
    ]
    assert weight_diversity(models) == pytest.approx(4.0)


def test_weight_diversity_identical_models_is_zero():
    m = [np.array([1.0, -2.0, 3.0]), np.ones((2, 2))]
    assert weight_diversity([m, m, m]) == 0.0


def test_weight_diversity_ignores_integer_buffers():
    models = [
        [np.array([0.0]), np.array([1], dtype=np.int64)],
        [np.array([0.0]), np.array([100], dtype=np.int64)],
    ]
    assert weight_diversity(models) == 0.0


def test_weight_diversity_empty_raises():
    with pytest.raises(ValueError):
        weight_diversity([])


# ----------------------------------------------------------------- GRP-FED, q-FFL, AFL
from fedimb.core.aggregate import (  # noqa: E402
    adaptive_q,
    loss_power_weights,
    project_simplex,
    qffl_update,
)


def test_adaptive_q_hand_values():
    # sigma grows from 1 to 3: relative change (3 - 1) / 2 = 1 -> q + eta
    assert adaptive_q(10.0, 1.0, 3.0, 0.5) == pytest.approx(10.5)
    # sigma shrinks from 3 to 1: q - eta
    assert adaptive_q(10.0, 3.0, 1.0, 0.5) == pytest.approx(9.5)
    assert adaptive_q(2.0, 0.4, 0.4, 0.5) == 2.0
    assert adaptive_q(2.0, 0.0, 0.0, 0.5) == 2.0


def test_loss_power_weights_hand_values():
    w = loss_power_weights([1.0, 2.0], q=2)
    np.testing.assert_allclose(w, [1 / 5, 4 / 5])
    np.testing.assert_allclose(loss_power_weights([1.0, 2.0, 3.0], q=0), [1 / 3] * 3)
    big = loss_power_weights([50.0, 100.0], q=200)  # no overflow
    assert big.sum() == pytest.approx(1.0) and big[1] > 0.999
    with pytest.raises(ValueError):
        loss_power_weights([1.0, 0.0], q=1)


def test_qffl_with_q_zero_is_fedavg_of_equal_weights():
    g = [np.zeros(2)]
    locals_ = [[np.array([1.0, 0.0])], [np.array([0.0, 2.0])]]
    # q = 0: h_k = L, update = sum(delta_k) / (K L) = mean(w - w_k): plain average of the
    # local models
    out = qffl_update(g, locals_, [0.5, 2.0], q=0.0, lr=0.1)
    np.testing.assert_allclose(out[0], [0.5, 1.0])


def test_qffl_hand_value_q1():
    g = [np.array([0.0])]
    locals_ = [[np.array([-1.0])], [np.array([-2.0])]]
    lr, q = 0.5, 1.0  # L = 2; deltas 2, 4; F = 1, 3
    # h = q F^0 |d|^2 + L F = [4 + 2, 16 + 6] = [6, 22]; sum F^q d = 1*2 + 3*4 = 14
    out = qffl_update(g, locals_, [1.0, 3.0], q=q, lr=lr)
    np.testing.assert_allclose(out[0], [0.0 - 14 / 28])


def test_project_simplex_of_entries_whose_sum_overflows():
    # a diverged model's losses: the running sum of the sorted entries would be infinite
    np.testing.assert_allclose(project_simplex([1e308, 1e308, 0.0]), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(project_simplex([1e308, 3.0, -1e300]), [1.0, 0.0, 0.0])


def test_project_simplex():
    np.testing.assert_allclose(project_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_simplex([1.0, 1.0]), [0.5, 0.5])
    np.testing.assert_allclose(project_simplex([2.0, 0.0, -1.0]), [1.0, 0.0, 0.0])
    p = project_simplex([0.9, 0.4, -0.3, 0.1])
    assert p.sum() == pytest.approx(1.0) and np.all(p >= 0)
