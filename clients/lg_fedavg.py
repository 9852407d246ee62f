"""LG-FedAvg client (Liang et al., "Think Locally, Act Globally", 2020): the encoder is
the client's own (kept in its client state, starting from the common initialisation);
only the classifier head is federated. The client trains both on its data and returns
the head."""

from __future__ import annotations

from clients.base import BaseClient, PersonalEvaluation
from fedimb.core.models import get_weights, set_weights

STATE = "lg_encoder"


class LGFedAvgClient(PersonalEvaluation, BaseClient):
    """Local representation, global head."""

    def get_parameters(self, config):
        return get_weights(self.model.head)

    def set_parameters(self, parameters):
        set_weights(self.model.head, parameters)
        stored = self.load_state(STATE)
        encoder = (
            [stored[f"a{i}"] for i in range(len(stored))]
            if stored
            else get_weights(self.fresh_model().encoder)
        )
        set_weights(self.model.encoder, encoder)

    def after_training(self, config, result):
        self.save_state(STATE, {f"a{i}": a for i, a in enumerate(get_weights(self.model.encoder))})
        return {}
