"""FedNova server (Wang et al., "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization", NeurIPS 2020): normalised averaging by each
client's number of local steps τ_i (reported as ``local_steps``) and the local momentum
ρ (``train.momentum``): :func:`fedimb.core.aggregate.fednova_update` with a_i from
:func:`fedimb.core.aggregate.fednova_normaliser`."""

from __future__ import annotations

from fedimb.core import protocol
from fedimb.core.aggregate import fednova_normaliser, fednova_update
from strategies.base import BaseStrategy, ClientUpdate


class FedNovaStrategy(BaseStrategy):
    """Normalised averaging."""

    robust_aggregation = "none"  # its own normalised step, not an average of the models

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        rho = float(self.train_hparams["momentum"])
        normalisers = [
            fednova_normaliser(max(int(u.metrics.get(protocol.LOCAL_STEPS, 0)), 1), rho)
            for u in updates
        ]
        self.round_log.extra["tau_eff_steps"] = sum(normalisers) / len(normalisers)
        sizes = self.aggregation_weights(updates, [u.num_examples for u in updates])
        return fednova_update(self.current_weights, [u.arrays for u in updates], sizes, normalisers)
