"""Model registry: every model has an explicit encoder/head split."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from fedimb.errors import ConfigError
from fedimb.models.base import EncoderHeadNet, get_weights, num_parameters, set_weights
from fedimb.models.zoo import astraea_cnn, cnn28, cnn32, ecg_cnn1d, mlp, resnet

MODELS: dict[str, Callable[..., EncoderHeadNet]] = {
    "cnn28": cnn28,
    "cnn32": cnn32,
    "astraea_cnn": astraea_cnn,
    "mlp": mlp,
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
    if seed is not None:
        torch.manual_seed(int(seed))
    try:
        return MODELS[name](tuple(input_shape), int(num_classes), **kwargs)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(f"model '{name}' cannot be built for input {tuple(input_shape)}: {err}") from None


__all__ = ["MODELS", "EncoderHeadNet", "build_model", "get_weights", "num_parameters", "set_weights"]
