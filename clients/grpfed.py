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
in its client state; θ^l_F starts from the first global extractor the client receives.
The personal model is θ^l_F with the received global classifier.

Readings the paper leaves open (the defaults follow Algorithm 1 as written):

- ``loss_at``: ``training`` reports L^g_m as computed while training (lines 23 and 39:
  the mean batch loss over the local epochs); ``received`` reports the loss of the
  received global model on the local data before training, as q-FFL's F_k is defined.
- ``personal_resync_every``: k > 0 copies the received global extractor into θ^l_F
  again when the client's last copy is k or more rounds old. Line 2 initialises
  θ^l_{F,1:M} once; with 20% of the clients sampled, an extractor that only trains in
  its client's rounds falls behind the global classifier it is tested with. 0 = never.
- ``discriminator_loss``: ``printed`` is eq. 4 as printed, L_D = log(1 − D(f^g)) + log D(f^l).
  It has no lower bound: its gradient in D's logit never vanishes (−σ(z) for the global
  features), so D's weights grow without end, and with them the regulariser's push on θ^l_F,
  until both overflow; clients that take many steps reach it first (measured in
  docs/benchmarks/synthetic.md).
  ``cross_entropy`` trains D as the binary classifier §3 describes, −log D(f^g) − log(1 − D(f^l)):
  the same targets (global features true, personal ones false) with a loss bounded below.
  A personal model with non-finite weights is never scored: its evaluation fails with
  that cause, and the round notes it.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from clients.base_settings import setting
from fedimb.app.faults.method_attacks import LOSS_ATTACKS
from fedimb.core import protocol
from fedimb.core.errors import FedimbError, at_least, one_of
from fedimb.core.models import get_weights, set_weights
from fedimb.core.training import TrainConfig, make_optimizer

STATE = "grpfed_personal"
#: where L^g is measured (setting ``loss_at``): while training | the received model, before it
LOSS_AT_TRAINING, LOSS_AT_RECEIVED = "training", "received"


