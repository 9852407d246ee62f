"""Servers of the personalisation baselines.

- :class:`LGFedAvgStrategy`: only the classifier head is global (FedAvg of heads).
- :class:`LocalStrategy`: no federation at all; clients are only asked to train.
- :class:`PFedMeStrategy`: w ← (1 − β)·w + β·mean(w_i) (pFedMe Algorithm 1).

LG-FedAvg and Local have no global model; their global-test output is the ensemble of
the clients' personal models (``ensemble_global_test``, GRP-FED §4.1).
"""

from __future__ import annotations

from flwr.common import ndarrays_to_parameters

from fedimb.core.models import get_weights
from strategies.base import BaseStrategy, ClientUpdate, PersonalEvaluation


class LGFedAvgStrategy(PersonalEvaluation, BaseStrategy):
    """FedAvg of the classifier heads."""

    ensemble_global_test = True

    def initialize_parameters(self, client_manager):
        self.current_weights = get_weights(self.run.new_model().head)
        return ndarrays_to_parameters(self.current_weights)

    def evaluate(self, server_round, parameters):
        return None  # no global model: see aggregate_evaluate (ensemble)


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


class PFedMeStrategy(PersonalEvaluation, BaseStrategy):
    """pFedMe's server step with β."""

    def __init__(self, *, run, beta: float):
        super().__init__(run=run)
        self.beta = float(beta)

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        mean = super().aggregate(server_round, updates)
        if mean is None:  # too few updates for the aggregation rule: no server step
            return None
        return [
            ((1 - self.beta) * w + self.beta * m).astype(w.dtype)
            for w, m in zip(self.current_weights, mean)
        ]
