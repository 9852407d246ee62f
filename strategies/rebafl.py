"""ReBaFL server (Xu et al., Algorithm 1, server side).

Weights: FedAvg by n_i over the clients that returned (eq. 22). Prototypes: per class,
averaged over the reporting clients weighted by n_ic (eq. 23); classes nobody reported
this round keep their previous prototype, so dropped clients never erase knowledge.
Global prototypes travel to clients as named payloads with every fit instruction; a
client's prototypes are checked against their declaration (:mod:`clients.rebafl`)
and bounded against the other clients' of their class before they are read, and a
global prototype that is not finite is never adopted.
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
        prototypes = self.bounded_prototypes([u.partition_id for u in updates], reported)
        new = aggregate_prototypes(prototypes, [n for _, n in reported])
        broken = sorted(c for c, vector in new.items() if not np.all(np.isfinite(vector)))
        if broken:  # never broadcast; the classes keep their previous prototypes
            self.round_log.note(
                f"global prototypes of classes {broken} not finite: previous ones kept"
            )
        self.prototypes.update({c: vector for c, vector in new.items() if c not in broken})
        self.round_log.extra["prototype_classes"] = len(self.prototypes)
        return weights

    def bounded_prototypes(
        self, pids: list[int], reported: list[tuple[dict[int, np.ndarray], dict[int, int]]]
    ) -> list[dict[int, np.ndarray]]:
        """Each client's prototype of class c at most ``influence.statistic_ratio`` times the median
        norm of the other clients' prototypes of c: a prototype far longer than the
        others' would set the class's global prototype, which every client then
        augments its features around."""
        out = [dict(prototypes) for prototypes, _ in reported]
        for c in sorted({c for prototypes in out for c in prototypes}):
            holders = [i for i, prototypes in enumerate(out) if c in prototypes]
            kept = self.bounded_vectors(
                [pids[i] for i in holders], [out[i][c] for i in holders], f"prototype of class {c}"
            )
            for i, vector in zip(holders, kept):
                out[i][c] = vector
        return out
