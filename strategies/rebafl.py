"""ReBaFL server (Xu et al., Algorithm 1, server side).

Weights: FedAvg by n_i over the clients that returned (eq. 22). Prototypes: per class,
averaged over the reporting clients weighted by n_ic (eq. 23); classes nobody reported
this round keep their previous prototype, so dropped clients never erase knowledge.
Global prototypes travel to clients as named payloads with every fit instruction; a
client's prototypes are checked against their declaration (:mod:`clients.rebafl`)
before they are read, and a global prototype that is not finite is never adopted.
"""

from __future__ import annotations

import numpy as np

from clients.rebafl import PAYLOADS, PROTOTYPES
from fedimb.core.aggregate import aggregate_prototypes
from fedimb.core.prototypes import from_payload, to_payload
from strategies.base import BaseStrategy, ClientUpdate


class ReBaFLStrategy(BaseStrategy):
    """FedAvg of weights plus class-count-weighted aggregation of class prototypes."""

    payloads = PAYLOADS
    checkpoint_attributes = ("prototypes",)

    def __init__(self, *, run):
        super().__init__(run=run)
        self.prototypes: dict[int, np.ndarray] = {}

    def fit_config(self, server_round):
        return {
            **super().fit_config(server_round),
            **to_payload(PROTOTYPES, self.prototypes),
        }

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        weights = super().aggregate(server_round, updates)
        reported = [from_payload(PROTOTYPES, u.metrics) for u in updates]
        new = aggregate_prototypes([p for p, _ in reported], [n for _, n in reported])
        broken = sorted(c for c, vector in new.items() if not np.all(np.isfinite(vector)))
        if broken:  # never broadcast; the classes keep their previous prototypes
            self.round_log.note(
                f"global prototypes of classes {broken} not finite: previous ones kept"
            )
        self.prototypes.update({c: vector for c, vector in new.items() if c not in broken})
        self.round_log.extra["prototype_classes"] = len(self.prototypes)
        return weights
