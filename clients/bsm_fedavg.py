"""BSM-FedAvg client: FedAvg with the balanced softmax (Ren et al., NeurIPS 2020) as the
local loss, using the client's own label distribution as the prior — ReBaFL's eq. 8,
i.e. the relaxed balanced softmax with eps = 0."""

from __future__ import annotations

from clients.base_shared import ClassCountsClient
from fedimb.core.losses import relaxed_balanced_softmax_loss


class BalancedSoftmaxClient(ClassCountsClient):
    """Balanced softmax: softmax(z + log p_local)."""

    def loss(self, x, y):
        return relaxed_balanced_softmax_loss(self.model(x), y, self.counts, eps=0.0)
