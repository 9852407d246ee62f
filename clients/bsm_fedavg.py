"""BSM-FedAvg client: FedAvg with the balanced softmax (Ren et al., NeurIPS 2020) as the
local loss, using the client's own label distribution as the prior — ReBaFL's eq. 8,
i.e. the relaxed balanced softmax with eps = 0."""

from __future__ import annotations

import torch

from clients.base import BaseClient
from fedimb.core.losses import relaxed_balanced_softmax_loss


class BalancedSoftmaxClient(BaseClient):
    """Balanced softmax: softmax(z + log p_local)."""

    def before_training(self, config):
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )

    def loss(self, x, y):
        return relaxed_balanced_softmax_loss(self.model(x), y, self.counts, eps=0.0)
