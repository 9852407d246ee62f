"""FedNTD: the not-true distillation on a 2-sample, 3-class batch worked out by hand,
against a direct reading of the authors' loss, the client's loss, the frozen global copy,
and two rounds in process."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from clients.fedntd import FedNTDClient, not_true_distillation_loss

LN3 = math.log(3)
# τ = 2. Sample 1 has label 0, sample 2 label 2; the label's logit is dropped, and the
# remaining two, divided by τ, are
#   sample 1: local (0, 0)/2 -> q = (1/2, 1/2);   global (2 ln 3, 0)/2 -> p = (3/4, 1/4)
#   sample 2: local (2 ln 3, 0)/2 -> q = (3/4, 1/4);   global (0, 0)/2 -> p = (1/2, 1/2)
# KL(p‖q): ¾·ln(¾/½) + ¼·ln(¼/½) = ¾ ln 3 − ln 2;   ½·ln(½/¾) + ½·ln(½/¼) = ln 2 − ½ ln 3.
# Sum ¼ ln 3, batchmean (/2) ln 3 / 8, times τ² = 4: ln 3 / 2 ≈ 0.5493.
# The labels' own logits (5 and 9, 7 and −4) would change every softmax if they were kept.
LOCAL = torch.tensor([[5.0, 0.0, 0.0], [2 * LN3, 0.0, 7.0]])
GLOBAL = torch.tensor([[9.0, 2 * LN3, 0.0], [0.0, 0.0, -4.0]])
LABELS = torch.tensor([0, 2])
NTD = LN3 / 2


def test_not_true_distillation_hand_value():
    value = not_true_distillation_loss(LOCAL, GLOBAL, LABELS, tau=2.0)
    assert value.item() == pytest.approx(NTD, rel=1e-6)


def test_it_matches_the_loss_read_as_written():
    # the true class removed by indexing, softmaxes over the C − 1 rest, PyTorch's
    # KLDivLoss in batchmean, times τ²
    torch.manual_seed(0)
    logits, global_logits = torch.randn(6, 5), torch.randn(6, 5)
    targets, tau = torch.tensor([0, 4, 2, 2, 1, 3]), 3.0
    rest = torch.arange(5)[None, :] != targets[:, None]
    local_rest, global_rest = logits[rest].view(6, 4), global_logits[rest].view(6, 4)
    expected = tau**2 * nn.functional.kl_div(
        torch.log_softmax(local_rest / tau, dim=1),
        torch.softmax(global_rest / tau, dim=1),
        reduction="batchmean",
    )
    value = not_true_distillation_loss(logits, global_logits, targets, tau)
    assert value.item() == pytest.approx(expected.item(), rel=1e-5)


class _Lookup(nn.Module):
    """A model that answers ``key`` with the logits ``value``."""

    def __init__(self, key, value):
        super().__init__()
        self.key, self.value = key, value

    def forward(self, x):
        assert torch.equal(x, self.key)
        return self.value


def test_client_loss_is_cross_entropy_plus_beta_times_ntd():
    client = object.__new__(FedNTDClient)
    client.model = _Lookup(LOCAL, LOCAL)
    client.global_model = _Lookup(LOCAL, GLOBAL)
    client.settings = FedNTDClient.Settings(beta=0.5, tau=2.0)
    # CE: −log softmax(5, 0, 0)[0] = log(1 + 2e⁻⁵); −log softmax(2 ln 3, 0, 7)[2] = log(1 + 10e⁻⁷)
    ce = (math.log1p(2 * math.exp(-5)) + math.log1p(10 * math.exp(-7))) / 2
    assert client.loss(LOCAL, LABELS).item() == pytest.approx(ce + 0.5 * NTD, rel=1e-6)


def test_the_global_copy_is_frozen_at_the_received_weights():
    client = object.__new__(FedNTDClient)
    client.model = nn.Linear(3, 2)
    client.before_training({})
    received = [p.detach().clone() for p in client.model.parameters()]
    with torch.no_grad():
        for p in client.model.parameters():
            p.add_(1.0)
    for p, kept in zip(client.global_model.parameters(), received):
        assert torch.equal(p, kept) and not p.requires_grad
    assert not client.global_model.training
