"""Everything a strategy needs from the run besides Flower: config, data, model, dropout."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from fedimb.app.build import (
    ExperimentData,
    as_tensors,
    experiment_data,
    new_model,
    resolve_device,
)
from fedimb.core.dropout import Availability, availability_from_config
from fedimb.core.models import EncoderHeadNet, get_weights, set_weights
from fedimb.core.training import evaluate_model


@dataclass
class ServerRun:
    """The server's view of one experiment."""

    cfg: DictConfig
    data: ExperimentData
    availability: Availability
    device: torch.device
    _eval_model: EncoderHeadNet | None = field(default=None, repr=False)

    @classmethod
    def build(cls, cfg: DictConfig) -> "ServerRun":
        data = experiment_data(cfg)
        availability = availability_from_config(
            OmegaConf.to_container(cfg.dropout, resolve=True), int(cfg.num_clients),
            data.partition.groups, int(cfg.seed),
        )
        return cls(cfg=cfg, data=data, availability=availability, device=resolve_device(cfg))

    @property
    def num_clients(self) -> int:
        return int(self.cfg.num_clients)

    @cached_property
    def has_local_tests(self) -> bool:
        """Whether clients have local test sets: held out by ``evaluation.local_test_fraction``,
        or their own where the data set marks each test sample's client (Synthetic)."""
        own = self.data.dataset.groups_test is not None and str(self.cfg.partition.name) == "natural"
        return own or float(self.cfg.evaluation.get("local_test_fraction", 0.0) or 0.0) > 0

    @cached_property
    def empty_clients(self) -> frozenset[int]:
        """Clients the partition left without training samples (only with
        ``partition.allow_empty_clients``; the front end refuses them otherwise)."""
        return frozenset(self.data.partition.empty_clients)

    @cached_property
    def num_parameters(self) -> int:
        """Values in the run's model (every array of its state)."""
        return sum(int(np.prod(w.shape)) for w in self.initial_weights())

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

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

    def evaluate(self, weights: list[np.ndarray], model: EncoderHeadNet | None = None) -> dict[str, object]:
        """Test metrics of ``weights`` (loaded into ``model`` or the run's model)."""
        if model is None:
            if self._eval_model is None:
                self._eval_model = self.new_model().to(self.device)
            model = self._eval_model
        set_weights(model, weights)
        x, y = as_tensors(self.data.dataset.x_test, self.data.dataset.y_test)
        return evaluate_model(
            model.to(self.device), x.to(self.device), y.to(self.device), self.num_classes,
            int(self.cfg.evaluation.batch_size),
        )
