"""FedNova server (Wang et al., "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization", NeurIPS 2020): normalised averaging by each
client's number of local steps τ_i (reported as ``local_steps``) and the local momentum
ρ (``train.momentum``): :func:`fedimb.core.aggregate.fednova_update` with a_i from
:func:`fedimb.core.aggregate.fednova_normaliser`."""

from __future__ import annotations

import math

from fedimb.core import payload, protocol
from fedimb.core.aggregate import fednova_normaliser, fednova_update
from fedimb.core.training import TrainConfig
from strategies.base import BaseStrategy, ClientUpdate


class FedNovaStrategy(BaseStrategy):
    """Normalised averaging."""

    robust_aggregation = "none"  # its own normalised step, not an average of the models

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        rho = float(self.train_hparams["momentum"])
        normalisers = [fednova_normaliser(self.local_steps(u), rho) for u in updates]
        self.round_log.extra["tau_eff_steps"] = sum(normalisers) / len(normalisers)
        sizes = self.aggregation_weights(updates, [u.num_examples for u in updates])
        return fednova_update(self.current_weights, [u.arrays for u in updates], sizes, normalisers)

    def local_steps(self, update: ClientUpdate) -> int:
        """τ_i as the client reports it, at most the steps its accepted samples allow
        (E · ⌈n_i / B⌉: one pass of mini-batches per epoch): τ_eff = Σ p_i a_i scales the
        whole global step, so one client's τ of 1e9 would scale every other update by it.
        A cut is counted (``clients.bounded``)."""
        reported = payload.scalars(update.metrics).get(protocol.LOCAL_STEPS, 0.0)
        steps = int(reported) if math.isfinite(reported) else 0
        hp = TrainConfig.from_mapping(self.train_hparams)
        most = hp.local_epochs * math.ceil(update.num_examples / hp.batch_size)
        if steps > most:
            self.round_log.bound(
                update.partition_id,
                f"local_steps {steps:,} cut to {most:,}, the most its {update.num_examples:,} "
                "samples allow",
            )
            steps = most
        return max(steps, 1)
