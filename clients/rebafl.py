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

import dataclasses

import numpy as np
import torch

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.app.faults.method_attacks import FIT, MethodAttack, replaced
from fedimb.core import payload, protocol
from fedimb.core.errors import at_least
from fedimb.core.losses import relaxed_balanced_softmax_loss
from fedimb.core.prototypes import (
    class_prototypes,
    cyclic_targets,
    from_payload,
    to_payload,
    transfer_features,
)
from fedimb.core.schema import DOWN, FEATURE_DIM, MAX_CLASS, UP, PayloadSpec

#: class prototypes travel as (classes, vectors, counts); the global ones without counts
PROTOTYPES = "prototypes"
PROTOTYPE_CLASSES = f"{PROTOTYPES}_classes"
PROTOTYPE_VECTORS = f"{PROTOTYPES}_vectors"
PROTOTYPE_COUNTS = f"{PROTOTYPES}_counts"
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(
        PROTOTYPE_CLASSES,
        UP,
        "integer",
        ("k",),
        nonnegative=True,
        bound=MAX_CLASS,
        required=True,
        unique=True,  # one prototype per class: a repeated class would be counted twice
    ),
    PayloadSpec(PROTOTYPE_VECTORS, UP, "float", ("k", FEATURE_DIM), required=True),
    PayloadSpec(
        PROTOTYPE_COUNTS,
        UP,
        "integer",
        ("k",),
        nonnegative=True,
        total=protocol.NUM_EXAMPLES,
        required=True,
    ),
    PayloadSpec(PROTOTYPE_CLASSES, DOWN, "integer", ("k",)),
    PayloadSpec(PROTOTYPE_VECTORS, DOWN, "float", ("k", FEATURE_DIM)),
)


#: ``prototype_count``: what an attacker reports as each prototype's class count
HUGE_CLASS_COUNT = 1e300


def mismatched_prototypes(metrics: dict, num_examples: int, variant: str, scale: float):
    """``prototype_mismatch``: prototype classes that do not match their vectors, one
    class more (``classes``) or a 2-D class array (``2d``)."""
    classes = payload.unpack(metrics)[PROTOTYPE_CLASSES]
    crafted = (
        np.arange(len(classes) + 1, dtype=classes.dtype)
        if variant == "classes"
        else np.stack([classes, classes])
    )
    return replaced(metrics, {PROTOTYPE_CLASSES: crafted}), num_examples


def huge_class_counts(metrics: dict, num_examples: int, variant: str, scale: float):
    """``prototype_count``: every prototype's class count 1e300 (a float)."""
    counts = payload.unpack(metrics)[PROTOTYPE_COUNTS]
    return replaced(metrics, {PROTOTYPE_COUNTS: np.full(counts.shape, HUGE_CLASS_COUNT)}), (
        num_examples
    )


class ReBaFLClient(BaseClient):
    """Relaxed balanced softmax + prototype-based feature augmentation."""

    attacks = {
        "prototype_mismatch": MethodAttack(FIT, mismatched_prototypes, variants=("classes", "2d")),
        "prototype_count": MethodAttack(FIT, huge_class_counts),
    }

    def _local_prototypes(self):
        return class_prototypes(
            self.model.encoder, self.data.x, self.data.y, self.data.indices, device=self.device
        )

    @dataclasses.dataclass(frozen=True)
    class Settings:
        eps: float = setting(at_least(0))  # prior smoothing (eq. 10)
        mu: float = setting(at_least(0))  # μ, the weight of the augmentation loss (eq. 16)
        lam: float  # λ of the feature transfer (eq. 15)

    def before_training(self, config):
        settings = self.settings_of(config)
        self.eps, self.mu, self.lam = settings.eps, settings.mu, settings.lam
        self.counts = torch.as_tensor(
            self.data.label_counts, dtype=torch.float32, device=self.device
        )
        global_prototypes, _ = from_payload(PROTOTYPES, config)
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
        return to_payload(PROTOTYPES, prototypes, counts)
