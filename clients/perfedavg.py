"""Per-FedAvg client (Fallah et al., NeurIPS 2020, Algorithm 1).

Every local step takes the loop's mini-batch D and two more batches D', D'' drawn
independently from the local data (the paper's three independent batches):

- inner step: w' = w − α·∇f(w; D);
- ``variant: fo`` (Per-FedAvg FO): the optimiser (outer rate β = ``train.lr``) applies
  ∇f(w'; D') at w, the first-order approximation of the MAML gradient;
- ``variant: hf`` (Per-FedAvg HF): it applies (I − α·∇²f(w; D''))·∇f(w'; D'), the
  Hessian-vector product computed exactly by double back-propagation (the paper
  approximates it by finite differences; autograd gives the product itself).

The MAML gradient (I − αH)∇f(w') points uphill along every curvature direction with
α·λ > 1, and FO drops the factor altogether; the paper assumes α ≤ 1/L. The personal
model is the global model after one SGD step with α on a local mini-batch (§5).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from clients.base_settings import setting
from fedimb.core import protocol
from fedimb.core.curvature import hessian_vector_product, trainable
from fedimb.core.errors import at_least, one_of
from fedimb.core.training import batch_indices, seeded_generator


class PerFedAvgClient(PersonalEvaluation, BaseClient):
    """MAML-style local update."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        variant: str = setting(one_of("fo", "hf"))  # first-order | Hessian-free
        alpha: float = setting(at_least(0, strict=True))  # α, the inner step size

    def before_training(self, config):
        settings = self.settings_of(config)
        self.alpha, self.variant = settings.alpha, settings.variant
        self.batch_size = int(config["batch_size"])
        # the extra batches D', D'' have their own seeded stream (any runtime draws the same)
        self.extra_batches = seeded_generator(
            int(config.get(protocol.SEED, 0)),
            int(config.get(protocol.SERVER_ROUND, 0)),
            self.data.partition_id,
            1,
        )

    def draw_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A mini-batch drawn from the local data independently of the loop's order."""
        idx = self.data.indices
        pick = idx[
            torch.randint(len(idx), (min(self.batch_size, len(idx)),), generator=self.extra_batches)
        ]
        return self.data.x[pick].to(self.device), self.data.y[pick].to(self.device)

    def _inner_step(self, x, y) -> None:
        params = trainable(self.model)
        grads = torch.autograd.grad(nn.functional.cross_entropy(self.model(x), y), params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(self.alpha * g)

    def loss(self, x, y):
        """f(w'; D') with w' = w − α∇f(w; D) set in place; :meth:`after_backward` puts w
        back and keeps the gradient taken at w'."""
        self._start = [p.detach().clone() for p in trainable(self.model)]
        self._inner_step(x, y)
        x2, y2 = self.draw_batch()
        return nn.functional.cross_entropy(self.model(x2), y2)

    def after_backward(self):
        params = trainable(self.model)
        with torch.no_grad():
            for p, start in zip(params, self._start):
                p.copy_(start)
        if self.variant == "hf":
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            product = hessian_vector_product(self.model, *self.draw_batch(), grads)  # on D''
            with torch.no_grad():
                for p, hv in zip(params, product):
                    if p.grad is not None:
                        p.grad.sub_(self.alpha * hv)

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        self.alpha = self.settings_of(config).alpha
        idx = next(
            batch_indices(self.data.indices, int(config["batch_size"]), self.generator(config))
        )
        self.model.train()
        self._inner_step(self.data.x[idx].to(self.device), self.data.y[idx].to(self.device))
        return self.model
