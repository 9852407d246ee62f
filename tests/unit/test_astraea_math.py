"""Astraea's z-score plan (Algorithm 2) and mediator scheduling (Algorithm 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedimb.core.aggregate import schedule_mediators, zscore_plan


def test_zscore_plan_hand_computed():
    counts = [100, 100, 100, 100, 100, 100, 100, 100, 1000, 10]
    mu, sigma = np.mean(counts), np.std(counts)  # population std (ddof = 0)
    z = (np.asarray(counts) - mu) / sigma
    augment, downsample, ratios = zscore_plan(counts, tau_d=2.0)
    assert downsample == [8] and z[8] > 2.0
    assert augment == [9] and z[9] < -0.5 < z[0]  # tau_a = -1/2
    target = mu + sigma * math.sqrt(z[8] * 2.0)
    assert ratios[8] == pytest.approx(target / 1000)
    assert mu + sigma * 2.0 < target < 1000  # the paper's stated range for majority classes
    untouched = [y for y in range(10) if y not in augment + downsample]
    assert np.all(ratios[untouched] == 1.0)


def test_zscore_plan_minority_class_range():
    counts = [500, 500, 500, 500, 20]  # mu = 404, sigma = 192, z = [0.5]*4 + [-2]
    augment, downsample, ratios = zscore_plan(counts, tau_d=1.5)
    mu, sigma = 404.0, 192.0
    assert (augment, downsample) == ([4], [])
    tau_a = -1 / 1.5
    target = mu - sigma * math.sqrt(-2.0 * tau_a)
    assert ratios[4] == pytest.approx(target / 20)
    assert 20 < target < mu + sigma * tau_a  # (C_y, mu + sigma*tau_a)
    assert ratios[4] > 1  # minority classes grow


def test_zscore_plan_balanced_and_thresholds():
    augment, downsample, ratios = zscore_plan([7, 7, 7], tau_d=3.0)
    assert augment == downsample == [] and ratios.tolist() == [1.0, 1.0, 1.0]
    # a high tau_d never downsamples, but tau_a = -1/tau_d is near 0: small classes grow
    assert zscore_plan([1, 2, 3, 1000], tau_d=10.0)[:2] == ([0, 1, 2], [])
    with pytest.raises(ValueError):
        zscore_plan([1, 2], tau_d=0)


def test_schedule_mediators_pairs_complementary_clients():
    # clients 0,1 hold class 0; 2,3 hold class 1: the best partner of 0 is 2 (lowest index
    # among ties)
    counts = np.array([[10, 0], [10, 0], [0, 10], [0, 10]])
    assert schedule_mediators(counts, gamma=2) == [[0, 2], [1, 3]]


def test_schedule_mediators_greedy_order_and_sizes():
    counts = np.array(
        [
            [8, 1, 1],  # 0
            [1, 8, 1],  # 1
            [1, 1, 8],  # 2
            [4, 4, 2],  # 3
            [3, 3, 4],  # 4
        ]
    )
    mediators = schedule_mediators(counts, gamma=3)

    # first pick: the single client closest to uniform is 4; then the one that best
    # balances it, etc. Computed by hand with D_KL(P || U) = sum p log(p C).
    def kl(c):
        p = np.asarray(c, float) / np.sum(c)
        return float(np.sum(np.where(p > 0, p * np.log(p * len(p)), 0)))

    first = int(np.argmin([kl(c) for c in counts]))
    assert mediators[0][0] == first == 4
    second = min((k for k in range(5) if k != 4), key=lambda k: (kl(counts[4] + counts[k]), k))
    assert mediators[0][1] == second
    assert [len(m) for m in mediators] == [3, 2]
    assert sorted(sum(mediators, [])) == [0, 1, 2, 3, 4]


def test_schedule_mediators_gamma_one_and_empty_clients():
    counts = np.array([[0, 0], [5, 5], [9, 1]])
    assert schedule_mediators(counts, gamma=1) == [[1], [2], [0]]  # empty client last
    with pytest.raises(ValueError):
        schedule_mediators(counts, gamma=0)
