"""SCAFFOLD server (Karimireddy et al., ICML 2020, Algorithm 1, option II).

The server control variate c (one array per trainable parameter) travels to clients as
named payloads ``control.<j>``; clients return their control-variate change as
``control_delta.<j>``. With S the participants and N all clients:
x ← x + η_g·mean_{i∈S}(y_i − x) and c ← c + |S|/N·mean_{i∈S}(Δc_i).
Buffers (e.g. BatchNorm statistics) are averaged like the parameters.
"""

from __future__ import annotations

import numpy as np

from fedimb import payload
from fedimb.aggregate import weighted_average
from strategies.base import BaseStrategy, ClientUpdate


def trainable_indices(model) -> list[int]:
    """Positions of the trainable parameters in the model's state_dict order."""
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    return [i for i, key in enumerate(model.state_dict()) if key in names]


class ScaffoldStrategy(BaseStrategy):
    """Stochastic controlled averaging."""

    checkpoint_attributes = ("control",)

    def __init__(self, *, run, server_lr: float = 1.0):
        super().__init__(run=run)
        self.server_lr = float(server_lr)
        initial = run.initial_weights()
        self.param_index = trainable_indices(run.new_model())
        self.control = [np.zeros_like(initial[i], dtype=np.float32) for i in self.param_index]

    def fit_config(self, server_round):
        return {**super().fit_config(server_round),
                **payload.pack({f"control.{j}": c for j, c in enumerate(self.control)})}

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

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        x = self.current_weights
        mean = weighted_average([u.arrays for u in updates], self.aggregation_weights(updates, np.ones(len(updates))))
        new = []
        for g, m in zip(x, mean):
            value = g + self.server_lr * (m.astype(np.float64) - g)
            new.append(np.rint(value).astype(g.dtype) if np.issubdtype(g.dtype, np.integer) else value.astype(g.dtype))
        share = len(updates) / self.run.num_clients
        for j in range(len(self.control)):
            mean_delta = np.mean([u.payload[f"control_delta.{j}"].astype(np.float64) for u in updates], axis=0)
            self.control[j] = (self.control[j] + share * mean_delta).astype(np.float32)
        self.round_log.extra["control_norm"] = float(np.sqrt(sum(float((c.astype(np.float64) ** 2).sum()) for c in self.control)))
        return new
