"""pFedMe server (Dinh et al., NeurIPS 2020, Algorithm 1): w ← (1 − β)·w + β·mean(w_i)."""

from __future__ import annotations

import dataclasses

from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate, PersonalEvaluation


class PFedMeStrategy(PersonalEvaluation, BaseStrategy):
    """pFedMe's server step with β."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        beta: float = setting()

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.beta = float(s.beta)

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        mean = super().aggregate(server_round, updates)
        if mean is None:  # too few updates for the aggregation rule: no server step
            return None
        return [
            ((1 - self.beta) * w + self.beta * m).astype(w.dtype)
            for w, m in zip(self.current_weights, mean)
        ]
