"""Local-only baseline: no federation at all; clients are only asked to train. There is
no global model: the global-test output is the ensemble of the clients' personal models
(``ensemble_global_test``, GRP-FED §4.1)."""

from __future__ import annotations

from flwr.common import ndarrays_to_parameters

from strategies.base import BaseStrategy, ClientUpdate, PersonalEvaluation


class LocalStrategy(PersonalEvaluation, BaseStrategy):
    """Clients train alone; nothing is aggregated."""

    ensemble_global_test = True
    robust_aggregation = "none"  # nothing is aggregated

    def initialize_parameters(self, client_manager):
        self.current_weights = []
        return ndarrays_to_parameters([])

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        return None

    def evaluate(self, server_round, parameters):
        return None
