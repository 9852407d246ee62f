"""ReBaFL client (Xu et al., "Stabilizing and Improving Federated Learning with Non-IID
Data and Client Dropout", Algorithm 1, LocalTraining).

Local loss ℓ + μ·ℓ_aug (eq. 16): ℓ is the relaxed balanced softmax with the smoothed
prior p̂(c) = (1 − eps)·n_c/n + eps/C (eqs. 9–10); ℓ_aug is the same loss on features
transferred to other classes, h̃ = p_j + λ(h_i − p_i) (eq. 15), with target classes
enumerated cyclically over the classes that have a prototype and the prior recomputed
from the augmented labels (§4.3). ℓ_aug trains the classifier only (eq. 19: its
gradient is taken w.r.t. φ), so the features are detached. Before training, the
client's own classes take prototypes computed with the received feature extractor
(eq. 18); after training it reports new local prototypes with their class counts
(eq. 21).
"""

from __future__ import annotations

import torch

from clients.base import BaseClient
from fedimb.core import protocol
from fedimb.core.losses import relaxed_balanced_softmax_loss
from fedimb.core.prototypes import (
    class_prototypes,
    cyclic_targets,
    from_payload,
    to_payload,
    transfer_features,
)


class ReBaFLClient(BaseClient):
    """Relaxed balanced softmax + prototype-based feature augmentation."""

    def _local_prototypes(self):
        return class_prototypes(
            self.model.encoder, self.data.x, self.data.y, self.data.indices, device=self.device
        )

    def before_training(self, config):
        self.eps = float(config["eps"])
        self.mu = float(config["mu"])
        self.lam = float(config["lam"])
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )
        global_prototypes, _ = from_payload(protocol.PROTOTYPES, config)
        local_prototypes, _ = self._local_prototypes()
        merged = {**global_prototypes, **local_prototypes}  # eq. 18
        table = torch.zeros(self.data.num_classes, self.model.feature_dim)
        for c, vector in merged.items():
            table[c] = torch.as_tensor(vector)
        self.prototypes = table.to(self.device)
        self.prototype_classes = torch.as_tensor(
            sorted(merged), dtype=torch.long, device=self.device
        )

    def loss(self, x, y):
        features = self.model.encoder(x)
        loss = relaxed_balanced_softmax_loss(self.model.head(features), y, self.counts, self.eps)
        if self.mu > 0 and len(self.prototype_classes) > 0:
            targets = cyclic_targets(len(y), self.prototype_classes)
            augmented = transfer_features(features.detach(), y, self.prototypes, targets, self.lam)
            augmented_counts = torch.bincount(targets, minlength=self.data.num_classes).float()
            loss = loss + self.mu * relaxed_balanced_softmax_loss(
                self.model.head(augmented), targets, augmented_counts, self.eps
            )
        return loss

    def after_training(self, config, result):
        prototypes, counts = self._local_prototypes()
        return to_payload(protocol.PROTOTYPES, prototypes, counts)
