"""The rules of asynchronous aggregation with exact values: the staleness functions of
FedAsync (Xie et al., 2019, §3) and FedBuff (Nguyen et al., 2022), the server steps of
:mod:`fedimb.core.async_update`, and the device-speed model."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.core import async_update
from fedimb.core.errors import ConfigError
from fedimb.core.speed import check_speed, rarity, speed_model
from fedimb.core.staleness import check_staleness, staleness_weight


@pytest.mark.parametrize(
    ("spec", "staleness", "expected"),
    [
        ({"name": "constant"}, 7, 1.0),
        ({"name": "polynomial", "a": 0.5}, 0, 1.0),
        ({"name": "polynomial", "a": 0.5}, 3, 0.5),  # FedBuff: 1 / sqrt(1 + 3)
        ({"name": "polynomial", "a": 1.0}, 4, 0.2),
        ({"name": "hinge", "a": 10.0, "b": 4}, 4, 1.0),  # at most b stale: 1
        ({"name": "hinge", "a": 10.0, "b": 4}, 6, 1.0 / 21.0),  # 1 / (a (6 - 4) + 1)
    ],
)
def test_staleness_weights_are_the_papers(spec, staleness, expected):
    assert staleness_weight(spec, staleness) == pytest.approx(expected, rel=1e-15)


def test_bad_staleness_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="mode.staleness.name"):
        check_staleness({"name": "cubic"}, "mode.staleness")
    with pytest.raises(ConfigError, match="mode.staleness.a"):
        check_staleness({"name": "polynomial", "a": -1}, "mode.staleness")
    with pytest.raises(ValueError, match="staleness must be >= 0"):
        staleness_weight({"name": "constant"}, -1)


def test_fedbuff_step_of_two_stale_updates():
    """Two buffered updates: client a (20 samples) started from the current model x = 1,
    trained to 3; client b (60 samples) started two versions back from 0, trained to 4.
    With s = 1 / sqrt(1 + tau): Delta_a = 2 (s = 1), Delta_b = 4 (s = 1/sqrt(3)).
    x' = x + eta (20 * 2 + 60 * 4 / sqrt(3)) / 80."""
    current, old = [np.array([1.0])], [np.array([0.0])]
    a = async_update.rebased(current, current, [np.array([3.0])], 1.0)
    b = async_update.rebased(current, old, [np.array([4.0])], 1 / np.sqrt(3))
    mean = [(20 * a[0] + 60 * b[0]) / 80]  # the method's sample-weighted average
    stepped = async_update.mixed(current, mean, 0.5)
    expected = 1.0 + 0.5 * (20 * 2.0 + 60 * 4.0 / np.sqrt(3)) / 80
    assert stepped[0][0] == pytest.approx(expected, rel=1e-12)


def test_fresh_update_and_unit_step_are_kept_as_sent():
    current = [np.array([1.0, 2.0], dtype=np.float32)]
    model = [np.array([1.5, 2.5], dtype=np.float32)]
    assert async_update.rebased(current, current, model, 1.0) is model
    assert async_update.mixed(current, model, 1.0) is model


def test_fedasync_mix_and_integer_buffers():
    current = [np.array([2.0], dtype=np.float32), np.array([5], dtype=np.int64)]
    arriving = [np.array([4.0], dtype=np.float32), np.array([9], dtype=np.int64)]
    mixed = async_update.mixed(current, arriving, 0.25)  # (1 - 0.25) 2 + 0.25 4
    assert mixed[0].dtype == np.float32 and mixed[0][0] == 2.5
    assert mixed[1][0] == 9  # a counter is the arriving model's


def test_participation_balance_favours_rarely_applied_clients():
    applied = np.array([9, 0, 4])
    factors = async_update.participation_factors(applied, [0, 1], [10, 10])
    assert factors[1] / factors[0] == pytest.approx(10.0)  # 1/(1+0) against 1/(1+9)
    assert float(np.dot(factors, [10, 10])) == pytest.approx(20.0)  # mean factor 1
    assert async_update.fedasync_balance(applied, 0) == pytest.approx((1 + 13 / 3) / 10)
    assert async_update.fedasync_balance(applied, 1) == 1.0


def test_speed_model_seconds_and_rare_slow_assignment():
    counts = [np.array([50, 0]), np.array([45, 5]), np.array([0, 10])]  # client 2: rare class
    spec = {
        "name": "edge",
        "seconds_per_sample": 0.01,
        "slow_fraction": 1 / 3,
        "slow_factor": 20.0,
        "link_seconds": 0.5,
        "assign": "rare_slow",
    }
    model = speed_model(spec, counts, seed=0)
    assert model is not None
    assert np.argmax(rarity(counts)) == 2
    assert model.seconds(2, 10, 2) == pytest.approx(0.5 + 0.01 * 10 * 2 * 20.0)
    assert model.seconds(0, 50, 1) == pytest.approx(0.5 + 0.01 * 50)
    again = speed_model({**spec, "name": "lognormal", "sigma": 1.0, "link_sigma": 0.5}, counts, 3)
    same = speed_model({**spec, "name": "lognormal", "sigma": 1.0, "link_sigma": 0.5}, counts, 3)
    assert again is not None and same is not None
    assert np.array_equal(again.compute, same.compute)  # drawn from the seed
    assert again.compute[2] == again.compute.max()  # rare_slow: the rarest is the slowest
    assert speed_model({"name": "none"}, counts, 0) is None


def test_bad_speed_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="speed.slow_fraction must be <= 1"):
        check_speed(
            {
                "name": "edge",
                "assign": "random",
                "seconds_per_sample": 1.0,
                "link_seconds": 0.0,
                "slow_factor": 2.0,
                "slow_fraction": 1.5,
            }
        )
    with pytest.raises(ConfigError, match="unknown speed"):
        check_speed({"name": "warp"})
