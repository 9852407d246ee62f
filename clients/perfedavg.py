"""Per-FedAvg client (Fallah et al., NeurIPS 2020), first-order version (Per-FedAvg FO).

Each step splits the mini-batch in two: a plain SGD step with the inner rate α on the
first half gives w' = w − α∇f(w; D1); the gradient of f(w'; D2) on the second half is
then applied to w (the first-order MAML approximation) by the optimiser with the outer
rate β (``train.lr``). The personal model is the global model after one SGD step with
α on a local mini-batch (the paper's evaluation)."""

from __future__ import annotations

import torch
from torch import nn

from clients.base import BaseClient
from fedimb.training import batch_indices


class PerFedAvgClient(BaseClient):
    """MAML-style local update."""

    def before_training(self, config):
        self.alpha = float(config["alpha"])

    def _inner_step(self, x, y) -> None:
        params = [p for p in self.model.parameters() if p.requires_grad]
        grads = torch.autograd.grad(nn.functional.cross_entropy(self.model(x), y), params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(self.alpha * g)

    def loss(self, x, y):
        if len(y) < 2:
            self._saved = None
            return super().loss(x, y)
        half = len(y) // 2
        self._saved = [p.detach().clone() for p in self.model.parameters()]
        self._inner_step(x[:half], y[:half])
        return nn.functional.cross_entropy(self.model(x[half:]), y[half:])

    @torch.no_grad()
    def after_backward(self):
        if self._saved is not None:  # back to w; the gradient taken at w' stays
            for p, saved in zip(self.model.parameters(), self._saved):
                p.copy_(saved)

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        self.alpha = float(config["alpha"])
        idx = next(batch_indices(self.data.indices, int(config["batch_size"]), self.generator(config)))
        self.model.train()
        self._inner_step(self.data.x[idx].to(self.device), self.data.y[idx].to(self.device))
        return self.model