def discriminator(feature_dim: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def discriminator_loss(d: nn.Module, f_global: torch.Tensor, f_local: torch.Tensor) -> torch.Tensor:
    """L_D = E[log(1 − D(f^g))] + E[log D(f^l)], with D(f) = sigmoid(d(f))."""
    return (
        nn.functional.logsigmoid(-d(f_global)).mean() + nn.functional.logsigmoid(d(f_local)).mean()
    )


def discriminator_cross_entropy(
    d: nn.Module, f_global: torch.Tensor, f_local: torch.Tensor
) -> torch.Tensor:
    """−E[log D(f^g)] − E[log(1 − D(f^l))]: the binary cross-entropy of calling global
    features true and personal ones false (``discriminator_loss: cross_entropy``)."""
    return (
        -nn.functional.logsigmoid(d(f_global)).mean() - nn.functional.logsigmoid(-d(f_local)).mean()
    )


DISCRIMINATOR_LOSSES = {"printed": discriminator_loss, "cross_entropy": discriminator_cross_entropy}


class DivergedPersonalModel(FedimbError, RuntimeError):
    """A client's personal extractor or discriminator holds non-finite values."""


def regularizer_loss(d: nn.Module, f_local: torch.Tensor) -> torch.Tensor:
    """L_R = E[log(1 − D(f^l))] (eq. 5)."""
    return nn.functional.logsigmoid(-d(f_local)).mean()


class GRPFEDClient(PersonalEvaluation, BaseClient):
    """Global model + adversarially regularised personal extractor."""

    needs_linear_head = True  # reads the head's bias
    attacks = LOSS_ATTACKS  # its loss weighs it (L^g_m to the power q)

    trains_encoder_alone = True  # needs an encoder with parameters (not mclr's identity)

    @dataclasses.dataclass(frozen=True)
    class Settings:
        beta: float  # weight of the personal cross-entropy vs the regulariser
        disc_hidden: int  # hidden width of the discriminator
        # the L^g reported (the server reads it too)
        loss_at: str = setting(one_of(LOSS_AT_TRAINING, LOSS_AT_RECEIVED))
        personal_resync_every: int = setting(at_least(0, integer=True))
        discriminator_loss: str = setting(one_of(*DISCRIMINATOR_LOSSES))

    def _personal_parts(self, config, resync: bool = False) -> tuple[nn.Module, nn.Module]:
        """θ^l_F and D from its client state; θ^l_F is the model's current (received)
        extractor when there is no state yet or with ``resync``."""
        encoder = copy.deepcopy(self.model.encoder)
        torch.manual_seed(int(config.get(protocol.SEED, 0)) * 100003 + self.data.partition_id)
        hidden = self.settings_of(config).disc_hidden
        disc = discriminator(self.model.feature_dim, hidden).to(self.device)
        stored = self.load_state(STATE)
        if stored is not None:
            n_enc = len(encoder.state_dict())
            arrays = [stored[f"a{i}"] for i in range(sum(k.startswith("a") for k in stored))]
            if not resync:
                set_weights(encoder, arrays[:n_enc])
            set_weights(disc, arrays[n_enc:])
        return encoder, disc

    def resync_due(self, config) -> bool:
        """Whether θ^l_F is copied from the received global extractor this round."""
        every = self.settings_of(config).personal_resync_every
        stored = self.load_state(STATE)
        if stored is None or every <= 0:
            return False
        return int(config[protocol.SERVER_ROUND]) - int(stored["synced_round"]) >= every

    def before_training(self, config):
        settings = self.settings_of(config)
        self.beta = settings.beta
        self.initial_loss = self.local_loss() if settings.loss_at == LOSS_AT_RECEIVED else None
        self.global_encoder = copy.deepcopy(self.model.encoder).eval().requires_grad_(False)
        stored = self.load_state(STATE)
        resync = self.resync_due(config)
        self.synced_round = (
            int(config[protocol.SERVER_ROUND])
            if stored is None or resync
            else int(stored["synced_round"])
        )
        self.personal_encoder, self.discriminator = self._personal_parts(config, resync)
        hp = TrainConfig.from_mapping(config)
        self.personal_optimizer = make_optimizer(self.personal_encoder.parameters(), hp)
        self.discriminator_optimizer = make_optimizer(self.discriminator.parameters(), hp)
        self.discriminator_objective = DISCRIMINATOR_LOSSES[settings.discriminator_loss]
        self._batch = None

    def loss(self, x, y):
        self._batch = (x, y)
        return super().loss(x, y)  # L^g of the global model

    def after_step(self):
        x, y = self._batch
        head = self.model.head
        self.personal_encoder.train()
        f_local = self.personal_encoder(x)
        logits = nn.functional.linear(
            f_local, head.weight.detach(), head.bias.detach()
        )  # classifier fixed
        loss = self.beta * nn.functional.cross_entropy(logits, y) + (
            1 - self.beta
        ) * regularizer_loss(self.discriminator, f_local)
        self.personal_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.personal_optimizer.step()
        with torch.no_grad():
            f_global, f_local = self.global_encoder(x), self.personal_encoder(x)
        self.discriminator_optimizer.zero_grad(set_to_none=True)
        self.discriminator_objective(self.discriminator, f_global, f_local).backward()
        self.discriminator_optimizer.step()

    def after_training(self, config, result):
        arrays = get_weights(self.personal_encoder) + get_weights(self.discriminator)
        self.save_state(
            STATE,
            {
                **{f"a{i}": a for i, a in enumerate(arrays)},
                "synced_round": np.array(self.synced_round),
            },
        )
        return {} if self.initial_loss is None else {protocol.INITIAL_LOSS: self.initial_loss}

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        stored = self.load_state(STATE)
        if stored is not None and not all(np.all(np.isfinite(v)) for v in stored.values()):
            raise DivergedPersonalModel(
                f"GRP-FED: client {self.data.partition_id}'s personal extractor or discriminator "
                f"is non-finite (discriminator_loss={self.settings_of(config).discriminator_loss}; "
                "eq. 4 as printed has no lower bound: "
                "method.client.discriminator_loss=cross_entropy bounds it)"
            )
        encoder, _ = self._personal_parts(config)
        personal = copy.deepcopy(self.model)
        personal.encoder = encoder
        return personal
