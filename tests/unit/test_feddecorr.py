"""FedDecorr: the decorrelation term on a 4 × 3 batch whose correlation matrix is worked
out by hand, the exact ratio of the two forms' gradients, the client's loss, and two
rounds in process."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from clients.feddecorr import (
    FedDecorrClient,
    authors_decorrelation_loss,
    decorrelation_loss,
)
from tests.conftest import checked_rounds

# Columns a = (1, -1, 1, -1), b = (1, 1, -1, -1), c = (1, 1, 1, -3), shifted and scaled
# (a + 2, 3b + 5, c - 1): correlation ignores both. Population moments: mean 0 and
# variance 1, 1, 3; E[ab] = 0, E[ac] = E[bc] = 1, so
#   K = [[1, 0, 1/√3], [0, 1, 1/√3], [1/√3, 1/√3, 1]],  ‖K‖²_F = 3 + 4/3 = 13/3.
Z = torch.tensor(
    [
        [3.0, 8.0, 0.0],
        [1.0, 8.0, 0.0],
        [3.0, 2.0, 0.0],
        [1.0, 2.0, -4.0],
    ]
)


def test_paper_form_is_the_squared_frobenius_norm_over_d_squared():
    assert decorrelation_loss(Z).item() == pytest.approx((13 / 3) / 9, rel=1e-6)  # 13/27


def test_authors_form_hand_value():
    # unbiased variance: ẐᵀẐ = (N − 1)·K = 3K, off-diagonal entries 0, √3, √3 (twice each);
    # squared mean (0 + 3 + 3)·2/6 = 2, divided by N = 4
    assert authors_decorrelation_loss(Z).item() == pytest.approx(0.5, rel=1e-6)


def test_the_gradients_of_the_two_forms_differ_by_the_stated_factor():
    # the unbiased z-scores are sqrt((N − 1)/N) times the population ones, so the authors'
    # ẐᵀẐ = (N − 1)·K and their form is (N − 1)²/N · Σ_{i≠j} K_ij² / (d(d − 1)); the paper
    # form is (Σ_{i≠j} K_ij² + Σ_i K_ii²)/d² with K_ii = 1 (no gradient). Gradient ratio:
    # (N − 1)²/N · d²/(d(d − 1)) = (N − 1)²/N · d/(d − 1); N = 4, d = 3: 9/4 · 3/2 = 27/8
    paper = Z.double().requires_grad_(True)
    authors = Z.double().requires_grad_(True)
    decorrelation_loss(paper).backward()
    authors_decorrelation_loss(authors).backward()
    assert paper.grad.abs().max() > 0.01  # not a zero gradient matched by a zero one
    # atol: the 1e-8 variance guard leaves entries of order 1e-9 that are 0 without it
    assert torch.allclose(authors.grad, 27 / 8 * paper.grad, rtol=1e-6, atol=1e-8)


def test_uncorrelated_columns_leave_only_the_diagonal():
    z = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    assert decorrelation_loss(z).item() == pytest.approx(2 / 4, rel=1e-6)  # ‖I‖²_F / d²
    assert authors_decorrelation_loss(z).item() == pytest.approx(0.0, abs=1e-12)


def test_a_single_sample_has_no_term_but_keeps_the_graph():
    z = torch.ones(1, 3, requires_grad=True)
    for form in (decorrelation_loss, authors_decorrelation_loss):
        value = form(z)
        assert value.item() == 0.0 and value.requires_grad


class _Encoder(nn.Module):
    def forward(self, x):
        return x


def test_client_loss_is_cross_entropy_plus_beta_times_the_term():
    client = object.__new__(FedDecorrClient)
    model = nn.Module()
    model.encoder = _Encoder()
    model.head = nn.Linear(3, 2)
    with torch.no_grad():  # logits = (z_0, 0): cross-entropies worked out below
        model.head.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
        model.head.bias.zero_()
    client.model = model
    client.settings = FedDecorrClient.Settings(beta=2.0, loss_form="paper")
    y = torch.tensor([0, 1, 0, 1])
    # −log softmax of (z_0, 0): rows 1 and 3 (class 0, z_0 = 3) give log(1 + e^-3),
    # rows 2 and 4 (class 1, z_0 = 1) give log(1 + e)
    ce = (2 * math.log1p(math.exp(-3.0)) + 2 * math.log1p(math.e)) / 4
    assert client.loss(Z, y).item() == pytest.approx(ce + 2.0 * 13 / 27, rel=1e-6)


@pytest.mark.parametrize("form", ["paper", "authors_code"])
def test_two_rounds_in_process(form):
    checked_rounds(["method=feddecorr", f"method.client.loss_form={form}"])
