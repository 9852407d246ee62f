"""FedProx client (Li et al., MLSys 2020, eq. 2): the local objective plus the proximal
term μ/2·||w − w^t||² that keeps the local model near the received global model w^t.

The term's gradient μ(w − w^t) is added to the gradients after each backward pass
(cheaper than differentiating the term); ``train_loss`` reports the data loss only.
"""

from __future__ import annotations

import dataclasses

import torch

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.core.errors import at_least


class FedProxClient(BaseClient):
    """Cross-entropy plus the proximal term."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        mu: float = setting(at_least(0))  # μ, the proximal weight

    def before_training(self, config):
        self.mu = self.settings_of(config).mu
        self.anchor = [p.detach().clone() for p in self.model.parameters()]

    @torch.no_grad()
    def after_backward(self):
        for p, anchor in zip(self.model.parameters(), self.anchor):
            if p.grad is not None:
                p.grad.add_(p - anchor, alpha=self.mu)
