"""CReFF server (Shang et al., "Federated Learning on Heterogeneous and Long-Tailed Data via
Classifier Re-training with Federated Features", IJCAI 2022, §4; authors' code
shangxinyi/CReFF-FL, ``main.py``).

Every round:

1. The global model w^t goes to the clients with the classifier φ̃ re-trained in the
   previous round (round 1: the run's initial head); each client returns its model and,
   per class it holds, the real feature gradient ∇_φ̃ CE on its features
   (:mod:`clients.creff`).
2. w^(t+1) is FedAvg's average of the models: the model that goes on training.
3. Per class, the clients' real feature gradients are averaged (uniformly over the
   clients reporting the class, as the authors' code does) into g_c.
4. The federated features F (``features_per_class`` per class, kept across rounds,
   initialised from N(0, 1)) are optimised by SGD to minimise the gradient-matching loss
   Σ_c D(∇_φ̃ CE(φ̃(F_c), c), g_c) over the classes with a g_c, D the layer-wise cosine
   distance :func:`matching_distance`.
5. A classifier is re-trained on (F, labels) from a fresh initialisation (the run's
   initial head) by cross-entropy (:class:`FeatureRetraining`): it is φ̃ for the next
   round and, on w^(t+1)'s encoder, the model the server tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays
from torch import nn

from clients.creff import (
    GRADIENT_BIASES,
    GRADIENT_CLASSES,
    GRADIENT_WEIGHTS,
    PAYLOADS,
    RETRAINED_BIAS,
    RETRAINED_WEIGHT,
)
from fedimb.core import payload
from fedimb.core.errors import at_least
from fedimb.core.settings import setting
from strategies.base import ClientUpdate
from strategies.base.averaging import AveragingStrategy
from strategies.base.feature_retraining import FeatureRetraining, HeadTraining

#: :meth:`strategies.base.InfluenceBounds.bounded_vectors`: (clients, arrays, what) -> arrays
BoundVectors = Callable[[list[int], list[np.ndarray], str], list[np.ndarray]]

#: the server phase the matching of the federated features is timed as
MATCH_PHASE = "match_features"
#: keeps the cosine finite for a zero gradient (the authors' code adds the same)
COSINE_EPSILON = 1e-6


def matching_distance(synthetic: list[torch.Tensor], real: list[torch.Tensor]) -> torch.Tensor:
    """D(∇^syn, ∇^real) = Σ_layers Σ_i (1 − ⟨a_i, b_i⟩ / (‖a_i‖ ‖b_i‖ + ε)): a weight
    matrix compared row by row (one row per output class), a bias as one vector."""
    total = torch.zeros(())
    for a, b in zip(synthetic, real, strict=True):
        a2 = a.reshape(1, -1) if a.dim() == 1 else a.reshape(a.shape[0], -1)
        b2 = b.reshape(1, -1) if b.dim() == 1 else b.reshape(b.shape[0], -1)
        cosine = (a2 * b2).sum(-1) / (a2.norm(dim=-1) * b2.norm(dim=-1) + COSINE_EPSILON)
        total = total + (1 - cosine).sum()
    return total


def match_features(
    features: np.ndarray,
    targets: dict[int, tuple[np.ndarray, np.ndarray]],
    weight: np.ndarray,
    bias: np.ndarray,
    steps: int,
    lr: float,
) -> tuple[np.ndarray, float]:
    """``steps`` SGD steps on the federated features (C·m × d, class c in rows c·m..(c+1)·m)
    against the real gradients ``targets`` (class -> (g_W, g_b)); returns the features and
    the last step's matching loss. The classifier (W, b) stays fixed."""
    per_class = len(features) // len(bias)
    f = torch.tensor(features, dtype=torch.float32, requires_grad=True)
    w = torch.tensor(weight, dtype=torch.float32, requires_grad=True)
    b = torch.tensor(bias, dtype=torch.float32, requires_grad=True)
    real = {c: [torch.as_tensor(g, dtype=torch.float32) for g in gs] for c, gs in targets.items()}
    optimizer = torch.optim.SGD([f], lr=lr)
    loss = torch.zeros(())
    for _ in range(steps):
        loss = torch.zeros(())
        for c, gradient in sorted(real.items()):
            rows = f[c * per_class : (c + 1) * per_class]
            labels = torch.full((per_class,), c, dtype=torch.int64)
            ce = nn.functional.cross_entropy(rows @ w.T + b, labels)
            synthetic = torch.autograd.grad(ce, [w, b], create_graph=True)
            loss = loss + matching_distance(list(synthetic), gradient)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return f.detach().numpy().copy(), float(loss.detach())


