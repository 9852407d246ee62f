"""Label-skew losses against their definitions and hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from fedimb.core.losses import (
    logit_calibration_loss,
    relaxed_balanced_softmax_loss,
    restricted_softmax_logits,
    smoothed_prior,
)


def test_smoothed_prior_eq10():
    prior = smoothed_prior([3, 1, 0, 0], eps=0.2)
    assert prior.tolist() == pytest.approx([0.8 * 0.75 + 0.05, 0.8 * 0.25 + 0.05, 0.05, 0.05])
    assert float(prior.sum()) == pytest.approx(1.0)


def test_eps_one_is_cross_entropy():
    torch.manual_seed(0)
    logits, targets = torch.randn(8, 5), torch.randint(0, 5, (8,))
    loss = relaxed_balanced_softmax_loss(logits, targets, [10, 1, 0, 3, 7], eps=1.0)
    assert float(loss) == pytest.approx(
        float(nn.functional.cross_entropy(logits, targets)), abs=1e-6
    )


def test_hand_computed_value():
    # one sample, logits 0, counts [3, 1] and eps 0: p = [0.75, 0.25]; target class 1
    loss = relaxed_balanced_softmax_loss(torch.zeros(1, 2), torch.tensor([1]), [3, 1], eps=0.0)
    assert float(loss) == pytest.approx(-math.log(0.25))
    # eps 0.5: p̂ = 0.5*[0.75, 0.25] + 0.25 = [0.625, 0.375]
    loss = relaxed_balanced_softmax_loss(
        torch.tensor([[1.0, 2.0]]), torch.tensor([0]), [3, 1], eps=0.5
    )
    expected = -math.log(0.625 * math.e / (0.625 * math.e + 0.375 * math.e**2))
    assert float(loss) == pytest.approx(expected, rel=1e-6)


def test_eps_zero_gives_absent_classes_no_mass_and_no_gradient():
    torch.manual_seed(1)
    logits = torch.randn(6, 4, requires_grad=True)
    targets = torch.tensor([0, 1, 0, 1, 1, 0])
    loss = relaxed_balanced_softmax_loss(logits, targets, [5, 3, 0, 0], eps=0.0)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.all(logits.grad[:, 2:] == 0)
    assert torch.any(logits.grad[:, :2] != 0)
    # with a small eps the absent classes get a (small) gradient again
    logits.grad = None
    relaxed_balanced_softmax_loss(logits, targets, [5, 3, 0, 0], eps=0.01).backward()
    assert torch.all(logits.grad[:, 2:] > 0)


def test_balanced_softmax_equals_prior_weighted_softmax():
    torch.manual_seed(2)
    logits, targets = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0])
    counts = torch.tensor([2.0, 5.0, 3.0])
    p = counts / counts.sum()
    probs = p * logits.exp() / (p * logits.exp()).sum(dim=1, keepdim=True)
    expected = -probs[torch.arange(5), targets].log().mean()
    assert float(relaxed_balanced_softmax_loss(logits, targets, counts, 0.0)) == pytest.approx(
        float(expected), rel=1e-5
    )


def test_restricted_softmax_scales_only_missing_classes():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    out = restricted_softmax_logits(logits, [5, 0, 2, 0], alpha=0.5)
    assert out.tolist() == [[1.0, 1.0, 3.0, 2.0]]
    assert restricted_softmax_logits(logits, [5, 0, 2, 0], alpha=1.0).tolist() == logits.tolist()


def test_logit_calibration_hand_value():
    logits = torch.tensor([[0.0, 0.0]])
    counts = [16, 1]  # n^(-1/4) = [0.5, 1]
    loss = logit_calibration_loss(logits, torch.tensor([0]), counts, tau=1.0)
    assert float(loss) == pytest.approx(
        -math.log(math.exp(-0.5) / (math.exp(-0.5) + math.exp(-1.0)))
    )
    assert float(
        logit_calibration_loss(logits, torch.tensor([0]), counts, tau=0.0)
    ) == pytest.approx(math.log(2))
