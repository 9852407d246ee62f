"""FedVLS client (Guo et al., "Exploring Vacant Classes in Label-Skewed Federated
Learning", AAAI 2025): the local loss is a prior-calibrated cross-entropy, plus a logit
suppression term on the non-label logits, plus λ times a distillation from the received
global model restricted to the client's vacant classes (those it has no sample of). The
server is FedAvg's.

With p(c) = n_c / Σ n the client's label distribution (``label_counts``, its training
share), z the local logits, zᵍ the frozen global model's, O = {c : n_c = 0}, N the batch
size and C the number of classes, following the authors' ``clientVLS``
(krumpguo/FedVLS, ``system/flcore/clients/clientvls.py``):

- L_cal = CE(z + log(p + 10⁻⁹), y) (``PriorCELoss``; Algorithm 1 line 14 of the
  technical appendix);
- L_dis = (1/N)·Σ_n KL( softmax(zᵍ_n[O]) ‖ softmax(z_n[O]) ) (``VLSloss``, line 15;
  0 for a client with no vacant class);
- L_sup = Σ_c p(c)·(logsumexp_n s_nc − log N), s_nc = [y_n ≠ c]·(z_nc − log(p(c) + 10⁻⁹)
  + log(1/C + 10⁻⁹)) (``new_LADEloss``): the label's own entries are zeroed, not left
  out, so each adds e⁰ = 1 inside the sum, as the authors' code does; lines 16–17 write
  log E_n [y_n ≠ c]·e^{z_nc} without the prior shift;
- L = L_cal + w·L_sup + λ·L_dis, w = 0.005 in the authors' code (a constant there;
  Algorithm 1 has no weight on the term), λ = ``lam``.

The global model is the one received this round, copied before the first step and kept
in evaluation mode without gradients.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import torch
from torch import nn

from clients.base import PersonalEvaluation
from clients.base_settings import setting
from clients.base_shared import ClassCountsClient
from fedimb.core.errors import at_least
from fedimb.core.losses import masked_kl_divergence

#: the authors' guard in log(p + eps) for the classes with no sample
EPS = 1e-9


def prior_calibrated_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, prior: torch.Tensor
) -> torch.Tensor:
    """L_cal: CE(z + log(p + 10⁻⁹), y), the softmax weighted by the local label prior."""
    return nn.functional.cross_entropy(logits + torch.log(prior + EPS), targets)


def logit_suppression_loss(
    logits: torch.Tensor, targets: torch.Tensor, prior: torch.Tensor
) -> torch.Tensor:
    """L_sup (unweighted): Σ_c p(c)·log mean_n e^{s_nc}, s as in the module docstring."""
    n, num_classes = logits.shape
    shifted = logits - torch.log(prior + EPS) + math.log(1.0 / num_classes + EPS)
    not_label = targets[:, None] != torch.arange(num_classes, device=logits.device)
    per_class = torch.logsumexp(shifted * not_label, dim=0) - math.log(n)
    return (prior * per_class).sum()


class FedVLSClient(PersonalEvaluation, ClassCountsClient):
    """Calibrated cross-entropy, logit suppression and vacant-class distillation."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        lam: float = setting(at_least(0))  # λ, the weight of the vacant-class distillation
        suppression_weight: float = setting(at_least(0))  # w, the weight of L_sup

    def before_training(self, config):
        super().before_training(config)  # reads the settings, keeps the class counts
        self.prior = self.counts / self.counts.sum()
        self.vacant = self.counts == 0
        self.global_model = copy.deepcopy(self.model).eval().requires_grad_(False)

    def loss(self, x, y):
        _, calibrated, suppression, distillation = self.terms(x, y)
        return calibrated + suppression + distillation

    def terms(self, x, y):
        """The logits and the loss's three terms as they add up: L_cal, w·L_sup, λ·L_dis
        (Algorithm 1, lines 14-17; one method so that a measurement reads what trains)."""
        logits = self.model(x)
        with torch.no_grad():
            global_logits = self.global_model(x)
        settings = self.settings
        return (
            logits,
            prior_calibrated_cross_entropy(logits, y, self.prior),
            settings.suppression_weight * logit_suppression_loss(logits, y, self.prior),
            settings.lam * masked_kl_divergence(logits, global_logits, self.vacant),
        )
