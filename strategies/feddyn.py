"""FedDyn server (Acar et al., ICLR 2021, Algorithm 1).

h ← h − α·(1/m)·Σ_{k∈P}(θ_k − θ) over the participants P (m all clients), then
θ ← mean_{k∈P}(θ_k) − h/α. α is the client hyperparameter ``alpha`` (declared once, in
the method's client settings). Buffers are averaged without the correction.
"""

from __future__ import annotations

import numpy as np

from clients.feddyn import FedDynClient
from fedimb.core.models import trainable_indices
from strategies.base import BaseStrategy, ClientUpdate


class FedDynStrategy(BaseStrategy):
    """Dynamic regularisation with the server state h."""

    checkpoint_attributes = ("h",)
    robust_aggregation = "none"  # its own step with the server state h

    def __init__(self, *, run):
        super().__init__(run=run)
        self.alpha = FedDynClient.read_settings(self.client_hparams).alpha
        initial = run.initial_weights()
        self.param_index = set(trainable_indices(run.new_model()))
        self.h = {i: np.zeros_like(initial[i], dtype=np.float64) for i in self.param_index}

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        x = self.current_weights
        new = []
        for i, g in enumerate(x):
            locals_ = np.stack([u.arrays[i].astype(np.float64) for u in updates])
            mean = locals_.mean(axis=0)
            if i in self.param_index:
                self.h[i] = (
                    self.h[i] - self.alpha * (locals_ - g).sum(axis=0) / self.run.num_clients
                )
                mean = mean - self.h[i] / self.alpha
            new.append(
                np.rint(mean).astype(g.dtype)
                if np.issubdtype(g.dtype, np.integer)
                else mean.astype(g.dtype)
            )
        return new
