"""FedUV: the variance and uniformity terms on batches of 2-4 samples worked out by hand,
the client's loss, and two rounds in process."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from clients.feduv import (
    FedUVClient,
    classifier_variance_loss,
    uniformity_loss,
    variance_threshold,
)
from tests.conftest import checked_rounds

E = math.exp


@pytest.mark.parametrize("num_classes", [3, 10, 100])
def test_the_threshold_is_the_std_of_an_identity_column(num_classes):
    # one 1 and C − 1 zeros: unbiased variance 1/C
    assert variance_threshold(num_classes) == pytest.approx(1 / math.sqrt(num_classes))
    reference = torch.eye(num_classes, dtype=torch.float64).std(dim=0).mean().item()
    assert variance_threshold(num_classes) == pytest.approx(reference, rel=1e-12)


def test_variance_below_the_threshold_in_every_class():
    # softmax(log p) = p. Every column holds 1/2, 1/4, 1/4: mean 1/3, squared deviations
    # 1/36 + 2/144 = 1/24, unbiased variance 1/48, s_c = 1/√48 = 1/(4√3); γ = 1/√3, so
    # every hinge is 1/√3 − 1/(4√3) = 3/(4√3) = √3/4, and so is their mean.
    p = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
    assert classifier_variance_loss(p.log()).item() == pytest.approx(math.sqrt(3) / 4, rel=1e-5)


def test_the_hinge_drops_classes_that_spread_beyond_the_threshold():
    # two samples: unbiased s_c = |p_1c − p_2c|/√2. Columns 0 and 1: 0.85/√2 ≈ 0.601 >
    # γ = 1/√3 ≈ 0.577, hinge 0; column 2: s = 0, hinge γ. L_V = γ/3.
    p = torch.tensor([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05]])
    assert classifier_variance_loss(p.log()).item() == pytest.approx(1 / (3 * math.sqrt(3)))


def test_identical_outputs_cost_the_whole_threshold_with_a_finite_gradient():
    logits = torch.zeros(4, 5, requires_grad=True)
    value = classifier_variance_loss(logits)
    value.backward()
    assert value.item() == pytest.approx(1 / math.sqrt(5))
    assert torch.isfinite(logits.grad).all()


# Features 0, 1, 3 on a line: squared distances (pdist order) 1, 9, 4; median σ = 4.
LINE = [[0.0], [1.0], [3.0]]


def test_uniformity_is_the_mean_kernel_with_the_median_bandwidth():
    expected = (E(-1 / 4) + E(-9 / 4) + E(-4 / 4)) / 3
    assert uniformity_loss(torch.tensor(LINE)).item() == pytest.approx(expected, rel=1e-6)


def test_the_bandwidth_is_differentiated_too():
    # L = (e^{-d01/σ} + e^{-d02/σ} + e^{-d12/σ})/3 with σ = d12 (the last term is e^{-1}).
    # z0 moves d01 (∂/∂z0 = −2) and d02 (−6): (1/6)e^{-1/4} + (1/2)e^{-9/4}.
    # z2 moves d02 (+6) and σ = d12 (+4); ∂L/∂σ = (1/3)(1/16·e^{-1/4} + 9/16·e^{-9/4}):
    # −(1/2)e^{-9/4} + (1/12)e^{-1/4} + (3/4)e^{-9/4} = (1/12)e^{-1/4} + (1/4)e^{-9/4}
    # (a detached σ would give −(1/2)e^{-9/4}).
    z = torch.tensor(LINE, dtype=torch.float64, requires_grad=True)
    uniformity_loss(z).backward()
    assert z.grad[0, 0].item() == pytest.approx(E(-1 / 4) / 6 + E(-9 / 4) / 2, rel=1e-9)
    assert z.grad[2, 0].item() == pytest.approx(E(-1 / 4) / 12 + E(-9 / 4) / 4, rel=1e-9)


def test_coinciding_pairs_count_in_the_mean_but_not_in_the_median():
    # 0, 0, 1, 3: squared distances 0, 1, 9, 1, 9, 4; the median of the non-zero ones
    # (1, 1, 4, 9, 9) is 4; the pair at distance 0 adds e^0 = 1 to the mean of six.
    z = torch.tensor([[0.0], [0.0], [1.0], [3.0]])
    expected = (1 + 2 * E(-1 / 4) + 2 * E(-9 / 4) + E(-1)) / 6
    assert uniformity_loss(z).item() == pytest.approx(expected, rel=1e-6)


def test_an_even_count_takes_the_lower_middle_distance():
    # 0, 1, 3, 7: squared distances 1, 9, 49, 4, 36, 16; sorted 1, 4, 9, 16, 36, 49: σ = 9
    # (torch.median, as the authors' code), not the midpoint 12.5
    z = torch.tensor([[0.0], [1.0], [3.0], [7.0]])
    expected = sum(E(-d / 9) for d in (1, 9, 49, 4, 36, 16)) / 6
    assert uniformity_loss(z).item() == pytest.approx(expected, rel=1e-6)


def test_raw_and_normalised_features():
    z = torch.tensor([[3.0, 4.0], [0.0, 2.0], [-1.0, 0.0]])
    # raw: squared distances 9 + 4 = 13, 16 + 16 = 32, 1 + 4 = 5; σ = 13
    raw = (E(-1) + E(-32 / 13) + E(-5 / 13)) / 3
    assert uniformity_loss(z).item() == pytest.approx(raw, rel=1e-6)
    # on the sphere: (0.6, 0.8), (0, 1), (−1, 0): 0.36 + 0.04 = 0.4, 2.56 + 0.64 = 3.2,
    # 1 + 1 = 2; σ = 2
    sphere = (E(-0.2) + E(-1.6) + E(-1)) / 3
    assert uniformity_loss(z, normalize=True).item() == pytest.approx(sphere, rel=1e-6)


def test_features_that_all_coincide_give_one_and_no_gradient():
    z = torch.ones(3, 4, requires_grad=True)
    value = uniformity_loss(z)
    value.backward()
    assert value.item() == 1.0
    assert torch.equal(z.grad, torch.zeros_like(z))


def test_a_single_sample_has_no_terms_but_keeps_the_graph():
    x = torch.ones(1, 3, requires_grad=True)
    for value in (classifier_variance_loss(x), uniformity_loss(x)):
        assert value.item() == 0.0 and value.requires_grad


class _Encoder(nn.Module):
    def forward(self, x):
        return x


def test_client_loss_is_cross_entropy_plus_the_weighted_terms():
    client = object.__new__(FedUVClient)
    model = nn.Module()
    model.encoder = _Encoder()
    model.head = nn.Linear(1, 3)
    with torch.no_grad():  # logits 0: CE = log 3, every s_c = 0, L_V = γ = 1/√3
        model.head.weight.zero_()
        model.head.bias.zero_()
    client.model = model
    client.settings = FedUVClient.Settings(
        variance_weight=2.0, uniformity_weight=3.0, normalize_features=False
    )
    uniformity = (E(-1 / 4) + E(-9 / 4) + E(-1)) / 3  # the features LINE
    expected = math.log(3) + 2.0 / math.sqrt(3) + 3.0 * uniformity
    value = client.loss(torch.tensor(LINE), torch.tensor([0, 1, 2]))
    assert value.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("normalize", ["false", "true"])
def test_two_rounds_in_process(normalize):
    checked_rounds(["method=feduv", f"method.client.normalize_features={normalize}"])
