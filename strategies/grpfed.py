"""GRP-FED server (Wang et al., Algorithm 1 lines 1–14): adaptive loss-power aggregation.

After each round, σ_t is the standard deviation (population) of the participants'
global training losses L^g_m; q moves by eq. 2 (:func:`fedimb.aggregate.adaptive_q`;
round 1 keeps q_0), and the new global model is Σ λ_m·θ_m with
λ_m = (L^g_m)^q / Σ_i (L^g_i)^q over the participants (eq. 3). An update whose
loss is missing, non-finite or not positive is rejected.
"""

from __future__ import annotations

import math

import numpy as np

from fedimb import payload
from fedimb.aggregate import adaptive_q, loss_power_weights, weighted_average
from strategies.base import BaseStrategy, ClientUpdate


def positive_metric(res, key: str) -> str | None:
    """Why ``res.metrics[key]`` cannot serve as a loss, or None."""
    value = payload.scalars(res.metrics).get(key)
    if value is None or not math.isfinite(value) or value <= 0:
        return f"{key} must be a positive number, got {res.metrics.get(key)!r}"
    return None


class GRPFEDStrategy(BaseStrategy):
    """Aggregation weights (L^g_m)^q with an adaptive q."""

    checkpoint_attributes = ("q", "sigma")

    def __init__(self, *, run, q0: float = 10.0, eta_q: float = 0.5):
        super().__init__(run=run)
        self.q = float(q0)
        self.eta_q = float(eta_q)
        self.sigma: float | None = None

    def check_update(self, pid, arrays, res):
        return super().check_update(pid, arrays, res) or positive_metric(res, "train_loss")

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        losses = np.array([float(u.metrics["train_loss"]) for u in updates])
        sigma = float(losses.std())
        if self.sigma is not None:
            self.q = adaptive_q(self.q, self.sigma, sigma, self.eta_q)
        self.sigma = sigma
        weights = self.aggregation_weights(updates, loss_power_weights(losses, self.q))
        self.round_log.extra.update(q=self.q, loss_std=sigma, loss_max=float(losses.max()))
        return weighted_average([u.arrays for u in updates], weights)
