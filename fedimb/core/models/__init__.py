"""Model registry: every model has an explicit encoder/head split."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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
from fedimb.core.models.options import apply_model_options, check_model_options
from fedimb.core.models.zoo import (
    astraea_cnn,
    char_lstm,
    cnn28,
    cnn32,
    ecg_cnn1d,
    mclr,
    mlp,
    resnet,
)

MODELS: dict[str, Callable[..., EncoderHeadNet]] = {
    "cnn28": cnn28,
    "cnn32": cnn32,
    "astraea_cnn": astraea_cnn,
    "mlp": mlp,
    "mclr": mclr,
    "resnet": resnet,
    "ecg_cnn1d": ecg_cnn1d,
    "char_lstm": char_lstm,
}
#: the models that read token numbers (a text data set's inputs); the others read floats
TOKEN_MODELS = frozenset({"char_lstm"})


def build_model(
    spec: Mapping[str, Any],
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> EncoderHeadNet:
    """Build the model a ``model`` config node names, changed by a method's ``options``
    (:mod:`fedimb.core.models.options`); ``seed`` fixes the initialisation."""
    name = str(spec["name"])
    if name not in MODELS:
        raise ConfigError(f"unknown model '{name}' (choose from: {', '.join(sorted(MODELS))})")
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.items() if k != "name"}
    check_model_options(options or {})
    if seed is not None:
        torch.manual_seed(int(seed))
    try:
        model = MODELS[name](tuple(input_shape), int(num_classes), **kwargs)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(
            f"model '{name}' cannot be built for input {tuple(input_shape)}: {err}"
        ) from None
    return in_fast_layout(apply_model_options(model, options or {}))


Model = TypeVar("Model", bound=nn.Module)


def in_fast_layout(model: Model) -> Model:
    """Convolutional models in channels-last memory layout, which oneDNN's convolutions
    train faster in. Only the layout changes: shapes, values and exchanged arrays stay
    the same."""
    if any(isinstance(m, nn.Conv2d) for m in model.modules()):
        model = model.to(memory_format=torch.channels_last)
    return model


__all__ = [
    "MODELS",
    "TOKEN_MODELS",
    "EncoderHeadNet",
    "build_model",
    "get_weights",
    "num_parameters",
    "set_weights",
    "trainable_indices",
]
