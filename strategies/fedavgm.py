"""FedAvgM / SGDM (Hsu et al., "Measuring the Effects of Non-Identical Data
Distribution", 2019): FedAvg's average becomes a pseudo-gradient for server SGD with
momentum (:class:`fedimb.core.aggregate.ServerMomentum`)."""

from __future__ import annotations

import dataclasses

from fedimb.core.aggregate import ServerMomentum
from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate


class FedAvgMStrategy(BaseStrategy):
    """Server momentum on the averaged update."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        server_lr: float = setting()
        server_momentum: float = setting()

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.optimizer = ServerMomentum(lr=s.server_lr, momentum=s.server_momentum)

    def state_dict(self):
        return {**super().state_dict(), "velocity": self.optimizer.velocity}

    def load_state_dict(self, state):
        state = dict(state)
        self.optimizer.velocity = state.pop("velocity")
        super().load_state_dict(state)

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        average = super().aggregate(server_round, updates)
        if average is None:  # too few updates for the aggregation rule: no server step
            return None
        return self.optimizer.step(self.current_weights, average)
