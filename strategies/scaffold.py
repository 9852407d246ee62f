"""SCAFFOLD server (Karimireddy et al., ICML 2020, Algorithm 1).

The server control variate c (one array per trainable parameter) travels to clients as
named payloads ``control.<j>``; clients return their control-variate change as
``control_delta.<j>``. With S the participants and N all clients (Algorithm 1,
lines 16–17): x ← x + η_g·mean_{i∈S}(y_i − x) and c ← c + |S|/N·mean_{i∈S}(Δc_i).

``weighting``: ``uniform`` averages the models uniformly over the participants and
c ← c + 1/N·Σ_{i∈S} Δc_i, as the paper does (its objective weights the clients equally);
``samples`` weights the models by their sample counts, as FedAvg and many public
implementations do, and then c ← c + Σ_{i∈S} n_i/n·Δc_i (n the samples of all N clients),
so that c tracks the gradient of the same sample-weighted objective the model follows.
Buffers (e.g. BatchNorm statistics) are averaged like the parameters.
"""

from __future__ import annotations

import numpy as np

from fedimb.core import payload
from fedimb.core.aggregate import weighted_average
from fedimb.core.errors import one_of
from fedimb.core.models import trainable_indices
from strategies.base import BaseStrategy, ClientUpdate


class ScaffoldStrategy(BaseStrategy):
    """Stochastic controlled averaging."""

    checkpoint_attributes = ("control",)
    setting_rules = {"weighting": one_of("uniform", "samples")}

    def __init__(self, *, run, server_lr: float, weighting: str):
        super().__init__(run=run)
        self.server_lr = float(server_lr)
        self.weighting = weighting
        initial = run.initial_weights()
        self.param_index = trainable_indices(run.new_model())
        self.control = [np.zeros_like(initial[i], dtype=np.float32) for i in self.param_index]

    def fit_config(self, server_round):
        return {**super().fit_config(server_round),
                **payload.pack({f"control.{j}": c for j, c in enumerate(self.control)})}

    def payload_names(self) -> set[str]:
        return super().payload_names() | {f"control_delta.{j}" for j in range(len(self.control))}

    def check_update(self, pid, arrays, res):
        problem = super().check_update(pid, arrays, res)
        if problem:
            return problem
        deltas = payload.unpack(res.metrics)
        for j, c in enumerate(self.control):
            delta = deltas.get(f"control_delta.{j}")
            if delta is None or delta.shape != c.shape:
                return f"control_delta.{j} missing or of the wrong shape"
        return None

    def control_shares(self, updates: list[ClientUpdate]) -> list[float]:
        """Each participant's share of its Δc_i in c (Algorithm 1, line 17): 1/N with
        uniform weighting; with sample weighting n_i / Σ_j n_j over all N clients, so that
        c stays the same weighted mean of the c_i as the one the model average follows."""
        if self.weighting == "uniform":
            return [1.0 / self.run.num_clients] * len(updates)
        sizes = [self.registry.info(pid).num_examples for pid in self.registry.partition_ids()]
        return [u.num_examples / max(sum(sizes), 1) for u in updates]

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        x = self.current_weights
        base = [u.num_examples for u in updates] if self.weighting == "samples" else np.ones(len(updates))
        mean = weighted_average([u.arrays for u in updates], self.aggregation_weights(updates, base))
        new = []
        for g, m in zip(x, mean):
            value = g + self.server_lr * (m.astype(np.float64) - g)
            new.append(np.rint(value).astype(g.dtype) if np.issubdtype(g.dtype, np.integer) else value.astype(g.dtype))
        shares = self.control_shares(updates)
        for j in range(len(self.control)):
            delta = sum(w * u.payload[f"control_delta.{j}"].astype(np.float64) for w, u in zip(shares, updates))
            self.control[j] = (self.control[j] + delta).astype(np.float32)
        self.round_log.extra["control_norm"] = float(np.sqrt(sum(float((c.astype(np.float64) ** 2).sum()) for c in self.control)))
        return new
