"""LG-FedAvg server (Liang et al., 2020): only the classifier head is global (FedAvg of
the heads). There is no global model: the global-test output is the ensemble of the
clients' personal models (``ensemble_global_test``, GRP-FED §4.1)."""

from __future__ import annotations

from flwr.common import ndarrays_to_parameters

from fedimb.core.models import get_weights
from strategies.base import BaseStrategy, PersonalEvaluation


class LGFedAvgStrategy(PersonalEvaluation, BaseStrategy):
    """FedAvg of the classifier heads."""

    ensemble_global_test = True

    def global_module(self):
        return self.run.new_model().head

    def initialize_parameters(self, client_manager):
        self.current_weights = get_weights(self.global_module())
        return ndarrays_to_parameters(self.current_weights)

    def evaluate(self, server_round, parameters):
        return None  # no global model: see aggregate_evaluate (ensemble)
