"""CReFF: the clients' real feature gradients, their per-class mean, the gradient-matching
loss on a two-class toy (by hand), the optimisation of the federated features, and a
two-round run whose tested model is the global encoder with the re-trained classifier."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from clients.creff import (
    GRADIENT_BIASES,
    GRADIENT_CLASSES,
    GRADIENT_WEIGHTS,
    real_feature_gradients,
)
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core import payload
from strategies.base import ClientUpdate
from strategies.creff import class_gradient_means, match_features, matching_distance

# two classes, two feature dimensions, W = 0 and b = 0: softmax gives (½, ½) everywhere
ZERO_W, ZERO_B = np.zeros((2, 2), np.float32), np.zeros(2, np.float32)


def test_real_feature_gradients_are_the_hand_computed_ones():
    # class 0, features (1,2) and (3,4): p − y = (−½, ½) for both, so
    # dL/dW = mean (p − y) xᵀ = [[−½·2, −½·3], [½·2, ½·3]] and dL/db = (−½, ½)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]])
    y = torch.tensor([0, 0, 1])
    grads = real_feature_gradients(
        nn.Identity(),
        torch.zeros(2, 2),
        torch.zeros(2),
        x,
        y,
        batch=2,
        repeats=3,
        generator=torch.Generator().manual_seed(0),
    )
    np.testing.assert_allclose(grads[0][0], [[-1.0, -1.5], [1.0, 1.5]], atol=1e-7)
    np.testing.assert_allclose(grads[0][1], [-0.5, 0.5], atol=1e-7)
    np.testing.assert_allclose(grads[1][0], [[0.0, 0.5], [0.0, -0.5]], atol=1e-7)  # (½,−½)·(0,1)


def test_the_matching_loss_on_a_two_class_toy_is_the_hand_computed_one():
    # one federated feature per class; class 0's is (1, 2): its gradient is
    # ∇W = [[−½, −1], [½, 1]], ∇b = (−½, ½). Real gradient of class 0: ∇W = [[−1, 0], [1, 0]],
    # ∇b = (−½, ½). Rows of W: cos = ½ / (√1.25 · 1) = 1/√5 each; b: cos = 1. So
    # D = 2 (1 − 1/√5) + 0. Class 1 has no real gradient and is left out.
    expected = 2 * (1 - 1 / math.sqrt(5))
    synthetic = [torch.tensor([[-0.5, -1.0], [0.5, 1.0]]), torch.tensor([-0.5, 0.5])]
    real = [torch.tensor([[-1.0, 0.0], [1.0, 0.0]]), torch.tensor([-0.5, 0.5])]
    assert float(matching_distance(synthetic, real)) == pytest.approx(expected, rel=1e-5)
    features = np.array([[1.0, 2.0], [7.0, -3.0]], np.float32)
    target = {0: (real[0].numpy(), real[1].numpy())}
    _, loss = match_features(features, target, ZERO_W, ZERO_B, steps=1, lr=0.1)
    assert loss == pytest.approx(expected, rel=1e-5)  # the loss before the one step


def test_matching_moves_the_matched_features_towards_the_real_gradient_only():
    rng = np.random.default_rng(0)
    features = rng.standard_normal((6, 2)).astype(np.float32)  # 3 per class
    real = (np.array([[-1.0, 0.0], [1.0, 0.0]]), np.array([-0.5, 0.5]))
    w = np.array([[0.3, -0.2], [-0.1, 0.4]], np.float32)
    b = np.zeros(2, np.float32)
    _, before = match_features(features, {0: real}, w, b, steps=1, lr=0.5)
    after_features, _ = match_features(features, {0: real}, w, b, steps=60, lr=0.5)
    _, after = match_features(after_features, {0: real}, w, b, steps=1, lr=0.5)
    assert after < before
    np.testing.assert_array_equal(after_features[3:], features[3:])  # class 1: unmatched


def test_class_gradients_are_averaged_uniformly_over_the_clients_holding_the_class():
    def update(classes, weights, biases):
        arrays = {
            GRADIENT_CLASSES: np.array(classes),
            GRADIENT_WEIGHTS: np.array(weights, np.float32),
            GRADIENT_BIASES: np.array(biases, np.float32),
        }
        return ClientUpdate(0, [], 100, payload.pack(arrays))

    updates = [
        update([0], [[[1.0, 0.0], [0.0, 0.0]]], [[0.2, 0.0]]),
        update([0, 1], [[[3.0, 0.0], [0.0, 0.0]], [[0.0, 5.0], [0.0, 0.0]]], [[0.4, 0], [0, 1]]),
    ]
    means = class_gradient_means(updates)
    np.testing.assert_allclose(means[0][0], [[2.0, 0.0], [0.0, 0.0]])  # (1 + 3) / 2
    np.testing.assert_allclose(means[0][1], [0.3, 0.0])
    np.testing.assert_allclose(means[1][0], [[0.0, 5.0], [0.0, 0.0]])  # one client


def test_two_rounds_test_the_global_encoder_with_the_retrained_classifier():
    fed = InProcessFederation(
        [
            "method=creff",
            "dataset=digits",
            "num_clients=3",
            "num_rounds=2",
            "dropout=none",
            "train.local_epochs=1",
            "method.strategy.retrain_epochs=5",
            "method.strategy.match_steps=5",
        ]
    )
    strategy = fed.strategy
    features0 = strategy.federated_features.copy()
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["rejected"] == 0
    assert record["extra"]["matched_classes"] > 0 and math.isfinite(
        record["extra"]["matching_loss"]
    )
    assert record["timing"]["match_features"] >= 0 and record["timing"]["retrain_head"] >= 0
    assert not np.array_equal(features0, strategy.federated_features)
    global_weights = parameters_to_ndarrays(fed.parameters)  # FedAvg's model goes on training
    tested = strategy.evaluation_weights(fed.parameters)
    head = set(strategy.head_indices)
    for i, (a, b) in enumerate(zip(global_weights, tested)):
        assert np.array_equal(a, b) == (i not in head)
    assert 0 <= record["test"]["accuracy"] <= 1


def test_a_bias_gradient_beyond_its_bound_is_rejected():
    fed = InProcessFederation(["method=creff", "dataset=digits", "num_clients=3", "dropout=none"])
    c, d = fed.run.num_classes, fed.strategy.initial_head[0].shape[1]
    named = {
        GRADIENT_CLASSES: np.array([0]),
        GRADIENT_WEIGHTS: np.zeros((1, c, d), np.float32),
        GRADIENT_BIASES: np.full((1, c), 2.0, np.float32),
    }
    assert "beyond" in fed.strategy.check_payloads(named, 10)
    named[GRADIENT_BIASES] = np.zeros((1, c), np.float32)
    assert fed.strategy.check_payloads(named, 10) is None
