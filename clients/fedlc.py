"""FedLC client (Zhang et al., ICML 2022): logit calibration — each logit is shifted by
−τ·n_c^(−1/4) for the client's class counts n_c before the cross-entropy."""

from __future__ import annotations

import dataclasses

from clients.base_shared import ClassCountsClient
from fedimb.core.losses import logit_calibration_loss


class FedLCClient(ClassCountsClient):
    """Cross-entropy of calibrated logits."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        tau: float  # τ, the calibration strength

    def loss(self, x, y):
        return logit_calibration_loss(self.model(x), y, self.counts, self.settings.tau)
