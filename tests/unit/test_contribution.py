"""Contribution normalisation by mean latent representations (eqs. 4–8) as a plug-in."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.aggregate import weighted_average
from fedimb.core.contribution import contribution_factors


def test_identical_latents_give_equal_factors():
    z = np.ones((4, 3))
    np.testing.assert_allclose(contribution_factors(z), [0.75] * 4)  # 1 - 1/R


def test_hand_computed_matrix_with_an_outlier():
    z = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    # S = [[1,1,0],[1,1,0],[0,0,1]] -> row sums s = [2, 2, 1]
    e = np.exp([2.0, 2.0, 1.0])
    expected = 1 - e / e.sum()
    np.testing.assert_allclose(contribution_factors(z, 1.0), expected)
    assert expected[2] > expected[0]  # the outlier contributes more
    np.testing.assert_allclose(contribution_factors(z).sum(), 2.0)  # sum of Lambda = R - 1


def test_temperature_limits():
    z = np.array([[1.0, 0.0], [1.0, 0.2], [0.0, 1.0]])
    hot = contribution_factors(z, temperature=1e6)
    np.testing.assert_allclose(hot, [2 / 3] * 3, atol=1e-5)  # T -> inf: all equal
    cold = contribution_factors(z, temperature=1e-3)
    assert cold.min() == pytest.approx(0.0, abs=1e-6) and np.sort(cold)[1:] == pytest.approx(
        [1.0, 1.0]
    )
    with pytest.raises(ValueError):
        contribution_factors(z, temperature=0)


def test_weights_are_bounded_and_concentrate_as_t_goes_to_zero():
    # five clients: three alike, two apart; client 1 resembles everyone most (row sums of S:
    # 2.943, 3.328, 3.158, 1.389, 1.192)
    z = np.array(
        [[1.0, 0.0, 0.0], [1.0, 0.2, 0.2], [1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    )
    sizes = np.array([10.0, 20.0, 30.0, 15.0, 25.0])
    for t in (1.0, 0.5, 0.2, 0.1, 0.05, 0.01):
        share = contribution_factors(z, t) * sizes / np.dot(contribution_factors(z, t), sizes)
        assert np.all(
            share <= sizes / sizes.sum() / (1 - sizes.max() / sizes.sum()) + 1e-12
        )  # the bound
    lam = contribution_factors(z, 0.01)
    np.testing.assert_allclose(
        lam, [1, 0, 1, 1, 1], atol=1e-6
    )  # T -> 0: the most typical client drops out
    share = lam * sizes / np.dot(lam, sizes)
    np.testing.assert_allclose(share, [10 / 80, 0, 30 / 80, 15 / 80, 25 / 80], atol=1e-6)
    equal = contribution_factors(z, 0.01) / contribution_factors(z, 0.01).sum()
    np.testing.assert_allclose(equal.max(), 1 / 4)  # equal base weights: at most R/(R-1) x 1/R


def test_normalised_weights_sum_to_one_and_reduce_to_base_weights():
    base = np.array([10.0, 30.0, 60.0])
    arrays = [[np.array([1.0])], [np.array([2.0])], [np.array([3.0])]]
    equal = contribution_factors(np.ones((3, 2)))
    np.testing.assert_allclose(
        weighted_average(arrays, equal * base)[0], weighted_average(arrays, base)[0]
    )
    lam = contribution_factors(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    w = lam * base / np.dot(lam, base)
    assert w.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(weighted_average(arrays, lam * base)[0], np.dot(w, [1, 2, 3]))


@pytest.mark.parametrize(
    "method",
    ["fedavg", "fedprox", "scaffold", "fednova", "fedbabu", "fedavgm", "rebafl", "grpfed", "afl"],
)
def test_switch_applies_to_weighted_strategies(method):
    fed = InProcessFederation(
        [
            f"method={method}",
            "dataset=digits",
            "num_clients=3",
            "train.local_epochs=1",
            "dropout=none",
            "normalize=latent_cosine",
            "normalize.temperature=0.5",
        ]
    )
    assert fed.strategy.fit_config(1)["report_latent"] is True
    for rnd in (1, 2):
        record = fed.round(rnd)
    factors = [v for k, v in record["extra"].items() if k.startswith("contribution.")]
    assert len(factors) == 3 and sum(factors) == pytest.approx(2.0)


def test_switch_applies_to_astraea_mediators():
    fed = InProcessFederation(
        [
            "method=astraea",
            "dataset=digits",
            "num_clients=4",
            "train.local_epochs=1",
            "dropout=none",
            "partition=longtail",
            "method.strategy.gamma=2",
            "method.strategy.mediator_epochs=1",
            "normalize=latent_cosine",
        ]
    )
    records = [fed.round(r) for r in range(1, fed.strategy.steps_per_sync + 1)]
    factors = {k: v for k, v in records[-1]["extra"].items() if k.startswith("contribution.")}
    assert sorted(factors) == ["contribution.mediator0", "contribution.mediator1"]
    assert sum(factors.values()) == pytest.approx(1.0)


def test_without_the_switch_weights_are_unchanged():
    fed = InProcessFederation(["method=fedavg", "dataset=digits", "num_clients=3", "dropout=none"])
    assert "report_latent" not in fed.strategy.fit_config(1)
    record = fed.round(1)
    assert not any(k.startswith("contribution.") for k in record.get("extra", {}))
