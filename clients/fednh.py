"""FedNH client (Dai et al., "Tackling Data Heterogeneity in Federated Learning with
Class Prototypes", AAAI 2023), client side; the formulas follow the authors' code
(Yutong-Dai/FedNH: ``src/flbase/strategies/FedNH.py``, ``FedUH.py``, ``models/CNN.py``).

The model's head is the cosine classifier of :mod:`fedimb.core.models.cosine`:
logits = s·cos(f(x), p_c), with the class prototypes p_c as the head's ``weight``.
Local training minimises the cross-entropy of those logits over the encoder (and the
scale s, learnable in the authors' code unless fixed) with the prototypes FROZEN: they
are left out of the optimiser, so neither gradient, momentum nor weight decay moves
them. After training, the client reports, per class it holds, the mean of its
normalised features f(x)/‖f(x)‖ under the trained encoder, and the class count; the
server smooths the prototypes towards them (:mod:`strategies.fednh`).

Personal model (the paper's PM): the client's model right after its latest local
training, as the authors' code tests it (each client's local model after training, on
its own test distribution); it is kept in its client state and scored by the personal
evaluation (``evaluation.personal=true``). A client that has not trained yet uses the
received global model.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clients.base import BaseClient, PersonalEvaluation
from clients.base_settings import setting
from fedimb.app.faults.method_attacks import FIT, MethodAttack, replaced
from fedimb.core import payload, protocol
from fedimb.core.models import get_weights, set_weights
from fedimb.core.models.cosine import prototype_slot
from fedimb.core.prototypes import unit_feature_means
from fedimb.core.schema import FEATURE_DIM, NUM_CLASSES, UP, PayloadSpec

#: client -> server: per class, the mean of the normalised features (zero rows for
#: absent classes; each entry of a mean of unit vectors lies in [-1, 1])
FEATURE_MEANS = "feature_means"
#: client -> server: the local label histogram n_k,c
CLASS_COUNTS = "class_counts"
PAYLOADS = protocol.PERSONAL_PAYLOADS + (
    PayloadSpec(FEATURE_MEANS, UP, "float", (NUM_CLASSES, FEATURE_DIM), bound=1.0, required=True),
    PayloadSpec(
        CLASS_COUNTS,
        UP,
        "integer",
        (NUM_CLASSES,),
        nonnegative=True,
        total=protocol.NUM_EXAMPLES,
        required=True,
    ),
)
#: the client-state record of the model after the latest local training (the PM)
PERSONAL_STATE = "fednh_personal"


def flipped_means(metrics: dict, num_examples: int, variant: str, scale: float):
    """``prototype_flip``: the class means sign-flipped, which keeps every declared bound."""
    return replaced(metrics, {FEATURE_MEANS: -payload.unpack(metrics)[FEATURE_MEANS]}), (
        num_examples
    )


class FedNHClient(PersonalEvaluation, BaseClient):
    """Cross-entropy of the cosine logits with fixed prototypes; reports class means."""

    attacks = {"prototype_flip": MethodAttack(FIT, flipped_means)}

    trains_encoder_alone = True  # the prototypes stay fixed: the encoder must have parameters

    @dataclasses.dataclass(frozen=True)
    class Settings:
        # whether local training updates the scale s (the authors' code: learnable)
        train_scale: bool = setting()

    def trainable_parameters(self):
        """Everything but the prototypes (and the scale unless ``train_scale``)."""
        head = self.model.head
        prototype_slot(self.model)  # a one-line error for a model without the cosine head
        frozen = {id(head.weight)} | (set() if self.settings.train_scale else {id(head.scale)})
        return [p for p in self.model.parameters() if id(p) not in frozen]

    def after_training(self, config, result):
        means, counts = unit_feature_means(
            self.model.encoder,
            self.data.x,
            self.data.y,
            self.data.indices,
            self.data.num_classes,
            device=self.device,
        )
        self.save_state(PERSONAL_STATE, {f"a{i}": a for i, a in enumerate(get_weights(self.model))})
        return payload.pack({FEATURE_MEANS: np.clip(means, -1.0, 1.0), CLASS_COUNTS: counts})

    def personal_model(self, parameters, config):
        """The model after this client's latest local training (FedNH's PM), else the
        received global model."""
        self.set_parameters(parameters)
        stored = self.load_state(PERSONAL_STATE)
        if stored is not None:
            set_weights(self.model, [stored[f"a{i}"] for i in range(len(stored))])
        return self.model