def class_gradient_means(
    updates: list[ClientUpdate], bounded: BoundVectors | None = None
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """g_c per class: the uniform mean of the clients' real feature gradients of class c,
    each client's g_W first bounded against the others' of that class by ``bounded``
    (:meth:`strategies.base.InfluenceBounds.bounded_vectors`; g_b lies in [−1, 1] by its
    declaration)."""
    by_class: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for u in updates:
        arrays = u.payload
        for c, gw, gb in zip(
            arrays[GRADIENT_CLASSES], arrays[GRADIENT_WEIGHTS], arrays[GRADIENT_BIASES]
        ):
            by_class.setdefault(int(c), []).append((u.partition_id, gw, gb))
    means = {}
    for c, rows in sorted(by_class.items()):
        pids, weights, biases = zip(*rows)
        if bounded is not None:
            weights = tuple(bounded(list(pids), list(weights), f"feature gradient of class {c}"))
        means[c] = (sum(weights) / len(rows), sum(biases) / len(rows))
    return means


class CReFFStrategy(FeatureRetraining, AveragingStrategy):
    """FedAvg plus a classifier re-trained on federated features every round."""

    payloads = PAYLOADS
    checkpoint_attributes = ("federated_features", "retrained_head")

    @dataclasses.dataclass(frozen=True)
    class Settings:
        features_per_class: int = setting(at_least(1, integer=True))
        match_steps: int = setting(at_least(1, integer=True))
        feature_lr: float = setting(at_least(0, strict=True))
        retrain_epochs: int = setting(at_least(1, integer=True))
        retrain_batch_size: int = setting(at_least(1, integer=True))
        retrain_lr: float = setting(at_least(0, strict=True))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.features_per_class = int(s.features_per_class)
        self.match_steps = int(s.match_steps)
        self.feature_lr = float(s.feature_lr)
        self.retraining = HeadTraining(
            epochs=int(s.retrain_epochs),
            batch_size=int(s.retrain_batch_size),
            lr=float(s.retrain_lr),
            momentum=0.0,  # plain SGD, as the authors' code
            weight_decay=0.0,
        )
        keys = list(run.new_model().state_dict())
        self.head_indices = [keys.index("head.weight"), keys.index("head.bias")]
        initial = run.initial_weights()
        self.initial_head = [initial[i].copy() for i in self.head_indices]
        rng = np.random.default_rng(np.random.SeedSequence([run.seed, 0x0CEFF]))
        width = self.initial_head[0].shape[1]
        self.federated_features = rng.standard_normal(
            (run.num_classes * self.features_per_class, width)
        ).astype(np.float32)
        #: φ̃: the classifier re-trained last round (None before the first aggregation)
        self.retrained_head: list[np.ndarray] | None = None

    def labels(self) -> np.ndarray:
        return np.repeat(np.arange(self.run.num_classes), self.features_per_class)

    def fit_instructions(self, server_round, parameters, clients):
        weight, bias = self.retrained_head or self.initial_head
        config = {
            **self.fit_config(server_round),
            **payload.pack({RETRAINED_WEIGHT: weight, RETRAINED_BIAS: bias}),
        }
        return {pid: FitIns(parameters, dict(config)) for pid in clients}

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        new_weights = super().aggregate(server_round, updates)
        if new_weights is None:
            return None
        targets = class_gradient_means(updates, self.bounded_vectors)
        weight, bias = self.retrained_head or self.initial_head
        with self.accounting.phase(MATCH_PHASE):
            features, loss = match_features(
                self.federated_features,
                targets,
                weight,
                bias,
                self.match_steps,
                self.feature_lr,
            )
        if not self.adoptable([features], "the federated features"):
            return new_weights
        self.federated_features = features
        fresh = self.with_head(new_weights, self.initial_head)
        retrained = self.retrain_head(fresh, features, self.labels(), self.retraining, server_round)
        head = [retrained[i] for i in self.head_indices]
        current = self.with_head(new_weights, self.retrained_head or self.initial_head)
        if self.adoptable(head, "the re-trained classifier") and self.validated(
            current, self.with_head(new_weights, head), "the re-trained classifier"
        ):
            self.retrained_head = head
        self.round_log.extra.update(matching_loss=loss, matched_classes=len(targets))
        return new_weights

    def with_head(self, weights: list[np.ndarray], head: list[np.ndarray]) -> list[np.ndarray]:
        out = list(weights)
        for i, array in zip(self.head_indices, head):
            out[i] = array
        return out

    def configure_evaluate(self, server_round, parameters, client_manager):
        """The clients' local tests, too, score the model the server tests."""
        tested = ndarrays_to_parameters(self.evaluation_weights(parameters))
        return super().configure_evaluate(server_round, tested, client_manager)

    def evaluation_weights(self, parameters):
        """The tested model: the global encoder with the re-trained classifier."""
        weights = parameters_to_ndarrays(parameters)
        if self.retrained_head is None:
            return weights
        return self.with_head(weights, self.retrained_head)
