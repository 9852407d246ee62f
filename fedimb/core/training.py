"""The local training loop and model evaluation, shared by clients, the server and the
benchmarks (so the framework and the plain-loop reference run identical steps)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from fedimb.core.errors import ConfigError
from fedimb.core.metrics import classification_metrics
from fedimb.core.models.base import EncoderHeadNet
from fedimb.core.no_dynamo import without_dynamo
from fedimb.core.settings import read_declared


@dataclass(frozen=True)
class TrainConfig:
    """Local optimisation settings; declared once in ``conf/config.yaml`` (``train``)
    and sent to clients in every fit instruction."""

    local_epochs: int
    batch_size: int
    lr: float
    momentum: float
    weight_decay: float
    optimizer: str

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        cls.check_present(values)
        return read_declared(cls, values)

    @classmethod
    def check_present(cls, values: Mapping[str, Any]) -> None:
        missing = [f.name for f in fields(cls) if f.name not in values]
        if missing:
            raise ConfigError(f"training settings lack {missing}")

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def check(cls, values: Mapping[str, Any]) -> None:
        """One-line :class:`ConfigError` for the first bad training setting (``train.*``)."""
        cls.check_present(values)

        def number(key, integer=False):
            value = values[key]
            ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
            return value if ok else None

        rules = [
            ("local_epochs", number("local_epochs", True), lambda v: v >= 1, "an integer >= 1"),
            ("batch_size", number("batch_size", True), lambda v: v >= 1, "an integer >= 1"),
            ("lr", number("lr"), lambda v: v > 0, "> 0"),
            ("momentum", number("momentum"), lambda v: 0 <= v < 1, "in [0, 1)"),
            ("weight_decay", number("weight_decay"), lambda v: v >= 0, ">= 0"),
        ]
        for key, value, ok, what in rules:
            if value is None or not ok(value):
                raise ConfigError(f"train.{key} must be {what}, got {values[key]!r}")
        if values["optimizer"] not in OPTIMIZERS:
            raise ConfigError(
                f"unknown train.optimizer '{values['optimizer']}' "
                f"(choose from: {', '.join(OPTIMIZERS)})"
            )


#: the training settings every fit instruction carries (``train`` in conf/config.yaml)
TRAIN_KEYS = tuple(f.name for f in fields(TrainConfig))
OPTIMIZERS = ("sgd", "adam")


def make_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Every optimiser fedimb trains with; none imports TorchDynamo
    (:mod:`fedimb.core.no_dynamo`)."""
    if cfg.optimizer == "sgd":
        return without_dynamo(
            lambda: torch.optim.SGD(
                params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
            )
        )
    if cfg.optimizer == "adam":
        return without_dynamo(
            lambda: torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        )
    raise ConfigError(f"unknown optimizer '{cfg.optimizer}' (choose from: {', '.join(OPTIMIZERS)})")


def batch_indices(
    indices: torch.Tensor, batch_size: int, generator: torch.Generator
) -> Iterator[torch.Tensor]:
    """One shuffled pass over ``indices`` in mini-batches (the last one may be short)."""
    order = indices[torch.randperm(len(indices), generator=generator)]
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class TrainResult:
    mean_loss: float
    steps: int
    samples: int


def train_epochs(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    generator: torch.Generator,
    device: torch.device | None = None,
    after_backward: Callable[[], None] | None = None,
    after_step: Callable[[], None] | None = None,
) -> TrainResult:
    """Mini-batch training on ``x[indices]``; ``loss_fn(xb, yb)`` returns the batch loss.

    ``after_backward`` may edit gradients (e.g. control variates); ``after_step`` sees
    every optimiser step (e.g. step counting).
    """
    model.train()
    total, steps, samples = 0.0, 0, 0
    for _ in range(epochs):
        for idx in batch_indices(indices, batch_size, generator):
            xb, yb = x[idx], y[idx]
            if device is not None and device.type != "cpu":
                xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(xb, yb)
            loss.backward()
            if after_backward is not None:
                after_backward()
            optimizer.step()
            if after_step is not None:
                after_step()
            total += float(loss.detach()) * len(idx)
            samples += len(idx)
            steps += 1
    return TrainResult(total / max(samples, 1), steps, samples)


def train_cross_entropy(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    hp: TrainConfig,
    generator: torch.Generator,
    after_backward: Callable[[], None] | None = None,
    device: torch.device | None = None,
) -> TrainResult:
    """Plain cross-entropy training of ``model`` on ``x[indices]`` with ``hp``'s epochs,
    batch size and optimiser: FedAvg's local objective without a client around it (the
    reference benchmarks and tests compare the clients with), and a frozen encoder's head."""
    return train_epochs(
        model,
        x,
        y,
        indices,
        epochs=hp.local_epochs,
        batch_size=hp.batch_size,
        optimizer=make_optimizer(model.parameters(), hp),
        loss_fn=lambda xb, yb: nn.functional.cross_entropy(model(xb), yb),
        generator=generator,
        device=device,
        after_backward=after_backward,
    )


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1000) -> torch.Tensor:
    """Logits of ``model`` on ``x`` in evaluation mode."""
    model.eval()
    return torch.cat([model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])


def train_head(
    model: EncoderHeadNet,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: TrainConfig,
    generator: torch.Generator,
    device: torch.device,
) -> TrainResult:
    """Train ``model.head`` alone by cross-entropy on ``(x, y)``; the encoder stays frozen,
    so its features are computed once."""
    features = predict(model.encoder, x.to(device))
    labels = y.to(device)
    indices = torch.arange(len(labels))
    return train_cross_entropy(model.head, features, labels, indices, cfg, generator, device=device)


def evaluate_model(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, num_classes: int, batch_size: int = 1000
) -> dict[str, object]:
    """Loss, accuracy, macro-F1 and per-class recall of ``model`` on ``(x, y)``; the
    labels may stay on the CPU while the model and inputs are on a GPU."""
    return evaluate_predictions(model, x, y, num_classes, batch_size)[0]


@torch.no_grad()
def evaluate_predictions(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, num_classes: int, batch_size: int = 1000
) -> tuple[dict[str, object], np.ndarray]:
    """:func:`evaluate_model`'s metrics and the predicted classes, in one pass batch by
    batch: a large test set's logits are never held at once (4.5 million samples at
    100,000 Synthetic devices). The cross-entropy of a batch is logsumexp(z) - z_y, summed
    in float64: equal to ``nn.functional.cross_entropy`` to float32 rounding, whose
    log-softmax is slow on the CPU with few classes."""
    model.eval()
    y = y.to(x.device)
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    predicted = torch.empty(len(x), dtype=torch.int64, device=x.device)
    for start in range(0, len(x), batch_size):
        logits = model(x[start : start + batch_size])
        labels = y[start : start + batch_size]
        target = logits.gather(1, labels[:, None])[:, 0]
        total += (torch.logsumexp(logits, dim=1) - target).sum(dtype=torch.float64)
        predicted[start : start + batch_size] = logits.argmax(dim=1)
    classes = predicted.cpu().numpy()
    loss = float(total) / len(x) if len(x) else float("nan")
    metrics = classification_metrics(y.cpu().numpy(), classes, num_classes)
    return {"loss": loss, **metrics}, classes


def seeded_generator(*keys: int) -> torch.Generator:
    """A torch generator seeded from several integers (seed, round, client, ...)."""
    seed = int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0])
    return torch.Generator().manual_seed(seed)
