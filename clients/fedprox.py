"""FedProx client (Li et al., MLSys 2020, eq. 2): the local objective plus the proximal
term μ/2·||w − w^t||² that keeps the local model near the received global model w^t."""

from __future__ import annotations

from clients.base import BaseClient


class FedProxClient(BaseClient):
    """Cross-entropy plus the proximal term."""

    def before_training(self, config):
        self.mu = float(config["mu"])
        self.anchor = [p.detach().clone() for p in self.model.parameters()]

    def loss(self, x, y):
        proximal = sum(((p - a) ** 2).sum() for p, a in zip(self.model.parameters(), self.anchor))
        return super().loss(x, y) + 0.5 * self.mu * proximal
