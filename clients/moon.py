"""MOON client (Li, He & Song, CVPR 2021, eq. 3): cross-entropy plus μ·ℓ_con, a contrastive
term that pulls the local representation towards the received global model's and away
from the client's previous model's.

ℓ_con = −log( e^{sim(z, z_glob)/τ} / (e^{sim(z, z_glob)/τ} + e^{sim(z, z_prev)/τ}) ),

z, z_glob, z_prev the representations (the projection head's output, see
``method.model_options``) of the local, received global and the client's previous local
model, sim the cosine similarity. The previous model is kept in its client state; in
its first round a client uses the global model as previous model.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.core.errors import at_least
from fedimb.core.models import get_weights, set_weights

STATE = "moon_previous"


def contrastive_loss(
    z: torch.Tensor, z_glob: torch.Tensor, z_prev: torch.Tensor, tau: float
) -> torch.Tensor:
    positive = nn.functional.cosine_similarity(z, z_glob, dim=1) / tau
    negative = nn.functional.cosine_similarity(z, z_prev, dim=1) / tau
    logits = torch.stack([positive, negative], dim=1)
    return nn.functional.cross_entropy(
        logits, torch.zeros(len(z), dtype=torch.long, device=z.device)
    )


class MOONClient(BaseClient):
    """Model-contrastive local training."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        mu: float = setting(at_least(0))  # μ, the weight of the contrastive term
        tau: float = setting(at_least(0, strict=True))  # τ, its temperature

    def before_training(self, config):
        settings = self.settings_of(config)
        self.mu, self.tau = settings.mu, settings.tau
        self.global_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.previous = copy.deepcopy(self.global_model)
        stored = self.load_state(STATE)
        if stored is not None:
            set_weights(self.previous, [stored[f"a{i}"] for i in range(len(stored))])

    def loss(self, x, y):
        z = self.model.encoder(x)
        loss = nn.functional.cross_entropy(self.model.head(z), y)
        with torch.no_grad():
            z_glob, z_prev = self.global_model.encoder(x), self.previous.encoder(x)
        return loss + self.mu * contrastive_loss(z, z_glob, z_prev, self.tau)

    def after_training(self, config, result):
        self.save_state(STATE, {f"a{i}": a for i, a in enumerate(get_weights(self.model))})
        return {}
