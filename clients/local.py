"""Local-only client: trains its own model on its own data and shares nothing. The model
(kept in its client state) starts from the common initialisation."""

from __future__ import annotations

from clients.base import BaseClient, PersonalEvaluation
from fedimb.core.models import get_weights, set_weights

STATE = "local_model"


class LocalClient(PersonalEvaluation, BaseClient):
    """No federation: the received (empty) parameters are ignored."""

    def get_parameters(self, config):
        return []  # nothing leaves the client

    def set_parameters(self, parameters):
        stored = self.load_state(STATE)
        set_weights(
            self.model,
            [stored[f"a{i}"] for i in range(len(stored))]
            if stored
            else get_weights(self.fresh_model()),
        )

    def after_training(self, config, result):
        self.save_state(STATE, {f"a{i}": a for i, a in enumerate(get_weights(self.model))})
        return {}
