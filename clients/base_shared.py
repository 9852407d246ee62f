"""Client halves that several methods share; each method's client module subclasses
one in a line, so that every method has a client module of its name."""

from __future__ import annotations

import torch

from clients.base import BaseClient, PersonalEvaluation
from fedimb.app.faults.method_attacks import LOSS_ATTACKS
from fedimb.core import protocol


class AveragingClient(PersonalEvaluation, BaseClient):
    """FedAvg's local side (McMahan et al., 2017): E epochs of mini-batch SGD on the local
    data with cross-entropy — the base client unchanged."""


class InitialLossClient(PersonalEvaluation, BaseClient):
    """FedAvg's local training, plus the loss of the received global model on the local
    data (F_k in q-FFL, the mixture gradient in AFL), measured before training and
    reported as ``initial_loss``."""

    attacks = LOSS_ATTACKS  # the loss weighs the client (q-FFL's F_k^q, AFL's mixture)

    def before_training(self, config):
        self.initial_loss = self.local_loss()

    def after_training(self, config, result):
        return {protocol.INITIAL_LOSS: self.initial_loss}


class ClassCountsClient(BaseClient):
    """A client whose loss uses its class counts n_c: before training it reads the
    instruction's settings and keeps the counts on its device as ``counts``."""

    def before_training(self, config):
        self.settings_of(config)
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )
