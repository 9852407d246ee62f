"""ReBaFL server (Xu et al., Algorithm 1, server side).

Weights: FedAvg by n_i over the clients that returned (eq. 22). Prototypes: per class,
averaged over the reporting clients weighted by n_ic (eq. 23); classes nobody reported
this round keep their previous prototype, so dropped clients never erase knowledge.
Global prototypes travel to clients as named payloads with every fit instruction.
"""

from __future__ import annotations

import numpy as np

from fedimb.core.aggregate import aggregate_prototypes
from fedimb.core.prototypes import from_payload, to_payload
from strategies.base import BaseStrategy, ClientUpdate


class ReBaFLStrategy(BaseStrategy):
    """FedAvg of weights plus class-count-weighted aggregation of class prototypes."""

    checkpoint_attributes = ("prototypes",)

    def __init__(self, *, run):
        super().__init__(run=run)
        self.prototypes: dict[int, np.ndarray] = {}
        self.feature_dim = run.new_model().feature_dim

    def fit_config(self, server_round):
        return {**super().fit_config(server_round), **to_payload("prototypes", self.prototypes)}

    def payload_names(self) -> set[str]:
        return super().payload_names() | {f"prototypes_{part}" for part in ("classes", "vectors", "counts")}

    def check_update(self, pid, arrays, res):
        problem = super().check_update(pid, arrays, res)
        if problem:
            return problem
        prototypes, counts = from_payload("prototypes", res.metrics)
        for c, vector in prototypes.items():
            if not 0 <= c < self.run.num_classes:
                return f"prototype for unknown class {c}"
            if vector.shape != (self.feature_dim,):
                return f"prototype of class {c} has shape {vector.shape}, expected ({self.feature_dim},)"
            if counts.get(c, 0) < 0:
                return f"negative count for class {c}"
        return None

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        weights = super().aggregate(server_round, updates)
        reported = [from_payload("prototypes", u.metrics) for u in updates]
        self.prototypes.update(aggregate_prototypes([p for p, _ in reported], [n for _, n in reported]))
        self.round_log.extra["prototype_classes"] = len(self.prototypes)
        return weights
