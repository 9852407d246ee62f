"""The smallest difference the leaderboard's paired test can see
(:func:`detectable_difference`): the power it promises, checked against scipy's noncentral
t, and the normal approximation it tends to with many seeds."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from fedimb.cli.results.compare_stats import detectable_difference


def power_at(difference: float, pairs: int, comparisons: int, sd: float) -> float:
    df, noncentrality = pairs - 1, difference / (sd / math.sqrt(pairs))
    critical = stats.t.ppf(1 - 0.05 / comparisons / 2, df)
    wrong_side = stats.nct.cdf(-critical, df, noncentrality)
    return stats.nct.sf(critical, df, noncentrality) + (0 if math.isnan(wrong_side) else wrong_side)


@pytest.mark.parametrize(("pairs", "comparisons"), [(5, 26), (10, 26), (10, 1), (3, 2)])
def test_the_detectable_difference_has_the_power_asked(pairs, comparisons):
    difference = detectable_difference(pairs, comparisons, sd=0.03)
    assert power_at(difference, pairs, comparisons, 0.03) == pytest.approx(0.8, abs=1e-8)
    assert power_at(difference * 0.9, pairs, comparisons, 0.03) < 0.8


def test_many_seeds_approach_the_normal_formula():
    # (z_{1 - 0.05/2} + z_{0.8}) sd / sqrt(n): 2.8016 x 0.02 / 100 for 10,000 pairs
    expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 0.02 / 100
    assert detectable_difference(10_000, 1, 0.02) == pytest.approx(expected, rel=1e-3)


def test_more_seeds_or_fewer_tests_see_smaller_differences():
    five, ten = detectable_difference(5, 26, 0.03), detectable_difference(10, 26, 0.03)
    assert ten < five and detectable_difference(10, 1, 0.03) < ten
    # five seeds, 26 tests: t_crit(4 df) = 7.06, so the difference must be several sd
    assert 0.03 * 4 < five < 0.03 * 8


def test_too_few_pairs_or_no_spread():
    assert detectable_difference(1, 26, 0.03) is None
    assert detectable_difference(5, 26, 0.0) == 0.0
