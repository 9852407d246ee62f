"""FedRS client (Li & Zhan, KDD 2021): restricted softmax — during local training the
logits of classes the client does not hold are scaled by alpha, limiting how far the
missing classes' classifier weights are pushed away."""

from __future__ import annotations

import torch
from torch import nn

from clients.base import BaseClient
from fedimb.core.losses import restricted_softmax_logits


class FedRSClient(BaseClient):
    """Cross-entropy of restricted logits."""

    def before_training(self, config):
        self.alpha = float(config["alpha"])
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )

    def loss(self, x, y):
        return nn.functional.cross_entropy(
            restricted_softmax_logits(self.model(x), self.counts, self.alpha), y
        )
