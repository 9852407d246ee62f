"""The statistics of ``fedimb compare``: a mean's t interval, a paired difference with its t
interval and paired t-test, Holm's correction, a one-way random-effects split of the
variance between data seeds and within them, and the rows they fill
(:class:`MethodComparison` per method, :class:`SetupComparison` per set-up).

Plain functions of numbers (scipy.stats does the t distribution and the tests), so the tests
check them against scipy and hand-computed values without any run folder.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from fedimb.cli.results.run_records import RunRecord

#: the confidence of every interval and the level of every test
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` values and its Student's t interval (None below two values)."""

    n: int
    mean: float
    low: float | None
    high: float | None


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """The mean of ``values`` and its ``confidence`` Student's t interval (mean ± t · s/√n,
    n − 1 degrees of freedom); values without spread give a zero-width interval."""
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0:
        raise ValueError("no values")
    mean = float(arr.mean())
    if len(arr) < 2:
        return Interval(len(arr), mean, None, None)
    if np.ptp(arr) == 0:
        return Interval(len(arr), mean, mean, mean)
    low, high = stats.t.interval(confidence, len(arr) - 1, loc=mean, scale=stats.sem(arr))
    return Interval(len(arr), mean, float(low), float(high))


@dataclass(frozen=True)
class PairedDifference:
    """A method minus the reference over the seeds both ran (``pairs``): the mean paired
    difference, its t interval and the paired t-test's two-sided p-value (None below two
    pairs); ``unpaired``: the runs of either side whose seed the other lacks."""

    pairs: int
    unpaired: int
    mean: float | None
    low: float | None
    high: float | None
    p: float | None


def paired_difference(
    values: Mapping[Any, float], reference: Mapping[Any, float], confidence: float = CONFIDENCE
) -> PairedDifference:
    """``values`` − ``reference`` paired by key (the seed): only keys both hold count. The
    interval and p come from ``scipy.stats.ttest_rel``; differences without spread give a
    zero-width interval and p = 1 when they are 0, else 0 (the t statistic's limit)."""
    keys = sorted(set(values) & set(reference), key=repr)
    unpaired = len(set(values) ^ set(reference))
    a = np.array([values[k] for k in keys], dtype=np.float64)
    b = np.array([reference[k] for k in keys], dtype=np.float64)
    if len(keys) < 2:
        mean = float((a - b).mean()) if keys else None
        return PairedDifference(len(keys), unpaired, mean, None, None, None)
    diff = a - b
    mean = float(diff.mean())
    if np.ptp(diff) == 0:
        return PairedDifference(len(keys), unpaired, mean, mean, mean, 1.0 if mean == 0 else 0.0)
    with warnings.catch_warnings():  # nearly equal differences: scipy warns, the numbers stand
        warnings.simplefilter("ignore", RuntimeWarning)
        test = stats.ttest_rel(a, b)
        low, high = test.confidence_interval(confidence)
    return PairedDifference(len(keys), unpaired, mean, float(low), float(high), float(test.pvalue))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: sorted ascending, the i-th
    (from 0) of m becomes max over j ≤ i of min(1, (m − j) · p_(j)). (scipy.stats has no
    Holm correction; its false_discovery_control controls the false discovery rate instead.)"""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def detectable_difference(
    pairs: int, comparisons: int, sd: float, power: float = 0.8, level: float = 1 - CONFIDENCE
) -> float | None:
    """The smallest true mean difference that a two-sided paired t-test over ``pairs``
    seeds finds with probability ``power`` at Holm's strictest threshold, ``level /
    comparisons`` (the first of ``comparisons`` tests has to pass it), where the paired
    differences have standard deviation ``sd``: λ · sd / √n with λ the noncentrality at
    which the noncentral t (n − 1 degrees of freedom) falls beyond ±t_crit with
    probability ``power``. None below two pairs; 0 where ``sd`` is 0."""
    if pairs < 2:
        return None
    if sd == 0:
        return 0.0
    df = pairs - 1
    critical = stats.t.ppf(1 - level / comparisons / 2, df)

    def shortfall(noncentrality: float) -> float:
        wrong_side = stats.nct.cdf(-critical, df, noncentrality)  # NaN where it underflows
        found = stats.nct.sf(critical, df, noncentrality) + np.nan_to_num(wrong_side)
        return float(found - power)

    high = critical + 10.0
    while shortfall(high) < 0:
        high *= 2
    noncentrality = optimize.brentq(shortfall, 0.0, high, xtol=1e-10)
    return float(noncentrality * sd / np.sqrt(pairs))


@dataclass(frozen=True)
class VarianceSplit:
    """How a method's runs vary over a grid of data seeds × training seeds (see
    :func:`variance_split`)."""

    data_seeds: int
    train_seeds: int
    between: float
    within: float
    data_component: float


def variance_split(by_data_seed: Mapping[Any, Sequence[float]]) -> VarianceSplit | None:
    """The one-way random-effects split of values grouped by data seed (each group: the runs
    of one data seed over training seeds); None unless at least two data seeds have at least
    two runs each.

    - ``between``: the sample variance (ddof 1) of the per-data-seed means;
    - ``within``: the mean over data seeds of the sample variances over training seeds (the
      ANOVA's within-group mean square for equal group sizes): the training noise;
    - ``data_component``: max(0, between − within / n̄), n̄ the mean number of training seeds
      per data seed, the ANOVA estimator of the variance the data seed alone causes (the
      per-data-seed means still carry within / n̄ of training noise).
    Groups of one run enter neither estimate."""
    groups = [np.asarray(v, dtype=np.float64) for v in by_data_seed.values() if len(v) >= 2]
    if len(groups) < 2:
        return None
    means = np.array([g.mean() for g in groups])
    between = float(means.var(ddof=1))
    within = float(np.mean([g.var(ddof=1) for g in groups]))
    sizes = np.mean([len(g) for g in groups])
    train_seeds = max(len(g) for g in groups)
    return VarianceSplit(
        len(groups), train_seeds, between, within, max(0.0, between - within / float(sizes))
    )


@dataclass
class MethodComparison:
    """One row of a set-up: a method's runs, their ``metric`` by seed pair (runs without a
    number for it left out), its mean and t interval (None without values), its difference
    to the reference with the Holm-adjusted p (None for the reference itself or without
    one), the variance split where its runs form a grid of seeds, and the mean over runs of
    the last local evaluation's ``local_*`` summary fields. ``not_numbers`` counts the
    runs whose ``metric`` is NaN or infinite: never averaged in, and said so."""

    label: str
    method: str
    runs: list[RunRecord]
    values: dict[tuple, float]
    interval: Interval | None
    difference: PairedDifference | None = None
    holm_p: float | None = None
    variance: VarianceSplit | None = None
    local: dict[str, float] = field(default_factory=dict)
    not_numbers: int = 0


@dataclass
class SetupComparison:
    """The rows of one set-up (the reference's first), the metric they compare and the
    label of the reference row (None where no run of the reference is in the set-up)."""

    name: str
    metric: str
    reference: str | None
    methods: list[MethodComparison]
    against: str | None = None  # the reference asked for
