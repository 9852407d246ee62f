"""The rules between a configuration's data set, model, partition and method: the data
set's own settings, a model that reads its inputs (character numbers or floats), a
partition that fits its natural clients, and a method that can run on them. A part of
the one table of :mod:`fedimb.app.configuration.validation`."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import method_classes
from fedimb.core.errors import require


def check_data_and_model(cfg: DictConfig) -> None:
    """The data set (its name and its own rules), the model and the partition for it, and
    whether the method can run on its inputs."""
    from fedimb.core.data.datasets import dataset_info
    from fedimb.core.models import MODELS, TOKEN_MODELS

    info = dataset_info(cfg.dataset)
    info.check_settings(cfg.dataset)
    require(
        cfg.model.name in MODELS,
        f"unknown model '{cfg.model.name}' (choose from: {', '.join(sorted(MODELS))})",
    )
    reads_tokens = cfg.model.name in TOKEN_MODELS
    require(
        reads_tokens == info.tokens,
        f"model={cfg.model.name} reads character numbers, which dataset={cfg.dataset.name} "
        f"does not hold: choose another model (model=auto: its default)"
        if reads_tokens
        else f"dataset={cfg.dataset.name} holds character numbers, which "
        f"model={cfg.model.name} cannot read: use model={', model='.join(sorted(TOKEN_MODELS))} "
        f"(model=auto: its default)",
    )
    partitions = info.partitions
    require(
        partitions is None or cfg.partition.name in partitions,
        f"dataset={cfg.dataset.name} is split by its natural clients: use partition=natural "
        f"(also accepted: {', '.join(n for n in partitions or () if n != 'natural')}), "
        f"not partition={cfg.partition.name}",
    )
    client_cls, strategy_cls = method_classes(cfg)
    if info.tokens:
        _check_method_reads_tokens(cfg, strategy_cls)
    if getattr(client_cls, "trains_encoder_alone", False):
        _check_encoder_has_parameters(cfg, info)


def _check_method_reads_tokens(cfg: DictConfig, strategy_cls: type) -> None:
    """A method that makes inputs of its own (random images, say) cannot run on a text
    data set: its strategy's ``refuses_tokens`` (a reason, or a function of its
    method.strategy settings giving one or None) says why."""
    reason = getattr(strategy_cls, "refuses_tokens", None)
    if callable(reason):
        reason = reason({k: v for k, v in cfg.method.strategy.items() if k != "_target_"})
    require(
        not reason,
        f"method '{cfg.method.name}' cannot run on dataset={cfg.dataset.name} "
        f"(its inputs are character numbers): {reason}",
    )


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
