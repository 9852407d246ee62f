"""The server's classifier re-training on features (strategies.base.feature_retraining):
a hand-computed SGD step, a separable toy classified after re-training, only the head
changed, seeded by round, timed in the round's log."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fedimb.core.models import EncoderHeadNet, get_weights
from strategies.base.accounting import RoundAccounting
from strategies.base.feature_retraining import RETRAIN_PHASE, FeatureRetraining, HeadTraining
from strategies.base.round_log import RoundLog


class Host(FeatureRetraining):
    """The two things the mixin reads of a strategy: the run and the round's accounting."""

    def __init__(self, new_model):
        self.run = SimpleNamespace(new_model=new_model, device=torch.device("cpu"), seed=7)
        self.round_log = RoundLog(1, "train")
        self.accounting = RoundAccounting(self.round_log)


def two_by_two_model(seed: int = 0) -> EncoderHeadNet:
    torch.manual_seed(seed)
    return EncoderHeadNet(nn.Linear(2, 2), feature_dim=2, num_classes=2)


def training(**changes) -> HeadTraining:
    values = dict(epochs=1, batch_size=2, lr=1.0, momentum=0.0, weight_decay=0.0)
    return HeadTraining(**{**values, **changes})


def test_one_full_batch_step_is_the_hand_computed_sgd_step():
    # head W = 0, b = 0: both softmax outputs are 1/2. Features (1,0) label 0 and (0,1)
    # label 1: dL/dW = ½ Σ (p − y) xᵀ = ½ ([[−½,0],[½,0]] + [[0,½],[0,−½]]), dL/db = 0
    weights = get_weights(two_by_two_model())
    weights[-2][:] = 0.0
    weights[-1][:] = 0.0
    host = Host(two_by_two_model)
    features = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    out = host.retrain_head(weights, features, np.array([0, 1]), training(lr=1.0), 1)
    np.testing.assert_allclose(out[-2], [[0.25, -0.25], [-0.25, 0.25]], atol=1e-7)
    np.testing.assert_allclose(out[-1], [0.0, 0.0], atol=1e-7)


def test_a_separable_toy_is_classified_by_the_retrained_head_and_only_the_head_changes():
    rng = np.random.default_rng(0)
    features = np.concatenate(
        [rng.normal([3, 0], 0.5, (100, 2)), rng.normal([-3, 0], 0.5, (100, 2))]
    )
    labels = np.repeat([0, 1], 100)
    weights = get_weights(two_by_two_model())
    weights[-2][:] = [[-1.0, 0.0], [1.0, 0.0]]  # a head that gets every feature wrong
    weights[-1][:] = 0.0
    host = Host(two_by_two_model)
    out = host.retrain_head(weights, features, labels, training(epochs=5, batch_size=20, lr=0.1), 3)
    logits = features @ out[-2].T + out[-1]
    assert (logits.argmax(axis=1) == labels).mean() == 1.0
    for before, after in zip(weights[:-2], out[:-2]):  # the encoder's arrays are untouched
        np.testing.assert_array_equal(before, after)
    assert host.round_log.timing[RETRAIN_PHASE] >= 0  # timed as a server phase


def test_the_retraining_is_seeded_by_the_round_and_reads_its_settings():
    rng = np.random.default_rng(1)
    features = rng.normal(size=(40, 2)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(np.int64)
    weights = get_weights(two_by_two_model())
    host = Host(two_by_two_model)
    small = training(batch_size=4, lr=0.5)
    first = host.retrain_head(weights, features, labels, small, 2)
    again = host.retrain_head(weights, features, labels, small, 2)
    other_round = host.retrain_head(weights, features, labels, small, 3)
    np.testing.assert_array_equal(first[-2], again[-2])
    assert not np.array_equal(first[-2], other_round[-2])  # another shuffle of the batches
    still = host.retrain_head(weights, features, labels, training(lr=1e-12), 2)
    np.testing.assert_allclose(still[-2], weights[-2], atol=1e-9)


def test_no_features_leave_the_weights_as_they_are():
    weights = get_weights(two_by_two_model())
    out = Host(two_by_two_model).retrain_head(
        weights, np.zeros((0, 2), np.float32), np.zeros(0, np.int64), training(), 1
    )
    assert all(np.array_equal(a, b) for a, b in zip(weights, out))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_momentum_comes_from_the_settings(momentum):
    weights = get_weights(two_by_two_model())
    features = np.array([[1.0, 0.0], [0.0, 1.0]] * 4, dtype=np.float32)
    labels = np.array([0, 1] * 4)
    out = Host(two_by_two_model).retrain_head(
        weights, features, labels, training(epochs=3, batch_size=8, lr=0.1, momentum=momentum), 1
    )
    plain = Host(two_by_two_model).retrain_head(
        weights, features, labels, training(epochs=3, batch_size=8, lr=0.1), 1
    )
    assert np.array_equal(out[-2], plain[-2]) == (momentum == 0.0)
