"""GRP-FED client (Wang et al., "Addressing Client Imbalance in Federated Learning via
Global-Regularized Personalization", Algorithm 1 lines 16–39).

Per mini-batch: (1) the global extractor and classifier take a step on the
cross-entropy L^g (lines 22–25; ``train_loss`` reports its mean, the server's L^g_m);
(2) the personal extractor θ^l_F takes a step on β·L^l + (1 − β)·L_R with the shared
classifier fixed (lines 28–31), L^l its cross-entropy and L_R = log(1 − D(f^l))
(eq. 5), which fools the discriminator; (3) the per-client discriminator D takes a step
on L_D = log(1 − D(f^g)) + log(D(f^l)) with both extractors fixed (lines 34–36; f^g
from the received global extractor θ^g_F), i.e. it learns to call global features
true and personal ones false. D is a 2-layer MLP. θ^l_F and D persist across rounds
in ``Context.state``; θ^l_F starts from the first global extractor the client receives.
The personal model is θ^l_F with the received global classifier.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from clients.base import BaseClient
from fedimb.models.concat import load_module_weights, module_weights
from fedimb.training import TrainConfig, make_optimizer

STATE = "grpfed_personal"


def discriminator(feature_dim: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def discriminator_loss(d: nn.Module, f_global: torch.Tensor, f_local: torch.Tensor) -> torch.Tensor:
    """L_D = E[log(1 − D(f^g))] + E[log D(f^l)], with D(f) = sigmoid(d(f))."""
    return nn.functional.logsigmoid(-d(f_global)).mean() + nn.functional.logsigmoid(d(f_local)).mean()


def regularizer_loss(d: nn.Module, f_local: torch.Tensor) -> torch.Tensor:
    """L_R = E[log(1 − D(f^l))] (eq. 5)."""
    return nn.functional.logsigmoid(-d(f_local)).mean()


class GRPFEDClient(BaseClient):
    """Global model + adversarially regularised personal extractor."""

    def _personal_parts(self, config) -> tuple[nn.Module, nn.Module]:
        encoder = copy.deepcopy(self.model.encoder)
        torch.manual_seed(int(config.get("seed", 0)) * 100003 + self.data.partition_id)
        disc = discriminator(self.model.feature_dim, int(config["disc_hidden"])).to(self.device)
        stored = self.load_state(STATE)
        if stored is not None:
            n_enc = len(encoder.state_dict())
            arrays = [stored[f"a{i}"] for i in range(len(stored))]
            load_module_weights(encoder, arrays[:n_enc])
            load_module_weights(disc, arrays[n_enc:])
        return encoder, disc

    def before_training(self, config):
        self.beta = float(config["beta"])
        self.global_encoder = copy.deepcopy(self.model.encoder).eval().requires_grad_(False)
        self.personal_encoder, self.discriminator = self._personal_parts(config)
        hp = TrainConfig.from_mapping(config)
        self.personal_optimizer = make_optimizer(self.personal_encoder.parameters(), hp)
        self.discriminator_optimizer = make_optimizer(self.discriminator.parameters(), hp)
        self._batch = None

    def loss(self, x, y):
        self._batch = (x, y)
        return super().loss(x, y)  # L^g of the global model

    def after_step(self):
        x, y = self._batch
        head = self.model.head
        self.personal_encoder.train()
        f_local = self.personal_encoder(x)
        logits = nn.functional.linear(f_local, head.weight.detach(), head.bias.detach())  # classifier fixed
        loss = self.beta * nn.functional.cross_entropy(logits, y) + (1 - self.beta) * regularizer_loss(
            self.discriminator, f_local
        )
        self.personal_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.personal_optimizer.step()
        with torch.no_grad():
            f_global, f_local = self.global_encoder(x), self.personal_encoder(x)
        self.discriminator_optimizer.zero_grad(set_to_none=True)
        discriminator_loss(self.discriminator, f_global, f_local).backward()
        self.discriminator_optimizer.step()

    def after_training(self, config, result):
        arrays = module_weights(self.personal_encoder) + module_weights(self.discriminator)
        self.save_state(STATE, {f"a{i}": a for i, a in enumerate(arrays)})
        return {}

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        encoder, _ = self._personal_parts(config)
        personal = copy.deepcopy(self.model)
        personal.encoder = encoder
        return personal
