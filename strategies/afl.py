"""AFL server (Mohri et al., "Agnostic Federated Learning", ICML 2019, stochastic AFL):
a minimax game between the model and mixture weights λ over the clients. The model
moves to the λ-weighted average of the participants' local models (λ renormalised over
them); λ takes a projected gradient-ascent step on the participants' losses at the
global model, λ ← Proj_Δ(λ + γ_λ·L), so the worst-off clients gain weight."""

from __future__ import annotations

import dataclasses

import numpy as np

from fedimb.core import protocol
from fedimb.core.aggregate import project_simplex
from fedimb.core.settings import setting
from strategies.base import (
    BaseStrategy,
    ClientUpdate,
    PersonalEvaluation,
)


class AFLStrategy(PersonalEvaluation, BaseStrategy):
    """Agnostic FL with mixture weights over clients."""

    checkpoint_attributes = ("mixture",)
    robust_aggregation = "clip"  # the mixture weights are the method: mean only, with clipping

    @dataclasses.dataclass(frozen=True)
    class Settings:
        lambda_lr: float = setting()

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.lambda_lr = float(s.lambda_lr)
        self.mixture = np.full(run.num_clients, 1.0 / run.num_clients)

    def check_update(self, pid, arrays, res):
        return super().check_update(pid, arrays, res) or self.check_reported_loss(
            pid, res, protocol.INITIAL_LOSS
        )

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        pids = [u.partition_id for u in updates]
        weights = self.mixture[pids]
        if weights.sum() <= 0:
            weights = np.ones(len(pids))
        weights = self.aggregation_weights(updates, weights)
        new = self.average_models([u.arrays for u in updates], weights)
        gradient = np.zeros_like(self.mixture)
        gradient[pids] = self.bounded_losses(updates, protocol.INITIAL_LOSS)
        ascent = self.mixture + self.lambda_lr * gradient
        mixture = project_simplex(ascent) if np.all(np.isfinite(ascent)) else ascent
        if np.all(np.isfinite(mixture)):  # λ weighs every later round: never adopt NaN/Inf
            self.mixture = mixture
        else:
            self.round_log.note(
                "mixture weights not finite after the ascent step: previous ones kept"
            )
        self.round_log.extra.update(
            mixture_max=float(self.mixture.max()), mixture_min=float(self.mixture.min())
        )
        return new
