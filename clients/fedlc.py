"""FedLC client (Zhang et al., ICML 2022): logit calibration — each logit is shifted by
−τ·n_c^(−1/4) for the client's class counts n_c before the cross-entropy."""

from __future__ import annotations

import torch

from clients.base import BaseClient
from fedimb.core.losses import logit_calibration_loss


class FedLCClient(BaseClient):
    """Cross-entropy of calibrated logits."""

    def before_training(self, config):
        self.tau = float(config["tau"])
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )

    def loss(self, x, y):
        return logit_calibration_loss(self.model(x), y, self.counts, self.tau)
