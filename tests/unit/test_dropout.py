"""Client availability: Bernoulli dropout, persistence and config validation."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.core.data.partitioners import client_groups
from fedimb.core.dropout import Availability, availability_from_config
from fedimb.core.errors import ConfigError


def test_p_one_all_available_p_zero_none():
    always = Availability(np.ones(30), seed=4)
    never = Availability(np.zeros(30), seed=4)
    for r in range(1, 21):
        assert always.mask(r).all()
        assert not never.mask(r).any()
        assert always.filter(r, range(30)) == list(range(30))
        assert never.filter(r, range(30)) == []


def test_empirical_rate():
    av = Availability(np.full(50, 0.3), seed=0)
    masks = np.stack([av.mask(r) for r in range(1, 2001)])
    assert masks.shape == (2000, 50)
    assert abs(masks.mean() - 0.3) < 0.02
    # every client's own rate is sensible too (2000 draws, sd ~0.01)
    assert np.all(np.abs(masks.mean(axis=0) - 0.3) < 0.06)


def test_seeding():
    a = Availability(np.full(40, 0.5), seed=1)
    b = Availability(np.full(40, 0.5), seed=1)
    c = Availability(np.full(40, 0.5), seed=2)
    ma = np.stack([a.mask(r) for r in range(1, 11)])
    mb = np.stack([b.mask(r) for r in range(1, 11)])
    mc = np.stack([c.mask(r) for r in range(1, 11)])
    np.testing.assert_array_equal(ma, mb)
    assert not np.array_equal(ma, mc)
    # rounds differ from each other with period 1
    assert not np.array_equal(ma[0], ma[1])


def test_mask_independent_of_call_order():
    av = Availability(np.full(20, 0.5), seed=3)
    first = av.mask(7)
    av.mask(1)
    av.mask(100)
    np.testing.assert_array_equal(av.mask(7), first)


def test_filter_independent_of_other_clients():
    av = Availability(np.full(20, 0.5), seed=5)
    for r in range(1, 51):
        alone = av.filter(r, [3])
        together = av.filter(r, [0, 3, 7, 12, 19])
        assert (3 in alone) == (3 in together)
        assert (3 in alone) == bool(av.mask(r)[3])
        assert together == [c for c in [0, 3, 7, 12, 19] if av.mask(r)[c]]


def test_filter_drops_out_of_range_ids():
    av = Availability(np.ones(5), seed=0)
    assert av.filter(1, [-1, 0, 4, 5, 9]) == [0, 4]


def test_period_blocks():
    av = Availability(np.full(50, 0.5), period=5, seed=0)
    masks = {r: av.mask(r) for r in range(1, 16)}
    for block in (range(1, 6), range(6, 11), range(11, 16)):
        for r in block:
            np.testing.assert_array_equal(masks[r], masks[block[0]])
    assert (masks[1] != masks[6]).any()
    assert (masks[6] != masks[11]).any()


def test_period_one_matches_block_numbering():
    # round r of period s uses the same draw as block (r-1)//s of period 1
    a1 = Availability(np.full(30, 0.5), period=1, seed=9)
    a3 = Availability(np.full(30, 0.5), period=3, seed=9)
    np.testing.assert_array_equal(a3.mask(4), a1.mask(2))
    np.testing.assert_array_equal(a3.mask(6), a1.mask(2))
    np.testing.assert_array_equal(a3.mask(7), a1.mask(3))


def test_per_client_probabilities():
    p = np.array([0.0, 1.0] * 5)
    av = Availability(p, seed=0)
    for r in range(1, 20):
        np.testing.assert_array_equal(av.mask(r), p.astype(bool))


# ----------------------------------------------------------------- from config
def test_from_config_scalar_p():
    av = availability_from_config({"name": "bernoulli", "p": 0.25, "period": 1}, 8, None, 0)
    np.testing.assert_allclose(av.p, np.full(8, 0.25))
    assert av.period == 1 and av.seed == 0


def test_from_config_takes_p_and_period_from_the_yaml_only():
    # no default in the code: the YAML's p (0.5) is the only one
    with pytest.raises(ConfigError, match="dropout.period must be an integer >= 1, got None"):
        availability_from_config({"name": "bernoulli", "p": 0.5}, 4, None, 0)
    with pytest.raises(ConfigError, match=r"dropout.p must lie in \[0, 1\], got None"):
        availability_from_config({"name": "bernoulli", "period": 1}, 4, None, 0)
    none = availability_from_config({"name": "none"}, 4, None, 0)  # declares neither
    np.testing.assert_allclose(none.p, np.ones(4))


def test_from_config_p_per_client():
    av = availability_from_config(
        {"name": "bernoulli", "period": 1, "p_per_client": [0, 0.5, 1]}, 3, None, 7
    )
    np.testing.assert_allclose(av.p, [0.0, 0.5, 1.0])
    assert av.seed == 7


def test_from_config_p_per_group():
    groups = client_groups(20, 5)
    spec = {"name": "bernoulli", "p_per_group": [1, 0, 1, 0, 0.5], "period": 2}
    av = availability_from_config(spec, 20, groups, 0)
    np.testing.assert_allclose(av.p, np.repeat([1, 0, 1, 0, 0.5], 4))
    assert av.period == 2
    m = av.mask(1)
    assert m[:4].all() and not m[4:8].any() and m[8:12].all() and not m[12:16].any()


def test_from_config_persistent_period():
    av = availability_from_config({"name": "persistent", "p": 0.5, "period": 5}, 10, None, 0)
    assert av.period == 5


def test_from_config_none_all_available():
    av = availability_from_config({"name": "none"}, 6, None, 0)
    for r in range(1, 10):
        assert av.mask(r).all()
    # 'none' ignores probabilities
    av = availability_from_config({"name": "none", "p": 0.0}, 6, None, 0)
    assert av.mask(1).all()


@pytest.mark.parametrize(
    "spec,groups,match",
    [
        ({"name": "bernoulli", "period": 1, "p": 1.5}, None, "dropout.p"),
        ({"name": "bernoulli", "period": 1, "p": -0.1}, None, "dropout.p"),
        ({"name": "bernoulli", "period": 1, "p": "abc"}, None, "dropout.p"),
        ({"name": "bernoulli", "period": 1, "p_per_client": [0.5, 0.5]}, None, "p_per_client"),
        (
            {"name": "bernoulli", "period": 1, "p_per_client": [0.5, 0.5, 0.5, 1.2]},
            None,
            "p_per_client",
        ),
        ({"name": "bernoulli", "period": 1, "p_per_group": [0.5, 0.5]}, None, "p_per_group"),
        (
            {"name": "bernoulli", "period": 1, "p_per_group": [0.5, 0.5, 0.5]},
            [0, 0, 1, 1],
            "p_per_group",
        ),
        (
            {"name": "bernoulli", "period": 1, "p_per_client": [1, 1, 1, 1], "p_per_group": [1, 1]},
            [0, 0, 1, 1],
            "only one",
        ),
        ({"name": "bernoulli", "p": 0.5, "period": 0}, None, "period"),
        ({"name": "bernoulli", "p": 0.5, "period": 1.5}, None, "period"),
        ({"name": "bernoulli", "p": 0.5, "period": True}, None, "period"),
        ({"name": "none", "period": 0}, None, "period"),
    ],
)
def test_from_config_errors(spec, groups, match):
    with pytest.raises(ConfigError, match=match) as info:
        availability_from_config(spec, 4, groups, 0)
    assert "\n" not in str(info.value)
