"""q-FFL server (Li et al., "Fair Resource Allocation in Federated Learning", ICLR 2020)
with a fixed q, F_k being the clients' ``initial_loss`` (loss of the global model on
their data), under one of two update rules (``update``).

The rules:

- ``loss_power`` (default): the model average with weights F_k^q / Σ F_k^q — q-FFL as
  GRP-FED compares against it (GRP-FED eq. 3 with a constant q, "the same q = 10 as
  q-FFL"), :func:`fedimb.core.aggregate.loss_power_weights`;
- ``qfedavg``: Li et al.'s Algorithm 2 (:func:`fedimb.core.aggregate.qffl_update`) with the
  Lipschitz estimate L = 1/lr. Its step is about F/(q·‖Δw‖) of the local update, so
  with q = 10 and several local epochs with momentum the model hardly moves
  (docs/methods.md); use it with small q.

q-FedAvg averages the sampled devices uniformly, so the objective it follows depends on the
sampling: the paper's f_q = Σ_k p_k F_k^(q+1)/(q+1) weights device k by p_k = n_k/n
(eq. 2), which the authors' release reaches by sampling devices in proportion to n_k
(``sampling=by_size``); with uniform sampling every device weighs the same, so q = 0 is
already the paper's "uniform" baseline rather than the data-weighted one.
"""

from __future__ import annotations

import dataclasses

from fedimb.core import protocol
from fedimb.core.aggregate import loss_power_weights, qffl_update
from fedimb.core.errors import one_of
from fedimb.core.settings import setting
from strategies.base import (
    BaseStrategy,
    ClientUpdate,
    PersonalEvaluation,
)


class QFFLStrategy(PersonalEvaluation, BaseStrategy):
    """q-FFL with a fixed q; ``update`` (from the method config) picks the rule."""

    @staticmethod
    def robust_aggregation(settings) -> str:
        """The loss powers are the method, so only the weighted mean (with clipping); the
        q-FedAvg step is no average of the client models."""
        return "none" if settings.get("update") == "qfedavg" else "clip"

    @dataclasses.dataclass(frozen=True)
    class Settings:
        q: float = setting()
        update: str = setting(one_of("loss_power", "qfedavg"))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.q = float(s.q)
        self.update = s.update

    def check_update(self, pid, arrays, res):
        return super().check_update(pid, arrays, res) or self.check_reported_loss(
            pid, res, protocol.INITIAL_LOSS
        )

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        losses = list(self.bounded_losses(updates, protocol.INITIAL_LOSS))
        if self.update == "qfedavg":
            return qffl_update(
                self.current_weights,
                [u.arrays for u in updates],
                losses,
                self.q,
                float(self.train_hparams["lr"]),
            )
        weights = self.aggregation_weights(updates, loss_power_weights(losses, self.q))
        return self.average_models([u.arrays for u in updates], weights)
