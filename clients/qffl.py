"""Client for the loss-weighted global methods (q-FFL, AFL): FedAvg's local training,
plus the loss of the received global model on the local data (F_k in q-FFL, the
mixture gradient in AFL), measured before training and reported as ``initial_loss``."""

from __future__ import annotations

from clients.base import BaseClient, PersonalEvaluation
from fedimb.core import protocol


class InitialLossClient(PersonalEvaluation, BaseClient):
    """Reports the received model's loss on the local training data."""

    def before_training(self, config):
        self.initial_loss = self.local_loss()

    def after_training(self, config, result):
        return {protocol.INITIAL_LOSS: self.initial_loss}
