"""q-FFL server (Li et al., "Fair Resource Allocation in Federated Learning", ICLR 2020,
Algorithm 2, q-FedAvg) with a fixed q: the update of
:func:`fedimb.aggregate.qffl_update`, F_k being the clients' ``initial_loss`` and the
Lipschitz estimate L = 1/lr (the paper's choice)."""

from __future__ import annotations

from fedimb.aggregate import qffl_update
from strategies.base import BaseStrategy, ClientUpdate
from strategies.grpfed import positive_metric


class QFFLStrategy(BaseStrategy):
    """q-FedAvg."""

    def __init__(self, *, run, q: float = 10.0):
        super().__init__(run=run)
        self.q = float(q)

    def check_update(self, pid, arrays, res):
        return super().check_update(pid, arrays, res) or positive_metric(res, "initial_loss")

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        return qffl_update(
            self.current_weights, [u.arrays for u in updates], [float(u.metrics["initial_loss"]) for u in updates],
            self.q, float(self.train_hparams["lr"]),
        )
