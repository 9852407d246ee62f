"""pFedMe client (Dinh et al., "Personalized Federated Learning with Moreau Envelopes",
NeurIPS 2020, Algorithm 1).

For each mini-batch the personal model θ approximately solves
min_θ f(θ; batch) + λ/2‖θ − w‖² by K gradient steps with the personal rate; the local
model then moves towards it, w ← w − η·λ(w − θ) (the gradient of λ/2‖θ − w‖², applied by
the optimiser with η = ``train.lr``). θ persists in its client state and is the
client's personal model."""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from fedimb.core.models import get_weights, set_weights

STATE = "pfedme_personal"


class PFedMeClient(PersonalEvaluation, BaseClient):
    """Moreau-envelope personalisation."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        lam: float  # λ of the Moreau envelope
        personal_lr: float  # step size of the personal problem
        inner_steps: int  # K

    def before_training(self, config):
        settings = self.settings_of(config)
        self.lam, self.personal_lr = settings.lam, settings.personal_lr
        self.inner_steps = settings.inner_steps
        self.personal = copy.deepcopy(self.model)  # θ starts at the received w each round

    def loss(self, x, y):
        anchor = [p.detach() for p in self.model.parameters()]
        theta = list(self.personal.parameters())
        for _ in range(self.inner_steps):
            objective = nn.functional.cross_entropy(self.personal(x), y) + self.lam / 2 * sum(
                ((t - a) ** 2).sum() for t, a in zip(theta, anchor)
            )
            grads = torch.autograd.grad(objective, theta)
            with torch.no_grad():
                for t, g in zip(theta, grads):
                    t.sub_(self.personal_lr * g)
        return (
            self.lam
            / 2
            * sum(((p - t.detach()) ** 2).sum() for p, t in zip(self.model.parameters(), theta))
        )

    def after_training(self, config, result):
        self.save_state(STATE, {f"a{i}": a for i, a in enumerate(get_weights(self.personal))})
        return {}

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        stored = self.load_state(STATE)
        if stored is not None:
            set_weights(self.model, [stored[f"a{i}"] for i in range(len(stored))])
        return self.model
