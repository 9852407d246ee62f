"""FedRS client (Li & Zhan, KDD 2021): restricted softmax — during local training the
logits of classes the client does not hold are scaled by alpha, limiting how far the
missing classes' classifier weights are pushed away."""

from __future__ import annotations

import dataclasses

from torch import nn

from clients.base_shared import ClassCountsClient
from fedimb.core.losses import restricted_softmax_logits


class FedRSClient(ClassCountsClient):
    """Cross-entropy of restricted logits."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        alpha: float  # scaling of the missing classes' logits

    def loss(self, x, y):
        return nn.functional.cross_entropy(
            restricted_softmax_logits(self.model(x), self.counts, self.settings.alpha), y
        )
