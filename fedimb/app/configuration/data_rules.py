"""The rules between a configuration's data set, model and method: the data set's own
settings, a model it knows, and an encoder with parameters where the method trains the
encoder apart from the head. A part of the one table of
:mod:`fedimb.app.configuration.validation`."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import method_classes
from fedimb.core.errors import require


def check_data_and_model(cfg: DictConfig) -> None:
    """The data set (its name and its own rules) and the model for it."""
    from fedimb.core.data.datasets import dataset_info
    from fedimb.core.models import MODELS

    info = dataset_info(cfg.dataset)
    info.check_settings(cfg.dataset)
    require(
        cfg.model.name in MODELS,
        f"unknown model '{cfg.model.name}' (choose from: {', '.join(sorted(MODELS))})",
    )
    client_cls, _ = method_classes(cfg)
    if getattr(client_cls, "trains_encoder_alone", False):
        _check_encoder_has_parameters(cfg, info)


def _check_encoder_has_parameters(cfg: DictConfig, info) -> None:
    """A method that trains the encoder apart from the head needs an encoder with
    parameters (``model=mclr`` has none unless ``model.encoder=linear``)."""
    from fedimb.core.models import build_model

    settings = cast(dict[str, Any], OmegaConf.to_container(cfg.model, resolve=True))
    model = build_model(settings, info.input_shape, info.num_classes)
    require(
        any(True for _ in model.encoder.parameters()),
        f"method '{cfg.method.name}' trains the model's encoder apart from its head, but "
        f"model={cfg.model.name}'s encoder has no parameters (it passes the inputs through): "
        f"set model=mclr model.encoder=linear (an identity-initialised linear encoder) or "
        f"choose another model",
    )
