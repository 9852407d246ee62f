"""Model registry: every model has an explicit encoder/head split."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from fedimb.core.errors import ConfigError
from fedimb.core.models.base import (
    EncoderHeadNet,
    get_weights,
    num_parameters,
    set_weights,
    trainable_indices,
)
from fedimb.core.models.zoo import astraea_cnn, cnn28, cnn32, ecg_cnn1d, mclr, mlp, resnet

MODELS: dict[str, Callable[..., EncoderHeadNet]] = {
    "cnn28": cnn28,
    "cnn32": cnn32,
    "astraea_cnn": astraea_cnn,
    "mlp": mlp,
    "mclr": mclr,
    "resnet": resnet,
    "ecg_cnn1d": ecg_cnn1d,
}


def build_model(
    spec: Mapping[str, Any], input_shape: tuple[int, ...], num_classes: int, seed: int | None = None
) -> EncoderHeadNet:
    """Build the model a ``model`` config node names; ``seed`` fixes the initialisation."""
    name = str(spec["name"])
    if name not in MODELS:
        raise ConfigError(f"unknown model '{name}' (choose from: {', '.join(sorted(MODELS))})")
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.items() if k != "name"}
    projection_dim = kwargs.pop("projection_dim", None)
    if seed is not None:
        torch.manual_seed(int(seed))
    try:
        model = MODELS[name](tuple(input_shape), int(num_classes), **kwargs)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(
            f"model '{name}' cannot be built for input {tuple(input_shape)}: {err}"
        ) from None
    model = model if projection_dim is None else with_projection(model, int(projection_dim))
    return in_fast_layout(model)


def in_fast_layout(model: nn.Module) -> nn.Module:
    """Convolutional models in channels-last memory layout: oneDNN's convolutions train
    about 1.25x faster that way on CPU (measured for cnn28, one thread; faster on GPU
    too). Only the layout changes: shapes, values and exchanged arrays stay the same."""
    if any(isinstance(m, nn.Conv2d) for m in model.modules()):
        model = model.to(memory_format=torch.channels_last)
    return model


def with_projection(model: EncoderHeadNet, dim: int) -> EncoderHeadNet:
    """MOON's architecture (Li et al., CVPR 2021, §3.1): base encoder, a 2-layer MLP
    projection head to ``dim`` features, and the output layer on the projection."""
    if dim < 1:
        raise ConfigError(f"projection_dim must be >= 1, got {dim}")
    d = model.feature_dim
    encoder = nn.Sequential(model.encoder, nn.Linear(d, d), nn.ReLU(), nn.Linear(d, dim))
    return EncoderHeadNet(encoder, dim, model.num_classes)


__all__ = [
    "MODELS",
    "EncoderHeadNet",
    "build_model",
    "get_weights",
    "num_parameters",
    "set_weights",
    "trainable_indices",
]
