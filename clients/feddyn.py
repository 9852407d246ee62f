"""FedDyn client (Acar et al., ICLR 2021, Algorithm 1): minimises
L_k(θ) − ⟨g_k, θ⟩ + α/2·‖θ − θ^{t−1}‖², i.e. adds −g_k + α(θ − θ^{t−1}) to every
gradient, then updates its linear term g_k ← g_k − α(θ_k^t − θ^{t−1}) (kept in
its client state, starting at zero)."""

from __future__ import annotations

import dataclasses

import torch

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.core.errors import at_least

STATE = "feddyn_linear"


class FedDynClient(BaseClient):
    """Dynamically regularised local objective."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        alpha: float = setting(at_least(0, strict=True))  # α (the server reads it too)

    def before_training(self, config):
        self.alpha = self.settings_of(config).alpha
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.server = [p.detach().clone() for p in params]
        stored = self.load_state(STATE)
        self.linear = (
            [torch.as_tensor(stored[f"g{j}"], device=self.device) for j in range(len(params))]
            if stored
            else [torch.zeros_like(p) for p in params]
        )

    @torch.no_grad()
    def after_backward(self):
        for p, g, s in zip(
            (p for p in self.model.parameters() if p.requires_grad), self.linear, self.server
        ):
            if p.grad is not None:
                p.grad.add_(self.alpha * (p - s) - g)

    @torch.no_grad()
    def after_training(self, config, result):
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.linear = [
            g - self.alpha * (p - s) for g, p, s in zip(self.linear, params, self.server)
        ]
        self.save_state(STATE, {f"g{j}": g.cpu().numpy() for j, g in enumerate(self.linear)})
        return {}
