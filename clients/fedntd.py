"""FedNTD client (Lee et al., "Preservation of the Global Knowledge by Not-True
Distillation in Federated Learning", NeurIPS 2022): cross-entropy plus β·L_NTD, a
distillation from the received global model to the local one on the not-true classes
only (every class but the sample's label), so that local training on skewed data keeps
the global model's view of the classes the sample does not belong to. The server is
FedAvg's.

    L = CE(z, y) + β·τ²·(1/N)·Σ_n KL( softmax(z̃ᵍ_n / τ) ‖ softmax(z̃_n / τ) ),

z the local model's logits, zᵍ the frozen global model's, z̃ the logits with the label's
entry removed (C − 1 of them), N the batch size. This is the authors' code
(Lee-Gihun/FedNTD, ``algorithms/fedntd/criterion.py`` ``NTD_Loss``): ``KLDivLoss`` with
``reduction="batchmean"`` and the τ² factor of Hinton et al.'s distillation, which the
paper's L_NTD does not write. The global model is the one received this round, copied
before the first step and kept in evaluation mode without gradients.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from clients.base_settings import setting
from clients.base_shared import AveragingClient
from fedimb.core.errors import at_least
from fedimb.core.losses import masked_kl_divergence


def not_true_distillation_loss(
    logits: torch.Tensor, global_logits: torch.Tensor, targets: torch.Tensor, tau: float
) -> torch.Tensor:
    """τ²·batchmean KL from the global to the local softmax(·/τ) over the not-true classes."""
    not_true = torch.ones_like(logits, dtype=torch.bool)
    not_true[torch.arange(len(targets), device=logits.device), targets] = False
    return masked_kl_divergence(logits, global_logits, not_true, tau)


class FedNTDClient(AveragingClient):
    """FedAvg's client with the not-true distillation term added to its loss."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        beta: float = setting(at_least(0))  # β, the weight of L_NTD
        tau: float = setting(at_least(0, strict=True))  # τ, the softmax temperature

    def before_training(self, config):
        self.global_model = copy.deepcopy(self.model).eval().requires_grad_(False)

    def loss(self, x, y):
        logits = self.model(x)
        with torch.no_grad():
            global_logits = self.global_model(x)
        distillation = not_true_distillation_loss(logits, global_logits, y, self.settings.tau)
        return nn.functional.cross_entropy(logits, y) + self.settings.beta * distillation
