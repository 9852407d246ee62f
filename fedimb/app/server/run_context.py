"""Everything a strategy needs from the run besides Flower: config, data, model, dropout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

import numpy as np
import torch
from omegaconf import DictConfig

from fedimb.app.configuration import holdout
from fedimb.app.configuration.build import (
    ExperimentData,
    as_tensors,
    client_split,
    experiment_data,
    new_model,
    plain,
    resolve_device,
)
from fedimb.app.configuration.seeds import train_seed
from fedimb.core import protocol
from fedimb.core.data.stats import label_counts
from fedimb.core.dropout import Availability, availability_from_config
from fedimb.core.feature_stats import class_moments
from fedimb.core.models import EncoderHeadNet, get_weights, set_weights
from fedimb.core.speed import SpeedModel, speed_model
from fedimb.core.training import (
    TrainConfig,
    evaluate_model,
    evaluate_predictions,
    predict,
    seeded_generator,
    train_cross_entropy,
)


@dataclass
class ServerRun:
    """The server's view of one experiment."""

    cfg: DictConfig
    data: ExperimentData
    availability: Availability
    device: torch.device
    _eval_model: EncoderHeadNet | None = field(default=None, repr=False)
    _local_model: EncoderHeadNet | None = field(default=None, repr=False)
    _loss_model: EncoderHeadNet | None = field(default=None, repr=False)
    #: the weights last tested on the test set with the run's model, and their predicted
    #: classes: the local evaluation of the same weights reads them instead of a second pass
    _tested: tuple[list[np.ndarray], np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, cfg: DictConfig) -> ServerRun:
        data = experiment_data(cfg)
        availability = availability_from_config(
            plain(cfg.dropout),
            int(cfg.num_clients),
            data.partition.groups,
            train_seed(cfg),
        )
        return cls(cfg=cfg, data=data, availability=availability, device=resolve_device(cfg))

    @property
    def num_clients(self) -> int:
        return int(self.cfg.num_clients)

    @cached_property
    def has_local_tests(self) -> bool:
        """Whether clients have local test sets: held out by ``evaluation.local_test_fraction``,
        or their own where the data set marks each test sample's client (Synthetic)."""
        return self.holds_client_tests or float(self.cfg.evaluation.local_test_fraction) > 0

    @cached_property
    def holds_client_tests(self) -> bool:
        """Whether the server holds every client's own test set: the data set marks each
        test sample's client (Synthetic's devices) and the partition is the natural one.
        The server then tests the global model on them itself (:meth:`local_accuracies`),
        where a message to every client would cost as much as round 1's discovery."""
        return (
            self.data.dataset.groups_test is not None and str(self.cfg.partition.name) == "natural"
        )

    def client_training_indices(self, pid: int) -> np.ndarray:
        """Client ``pid``'s training samples, split as the client splits them."""
        indices = self.data.partition.indices[pid]
        return client_split(self.cfg, indices, pid, self.data.dataset.y_train).train

    def client_training_loss(self, weights: list[np.ndarray], pid: int) -> float:
        """Mean cross-entropy of ``weights`` on client ``pid``'s training samples, as the
        client computes it (``BaseClient.local_loss``: the same split, batch size and
        function), with a model of its own: the server holds every partition, so it can
        check a loss a client reports (q-FFL's and AFL's F_k) instead of trusting it."""
        if self._loss_model is None:
            self._loss_model = self.new_model().to(self.device)
        set_weights(self._loss_model, weights)
        train = self.client_training_indices(pid)
        x, y = as_tensors(self.data.dataset.x_train[train], self.data.dataset.y_train[train])
        metrics = evaluate_model(self._loss_model, x.to(self.device), y, self.num_classes)
        return float(cast(float, metrics["loss"]))

    def replayed_training_loss(
        self, weights: list[np.ndarray], pid: int, config: Mapping[str, Any]
    ) -> float:
        """The mean batch loss client ``pid`` reports (``train_loss``) when it trains
        ``weights`` by plain cross-entropy under the fit instruction ``config``: its
        training replayed on the server, which holds its samples, the seed of its batch
        order (``BaseClient.generator``) and the instruction's optimiser settings."""
        if self._loss_model is None:
            self._loss_model = self.new_model().to(self.device)
        set_weights(self._loss_model, weights)
        train = self.client_training_indices(pid)
        x, y = as_tensors(self.data.dataset.x_train, self.data.dataset.y_train)
        order = seeded_generator(
            int(config[protocol.SEED]), int(config[protocol.SERVER_ROUND]), pid
        )
        result = train_cross_entropy(
            self._loss_model,
            x.to(self.device),
            y.to(self.device),
            torch.from_numpy(train),
            TrainConfig.from_mapping(config),
            order,
            device=self.device,
        )
        return result.mean_loss

    def client_feature_moments(
        self, weights: list[np.ndarray], pid: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CCVR's eq. 1 (per-class feature means, covariances and counts) on client
        ``pid``'s training samples under ``weights``' encoder, as the client computes it
        (``CCVRClient.feature_statistics``)."""
        if self._loss_model is None:
            self._loss_model = self.new_model().to(self.device)
        set_weights(self._loss_model, weights)
        train = self.client_training_indices(pid)
        x = torch.from_numpy(self.data.dataset.x_train[train]).to(self.device)
        features = predict(self._loss_model.encoder, x).cpu().numpy()
        return class_moments(features, self.data.dataset.y_train[train], self.num_classes)

    def client_label_counts(self, pid: int) -> np.ndarray:
        """Client ``pid``'s label histogram of its training samples, as the client
        computes it (the same split): what an honest client reports."""
        train = self.client_training_indices(pid)
        return label_counts(self.data.dataset.y_train[train], self.num_classes)

    def local_accuracies(self, weights: list[np.ndarray], clients: list[int]) -> dict[int, float]:
        """Accuracy of ``weights`` on each of ``clients``' own test sets, from one pass
        over the global test set (their union): :meth:`test_predictions`."""
        predicted = self.test_predictions(weights)
        groups = self.data.dataset.groups_test
        assert groups is not None  # the server holds the clients' tests only where they exist
        hits = np.bincount(
            groups, weights=predicted == self.data.dataset.y_test, minlength=self.num_clients
        )
        counts = np.bincount(groups, minlength=self.num_clients)
        return {k: float(hits[k] / counts[k]) for k in clients if counts[k] > 0}

    def test_predictions(self, weights: list[np.ndarray]) -> np.ndarray:
        """The classes ``weights`` predict on the test set: those of the server's test of
        the same weights where it ran (the local evaluation follows it, and a second pass
        over a large test set costs as much as the first), else from a pass with a model of
        its own (the central test of the previous round may still run on the evaluation
        model)."""
        tested = self._tested
        if tested is not None and same_weights(tested[0], weights):
            return tested[1]
        if self._local_model is None:
            self._local_model = self.new_model().to(self.device)
        return self._score(self._local_model, weights, "test")[1]

    @cached_property
    def empty_clients(self) -> frozenset[int]:
        """Clients the partition left without training samples (only with
        ``partition.allow_empty_clients``; the front end refuses them otherwise)."""
        return frozenset(self.data.partition.empty_clients)

    @cached_property
    def client_seconds(self) -> np.ndarray | None:
        """Per client, the simulated seconds of one fit under the run's device-speed model
        (:mod:`fedimb.core.speed`); None with ``speed=none``."""
        if str(self.cfg.speed.name) == "none":
            return None
        counts = [self.client_label_counts(pid) for pid in range(self.num_clients)]
        model = cast(SpeedModel, speed_model(plain(self.cfg.speed), counts, self.seed))
        epochs = int(self.cfg.train.local_epochs)
        return np.array([model.seconds(pid, int(c.sum()), epochs) for pid, c in enumerate(counts)])

    @cached_property
    def num_parameters(self) -> int:
        """Values in the run's model (every array of its state)."""
        return sum(int(np.prod(w.shape)) for w in self.initial_weights())

    @property
    def seed(self) -> int:
        """The training seed: sampling, the clients' batch order, a method's own randomness."""
        return train_seed(self.cfg)

    @property
    def num_classes(self) -> int:
        return self.data.dataset.num_classes

    def new_model(self) -> EncoderHeadNet:
        """A freshly initialised model (identical across processes for a given seed)."""
        return new_model(self.cfg, self.data.dataset)

    def initial_weights(self) -> list[np.ndarray]:
        return get_weights(self.new_model())

    def score_probabilities(self, probabilities: np.ndarray) -> dict[str, object]:
        """Test metrics of predicted class probabilities (e.g. an ensemble's mean)."""
        from fedimb.core.metrics import classification_metrics

        y = self.data.dataset.y_test
        p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-12, 1.0)
        loss = float(-np.mean(np.log(p[np.arange(len(y)), y])))
        return {"loss": loss, **classification_metrics(y, p.argmax(axis=1), self.num_classes)}

    @property
    def has_validation(self) -> bool:
        """Whether the server holds a validation share (``validation.fraction`` > 0)."""
        return self.data.dataset.y_val is not None

    @property
    def validation_chance(self) -> float | None:
        """The validation accuracy of always predicting its most frequent class (what a
        collapsed model scores; ``fedimb tune`` reads it), None without a validation share."""
        labels = self.data.dataset.y_val
        if labels is None or len(labels) == 0:
            return None
        return float(np.bincount(np.asarray(labels)).max() / len(labels))

    @property
    def reads_test(self) -> bool:
        """Whether the server scores the global model on the test set (``evaluation.test``;
        false in tuning, where only the validation share may choose)."""
        return holdout.reads_test(self.cfg)

    def evaluate(
        self,
        weights: list[np.ndarray],
        model: EncoderHeadNet | None = None,
        split: str = "test",
    ) -> dict[str, object]:
        """Metrics of ``weights`` (loaded into ``model`` or the run's model) on the test set
        or, with ``split="validation"``, on the validation share."""
        own_model = model is None
        if model is None:
            if self._eval_model is None:
                self._eval_model = self.new_model().to(self.device)
            model = self._eval_model
        metrics, predicted = self._score(model, weights, split)
        if split == "test" and own_model:
            self._tested = ([np.array(w, copy=True) for w in weights], predicted)
        return metrics

    def _score(
        self, model: EncoderHeadNet, weights: list[np.ndarray], split: str
    ) -> tuple[dict[str, object], np.ndarray]:
        """``weights`` loaded into ``model`` and scored on ``split`` in one pass: the
        metrics and the predicted classes."""
        set_weights(model, weights)
        dataset = self.data.dataset
        if split == "validation":
            assert dataset.x_val is not None and dataset.y_val is not None
            x, y = as_tensors(dataset.x_val, dataset.y_val)
        else:
            x, y = as_tensors(dataset.x_test, dataset.y_test)
        model = model.to(self.device)
        batch_size = int(self.cfg.evaluation.batch_size)
        return evaluate_predictions(model, x.to(self.device), y, self.num_classes, batch_size)


def same_weights(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether two lists of arrays hold the same values in the same shapes."""
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b)
    )
