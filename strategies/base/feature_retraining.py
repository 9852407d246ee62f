"""Re-training the global model's classifier on the server, on features rather than
inputs (a mixin for :class:`strategies.base.BaseStrategy`): CCVR's calibration on virtual
representations, CReFF's re-training on federated features. A copy of the model gets a
new ``head`` (the final ``nn.Linear``) trained by cross-entropy; the encoder's arrays are
returned untouched. Seeded by the run's training seed and the round, so that a rerun
trains the same head; timed as the server phase ``retrain_head`` of the round's log."""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np
import torch
from torch import nn

from fedimb.app.server.run_context import ServerRun
from fedimb.core.models import get_weights, set_weights
from fedimb.core.no_dynamo import without_dynamo
from fedimb.core.training import seeded_generator, train_epochs
from strategies.base.accounting import RoundAccounting

#: the server phase (``timing`` of the round's event) the re-training is timed as
RETRAIN_PHASE = "retrain_head"


@dataclasses.dataclass(frozen=True)
class HeadTraining:
    """How the server trains the head: the method's settings (its YAML), not the clients'
    ``train`` section. Plain mini-batch SGD, as both papers describe it."""

    epochs: int
    batch_size: int
    lr: float
    momentum: float
    weight_decay: float

    def optimizer(self, params) -> torch.optim.Optimizer:
        return without_dynamo(
            lambda: torch.optim.SGD(
                params, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay
            )
        )


class RetrainingHost(Protocol):
    """What :class:`FeatureRetraining` reads of the strategy it is part of."""

    run: ServerRun
    accounting: RoundAccounting


def retraining_model(host: RetrainingHost) -> nn.Module:
    """The model the head is re-trained in, built once per strategy (the first time):
    each round only its weights change, so a round builds no model."""
    model = getattr(host, "_retraining_model", None)
    if model is None:
        model = host.run.new_model()
        host._retraining_model = model  # type: ignore[attr-defined]
    return model


class FeatureRetraining:
    """The server's classifier re-training on (features, labels)."""

    #: the re-training reads a whole round's features: no asynchronous modes
    asynchronous = False

    def retrain_head(
        self: RetrainingHost,
        weights: list[np.ndarray],
        features: np.ndarray,
        labels: np.ndarray,
        training: HeadTraining,
        server_round: int,
    ) -> list[np.ndarray]:
        """``weights`` (the model's state_dict arrays) with the head re-trained from its
        current values on ``features`` (n × feature_dim) and ``labels`` (n,); every other
        array is returned as it came. Without features the weights come back unchanged."""
        with self.accounting.phase(RETRAIN_PHASE):
            if len(labels) == 0:
                return [np.array(w, copy=True) for w in weights]
            model = retraining_model(self)
            set_weights(model, weights)
            device = self.run.device
            head = model.head.to(device)
            x = torch.as_tensor(np.asarray(features), dtype=torch.float32, device=device)
            y = torch.as_tensor(np.asarray(labels), dtype=torch.int64, device=device)
            train_epochs(
                head,
                x,
                y,
                torch.arange(len(y)),
                epochs=training.epochs,
                batch_size=training.batch_size,
                optimizer=training.optimizer(head.parameters()),
                loss_fn=lambda xb, yb: nn.functional.cross_entropy(head(xb), yb),
                generator=seeded_generator(self.run.seed, server_round),
                device=device,
            )
            retrained = get_weights(model.cpu())
        return retrained
