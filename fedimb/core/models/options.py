"""Model options: the architecture changes a method asks for in its YAML
(``model_options:``), applied to the model the ``model`` config builds.

Each option is a wrapper by name (:data:`MODEL_OPTIONS`): a rule for its value, checked
with one-line errors before the model is built, and a function from the built model and
the value to the model the method trains. A method adds one here; MOON's projection head
is one like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from fedimb.core.errors import ConfigError, at_least
from fedimb.core.models.base import EncoderHeadNet
from fedimb.core.models.cosine import check_scale, with_cosine_head
from fedimb.core.models.etf import check_etf_option, with_etf_classifier

PREFIX = "method.model_options"


@dataclass(frozen=True)
class ModelOption:
    """One option: ``rule(key, value)`` raises a one-line ``ConfigError`` for a bad value;
    ``wrap(model, value)`` returns the changed model."""

    rule: Callable[[str, Any], None]
    wrap: Callable[[EncoderHeadNet, Any], EncoderHeadNet]


def with_projection(model: EncoderHeadNet, dim: int) -> EncoderHeadNet:
    """MOON's architecture (Li et al., CVPR 2021, §3.1): base encoder, a 2-layer MLP
    projection head to ``dim`` features, and the output layer on the projection."""
    d = model.feature_dim
    encoder = nn.Sequential(model.encoder, nn.Linear(d, d), nn.ReLU(), nn.Linear(d, int(dim)))
    return EncoderHeadNet(encoder, int(dim), model.num_classes)


#: the options whose model's head is no longer a linear layer
REPLACES_HEAD = ("cosine_head", "etf_classifier")

#: every model option, by the name a method YAML gives it
MODEL_OPTIONS: dict[str, ModelOption] = {
    "projection_dim": ModelOption(at_least(1, integer=True), with_projection),
    "cosine_head": ModelOption(check_scale, with_cosine_head),
    "etf_classifier": ModelOption(check_etf_option, with_etf_classifier),
}


def check_model_options(options: Mapping[str, Any]) -> None:
    """One-line ``ConfigError`` for an unknown option or a value against its rule."""
    for name, value in options.items():
        if name not in MODEL_OPTIONS:
            raise ConfigError(
                f"unknown {PREFIX}.{name} (choose from: {', '.join(sorted(MODEL_OPTIONS))})"
            )
        MODEL_OPTIONS[name].rule(f"{PREFIX}.{name}", value)


def apply_model_options(model: EncoderHeadNet, options: Mapping[str, Any]) -> EncoderHeadNet:
    """``model`` changed by each option in turn (checked first)."""
    check_model_options(options)
    for name, value in options.items():
        model = MODEL_OPTIONS[name].wrap(model, value)
    return model
