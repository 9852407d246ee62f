"""Plausibility of class directions: a class mean that points away from the other
clients' means of its class (FedNH's, sign-flipped, keeps its norm and every declared
bound) is set aside and counted; honest means are not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from clients.fednh import CLASS_COUNTS, FEATURE_MEANS
from fedimb.core.errors import ConfigError
from fedimb.core.influence import InfluenceSettings, cosines_to_median
from fedimb.core.prototypes import smoothed_prototypes
from tests.unit.test_influence import unpacked
from tests.unit.test_payload_schemas import federation, honest_reply, started, tampered


def test_each_row_is_compared_with_the_median_of_the_holders_and_the_anchor():
    rows = np.array([[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [5.0, 5.0]])
    held = np.array([True, True, True, False])
    # unit votes (1, 0), (0, 1), (-1, 0) and the anchor (0.6, 0.8): the median of the x's
    # (-1, 0, 0.6, 1) is 0.3, of the y's (0, 0, 0.8, 1) 0.4, so the median direction is (0.6, 0.8)
    cosines = cosines_to_median(rows, held, anchor=np.array([3.0, 4.0]))
    np.testing.assert_allclose(cosines[:3], [0.6, 0.8, -0.6], atol=1e-12)
    assert np.isnan(cosines[3])  # not held
    # two opposed holders: the anchor decides
    opposed = np.array([[1.0, 0.2], [-1.0, -0.2]])
    cosines = cosines_to_median(opposed, np.array([True, True]), anchor=np.array([1.0, 0.0]))
    assert cosines[0] > 0 > cosines[1]
    # a sole holder with the anchor: the median is their mean, so only a row opposite the
    # anchor is set aside
    sole = cosines_to_median(np.array([[0.0, 1.0]]), np.array([True]), anchor=np.array([1.0, 0.0]))
    assert sole[0] == pytest.approx(1 / math.sqrt(2))


@pytest.mark.parametrize("value", [1, 1.5, -1.1, float("nan"), True, "0"])
def test_min_cosine_must_be_a_cosine_below_one(value):
    with pytest.raises(ConfigError, match=r"influence.min_cosine must be a number in \[-1, 1\)"):
        InfluenceSettings(min_cosine=value).check()


def fednh_round(flip: bool):
    """Round 1 of FedNH on 3 IID clients, client 2's class means sign-flipped if ``flip``;
    the strategy, the replies and the prototypes before and after."""
    fed = federation("method=fednh")
    strategy = fed.strategy
    sent = started(fed)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    if flip:
        replies[2] = tampered(
            replies[2], **{FEATURE_MEANS: -unpacked(replies[2][1].metrics)[FEATURE_MEANS]}
        )
    previous = parameters_to_ndarrays(fed.parameters)[strategy.slot]
    new, _ = strategy.aggregate_fit(1, replies, [])
    return strategy, replies, previous, parameters_to_ndarrays(new)[strategy.slot]


def test_honest_fednh_class_means_are_not_set_aside():
    strategy, _, _, _ = fednh_round(flip=False)
    assert strategy.round_log.bounded == set()
    assert 0 <= strategy.round_log.extra["influence.class_mean_disagreement"] < 1


def test_sign_flipped_fednh_class_means_are_set_aside_and_counted():
    strategy, replies, previous, prototypes = fednh_round(flip=True)
    log = strategy.round_log
    assert log.bounded == {2} and log.rejected == 0
    assert any("class_mean of class" in m and "set aside" in m for m in log.messages)
    # the prototypes are those of the two honest clients' means alone
    honest = [unpacked(res.metrics) for _, res in replies[:2]]
    expected = smoothed_prototypes(
        previous,
        [a[FEATURE_MEANS] for a in honest],
        [a[CLASS_COUNTS] for a in honest],
        strategy.rho,
    )
    np.testing.assert_allclose(prototypes, expected, rtol=1e-6, atol=1e-7)
    assert log.extra["influence.class_mean_disagreement"] > 1.25  # a cosine below -0.25


def test_without_the_bound_flipped_means_move_the_prototypes():
    fed = federation("method=fednh", "influence.min_cosine=null")
    sent = started(fed)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    replies[2] = tampered(
        replies[2], **{FEATURE_MEANS: -unpacked(replies[2][1].metrics)[FEATURE_MEANS]}
    )
    fed.strategy.aggregate_fit(1, replies, [])
    assert fed.strategy.round_log.bounded == set()
