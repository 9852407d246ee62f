"""Label-skew losses against their definitions and hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from fedimb.core.losses import (
    logit_calibration_loss,
    masked_kl_divergence,
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


# Two samples, three classes, class 2 left out. Kept logits: student (ln 3, 0) and (0, 0),
# teacher (0, 0) and (ln 3, 0), i.e. softmaxes q = (3/4, 1/4), (1/2, 1/2) and
# p = (1/2, 1/2), (3/4, 1/4). KL(p‖q) per sample:
#   ½·ln(½ / ¾) + ½·ln(½ / ¼) = ln 2 − ½ ln 3,   ¾·ln(¾ / ½) + ¼·ln(¼ / ½) = ¾ ln 3 − ln 2,
# summed ¼ ln 3, over the batch of 2: ln 3 / 8. The left-out logits (9, −5; 4, 1) would
# change every softmax if they were kept.
STUDENT = torch.tensor([[math.log(3), 0.0, 9.0], [0.0, 0.0, -5.0]])
TEACHER = torch.tensor([[0.0, 0.0, 4.0], [math.log(3), 0.0, 1.0]])
KEEP = torch.tensor([True, True, False])


def test_masked_kl_hand_value():
    value = masked_kl_divergence(STUDENT, TEACHER, KEEP)
    assert float(value) == pytest.approx(math.log(3) / 8, rel=1e-6)


def test_masked_kl_divides_by_tau_and_multiplies_by_tau_squared():
    # logits doubled at τ = 2: the same softmaxes, so the value is τ² = 4 times the above
    value = masked_kl_divergence(2 * STUDENT, 2 * TEACHER, KEEP, tau=2.0)
    assert float(value) == pytest.approx(4 * math.log(3) / 8, rel=1e-6)


def test_masked_kl_takes_a_mask_per_sample():
    keep = torch.tensor([[True, True, False], [False, True, True]])
    # sample 2 now keeps classes 1, 2: q = softmax(0, −5), p = softmax(0, 1)
    q, p = 1 / (1 + math.exp(-5)), 1 / (1 + math.exp(1))
    second = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    expected = (math.log(2) - math.log(3) / 2 + second) / 2
    assert float(masked_kl_divergence(STUDENT, TEACHER, keep)) == pytest.approx(expected, rel=1e-6)


def test_masked_kl_gradient_reaches_only_the_student_kept_classes():
    student = STUDENT.clone().requires_grad_(True)
    teacher = TEACHER.clone().requires_grad_(True)
    masked_kl_divergence(student, teacher, KEEP).backward()
    assert teacher.grad is None
    assert torch.all(student.grad[:, 2] == 0) and torch.all(student.grad[:, :2] != 0)


def test_a_sample_with_no_kept_class_adds_nothing_and_no_nan():
    student = STUDENT.clone().requires_grad_(True)
    keep = torch.tensor([[True, True, False], [False, False, False]])
    value = masked_kl_divergence(student, TEACHER, keep)
    value.backward()
    # sample 1 alone: (ln 2 − ½ ln 3), still over the batch of 2
    assert value.item() == pytest.approx((math.log(2) - math.log(3) / 2) / 2, rel=1e-6)
    assert torch.isfinite(student.grad).all() and torch.all(student.grad[1] == 0)
    nothing = masked_kl_divergence(STUDENT, TEACHER, torch.zeros(3, dtype=torch.bool))
    assert float(nothing) == 0.0
