"""FedVLS: its three terms on a 2-sample, 4-class batch worked out by hand, the client's
sum of them with its vacant classes read from the class counts, and two rounds in process."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from clients.fedvls import FedVLSClient, logit_suppression_loss, prior_calibrated_cross_entropy
from fedimb.core.losses import masked_kl_divergence

LN2, LN3 = math.log(2), math.log(3)
# Class counts (3, 1, 0, 0): prior p = (3/4, 1/4, 0, 0), vacant classes {2, 3}, C = 4.
# Labels (0, 1).
COUNTS = np.array([3, 1, 0, 0])
PRIOR = torch.tensor([0.75, 0.25, 0.0, 0.0])
LABELS = torch.tensor([0, 1])
LOCAL = torch.tensor([[0.0, LN3, LN3, 0.0], [0.0, 0.0, 0.0, 0.0]])
GLOBAL = torch.tensor([[7.0, -2.0, 0.0, 0.0], [-1.0, 4.0, LN3, 0.0]])

# L_cal: the logits plus log(p + 1e-9), i.e. e^z weighted by (3/4, 1/4, ~0, ~0):
#   sample 1 (label 0): p·e^z = (¾·1, ¼·3, ~0, ~0) -> −log(¾ / (3/2)) = ln 2
#   sample 2 (label 1): p·e^z = (¾, ¼, ~0, ~0) -> −log(¼ / 1) = ln 4;   mean 3/2·ln 2
CAL = 1.5 * LN2
# L_sup: s_nc = [y_n ≠ c]·(z_nc − log p(c) + log ¼); the shift is −ln 3 for class 0 and 0
# for class 1 (the vacant classes have weight p(c) = 0):
#   class 0: sample 1 is its label -> s = 0, e⁰ = 1; sample 2: 0 − ln 3 -> ⅓;
#            log((1 + ⅓)/2) = ln(2/3)
#   class 1: sample 1: ln 3 + 0 -> 3; sample 2 is its label -> 1; log((3 + 1)/2) = ln 2
#   L_sup = ¾·ln(2/3) + ¼·ln 2 ≈ −0.1308
SUP = 0.75 * math.log(2 / 3) + 0.25 * LN2
# L_dis over the vacant classes {2, 3}: local (ln 3, 0) and (0, 0) -> q = (¾, ¼), (½, ½);
# global (0, 0) and (ln 3, 0) -> p = (½, ½), (¾, ¼); KL(p‖q) = (ln 2 − ½ ln 3) +
# (¾ ln 3 − ln 2) = ¼ ln 3, over the batch of 2: ln 3 / 8. The held classes' global
# logits (7, −2; −1, 4) would change both softmaxes if they took part.
DIS = LN3 / 8


def test_prior_calibrated_cross_entropy_hand_value():
    value = prior_calibrated_cross_entropy(LOCAL, LABELS, PRIOR)
    assert value.item() == pytest.approx(CAL, rel=1e-6)


def test_logit_suppression_hand_value():
    assert logit_suppression_loss(LOCAL, LABELS, PRIOR).item() == pytest.approx(SUP, rel=1e-6)


def test_logit_suppression_pushes_the_non_label_logits_down_only():
    logits = LOCAL.clone().requires_grad_(True)
    logit_suppression_loss(logits, LABELS, PRIOR).backward()
    grad = logits.grad
    # the label's own entries are zeroed (no gradient), the vacant classes weigh 0
    assert grad[0, 0] == 0 and grad[1, 1] == 0 and torch.all(grad[:, 2:] == 0)
    assert grad[1, 0] > 0 and grad[0, 1] > 0  # descent lowers them


def test_vacant_class_distillation_hand_value():
    value = masked_kl_divergence(LOCAL, GLOBAL, PRIOR == 0)
    assert value.item() == pytest.approx(DIS, rel=1e-6)


class _Lookup(nn.Module):
    """A model that answers ``key`` with the logits ``value``."""

    def __init__(self, key, value):
        super().__init__()
        self.key, self.value = key, value

    def forward(self, x):
        assert torch.equal(x, self.key)
        return self.value


def _client(lam, weight, counts=COUNTS):
    client = object.__new__(FedVLSClient)
    client.model = _Lookup(LOCAL, LOCAL)
    client.device = torch.device("cpu")
    client.data = type("Data", (), {"label_counts": counts})()
    client.before_training({"lam": lam, "suppression_weight": weight})
    client.global_model = _Lookup(LOCAL, GLOBAL)
    return client


def test_client_loss_sums_the_three_terms():
    client = _client(lam=2.0, weight=0.5)
    assert client.vacant.tolist() == [False, False, True, True]
    expected = CAL + 0.5 * SUP + 2.0 * DIS
    assert client.loss(LOCAL, LABELS).item() == pytest.approx(expected, rel=1e-6)


def test_a_client_with_every_class_has_no_distillation():
    client = _client(lam=5.0, weight=0.0, counts=np.array([1, 1, 1, 1]))
    # uniform prior: L_cal is the plain cross-entropy (the 1e-9 aside)
    expected = nn.functional.cross_entropy(LOCAL, LABELS).item()
    assert client.loss(LOCAL, LABELS).item() == pytest.approx(expected, rel=1e-6)
