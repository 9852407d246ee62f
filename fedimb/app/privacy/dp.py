"""Differential privacy of the averaged model (``privacy=``, ``conf/privacy/*.yaml``):
which of Flower's central-DP wrappers a run uses, its settings and their rules, and
which methods the wrappers can protect.

A wrapper clips each client's model update and adds Gaussian noise to the average, so
it protects what is averaged, and only that. Whether a method qualifies is read from
what its strategy declares, never from a list of names: its ``robust_aggregation``
(``none``: its server step is no average of the client models) and
``ensemble_global_test`` (no global model: the clients keep personal models), and its
``payloads`` (:class:`fedimb.core.schema.PayloadSpec`): every array a client sends the
server besides its update travels unprotected, so such a method runs under DP only with
``privacy.payloads=unprotected``. The wrapping itself is
:mod:`fedimb.app.privacy.strategy`, the clients' half :mod:`fedimb.app.privacy.client_mods`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import import_class, robust_support
from fedimb.app.privacy import account
from fedimb.core import protocol, schema
from fedimb.core.errors import ConfigError, at_least, one_of, optional, require
from fedimb.core.settings import read_declared, setting_types, type_options

NONE = "none"
#: ``privacy.payloads``: refuse a method whose clients send more than their update, or run it
PAYLOAD_CHOICES = ("refuse", "unprotected")


def _rule(rule: Callable[[str, Any], None]) -> Any:
    """A declared setting (no default: the values are the YAML's) with its rule."""
    return dataclasses.field(metadata={"rule": rule})


def _delta(key: str, value: Any) -> None:
    if value is not None:
        require(0 < value < 1, f"{key} must be in (0, 1), got {value!r}")


def _fraction(key: str, value: Any) -> None:
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1,
        f"{key} must be in [0, 1], got {value!r}",
    )


@dataclasses.dataclass(frozen=True)
class FixedClipping:
    """Flower's ``DifferentialPrivacy{Server,Client}SideFixedClipping`` arguments."""

    noise_multiplier: float = _rule(at_least(0))
    clipping_norm: float = _rule(at_least(0, strict=True))
    payloads: str = _rule(one_of(*PAYLOAD_CHOICES))
    #: the account's δ (null: 1/N^1.1) and the ε that stops the run (null: none)
    delta: float | None = _rule(_delta)
    max_epsilon: float | None = _rule(optional(at_least(0, strict=True)))


@dataclasses.dataclass(frozen=True)
class AdaptiveClipping:
    """Flower's ``DifferentialPrivacy{Server,Client}SideAdaptiveClipping`` arguments."""

    noise_multiplier: float = _rule(at_least(0))
    initial_clipping_norm: float = _rule(at_least(0, strict=True))
    target_clipped_quantile: float = _rule(_fraction)
    clip_norm_lr: float = _rule(at_least(0, strict=True))
    clipped_count_stddev: float | None = _rule(optional(at_least(0)))
    num_sampled_clients: int | None = _rule(optional(at_least(1, integer=True)))
    payloads: str = _rule(one_of(*PAYLOAD_CHOICES))
    #: the account's δ (null: 1/N^1.1) and the ε that stops the run (null: none)
    delta: float | None = _rule(_delta)
    max_epsilon: float | None = _rule(optional(at_least(0, strict=True)))


#: every ``privacy`` option but ``none``, with the settings it takes
VARIANTS: dict[str, type] = {
    "dp_server_fixed": FixedClipping,
    "dp_server_adaptive": AdaptiveClipping,
    "dp_client_fixed": FixedClipping,
    "dp_client_adaptive": AdaptiveClipping,
}
#: the variants whose clients clip their own update (Flower's client mods)
CLIENT_SIDE = frozenset({"dp_client_fixed", "dp_client_adaptive"})


def privacy_name(cfg: DictConfig) -> str:
    """The run's ``privacy`` option."""
    return str(cfg.privacy.name)


def privacy_settings(cfg: DictConfig) -> Any:
    """The run's privacy settings, typed (:class:`FixedClipping` or
    :class:`AdaptiveClipping`); call only for a variant other than ``none``."""
    return read_declared(VARIANTS[privacy_name(cfg)], _settings_of(cfg))


def _settings_of(cfg: DictConfig) -> dict[str, Any]:
    values = OmegaConf.to_container(cfg.privacy, resolve=True)
    assert isinstance(values, dict)
    return {str(k): v for k, v in values.items() if k != "name"}


def num_sampled_clients(cfg: DictConfig) -> int:
    """``privacy.num_sampled_clients``, or where it is null the clients the run samples each
    round before dropout: max(min_fit_clients, round(fraction_fit · num_clients)), at most
    num_clients (the base strategy's sampling, :mod:`strategies.base.sampling`)."""
    given = cfg.privacy.get("num_sampled_clients")
    return int(given) if given is not None else account.sample_size(cfg)


# ----------------------------------------------------------- which methods qualify
def strategy_settings(cfg: DictConfig) -> dict[str, Any]:
    node = cfg.method.get("strategy") or {}
    return {str(k): v for k, v in node.items() if k != "_target_"}


def not_averaging_reason(strategy_cls: type, settings: dict[str, Any]) -> str | None:
    """Why the wrappers cannot protect this strategy's server step, from its declarations,
    or None where its server averages the client models into one global model."""
    if robust_support(strategy_cls, settings) == "none":
        return (
            "does not average the client models into one global model (its server step is its own)"
        )
    if getattr(strategy_cls, "ensemble_global_test", False):
        return (
            "has no global model (its clients keep personal models and the server averages "
            "at most a part of them)"
        )
    return None


def _sent_only_when(cfg: DictConfig | None) -> dict[str, bool]:
    """The framework's own payloads, which a client sends only in some configurations:
    its mean latent with ``normalize=latent_cosine``, its personal model's test
    probabilities with ``evaluation.personal``. Without a configuration: always."""
    if cfg is None:
        return {}
    normalize = cfg.get("normalize") or {}
    return {
        protocol.LATENT_MEAN: normalize.get("name") == "latent_cosine",
        protocol.GLOBAL_TEST_PROBS: bool((cfg.get("evaluation") or {}).get("personal")),
    }


#: what every method's client sends in its properties answer (the server's discovery):
#: not a payload of the method, and not counted against it (docs/privacy.md)
DISCOVERY_PAYLOADS = frozenset({protocol.LABEL_COUNTS})


def uncovered_payloads(strategy_cls: type, cfg: DictConfig | None = None) -> list[str]:
    """The arrays the method's clients send the server besides their update (its declared
    payloads of direction up, or answers), which no DP wrapper protects; with ``cfg``, only
    those that configuration makes them send (:func:`_sent_only_when`)."""
    specs = getattr(strategy_cls, "payloads", protocol.BASE_PAYLOADS)
    sent = _sent_only_when(cfg)
    names = [
        spec.name
        for spec in specs
        if spec.direction in (schema.UP, schema.ANSWER)
        and spec.name not in DISCOVERY_PAYLOADS
        and sent.get(spec.name, True)
    ]
    return list(dict.fromkeys(names))


# ------------------------------------------------------------------------ rules
def check_declared(declared: type, settings: dict[str, Any], name: str) -> None:
    """One-line :class:`ConfigError` for the first unknown, missing, mistyped or
    rule-breaking ``privacy.<key>`` of option ``name``."""
    types = setting_types(declared)
    for key in settings:
        require(
            key in types,
            f"privacy={name} has no setting privacy.{key} (its settings: {', '.join(types)})",
        )
    for field in dataclasses.fields(declared):
        require(field.name in settings, f"privacy.{field.name} is missing (privacy={name})")
        value = settings[field.name]
        allowed = type_options(types[field.name])
        accepted = type(None) in allowed if value is None else _has_type(value, allowed)
        if not accepted:
            shown = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in allowed)
            raise ConfigError(f"privacy.{field.name} must be {shown}, got {value!r}")
        field.metadata["rule"](f"privacy.{field.name}", value)


def _has_type(value: Any, allowed: tuple) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    return any(isinstance(value, (int, float) if t is float else t) for t in allowed)


def check_privacy(cfg: DictConfig) -> None:
    """The ``privacy`` settings, and whether the run's method can be protected (called
    from :data:`fedimb.app.configuration.validation.CHECKS`, after the method's and the
    aggregation's checks)."""
    name = privacy_name(cfg)
    if name == NONE:
        return
    require(
        name in VARIANTS,
        f"unknown privacy '{name}' (choose from: {', '.join([NONE, *VARIANTS])})",
    )
    check_declared(VARIANTS[name], _settings_of(cfg), name)
    account.privacy_modules()  # the accountant's package, before anything runs
    account.check_budget(cfg)
    settings = privacy_settings(cfg)
    sampled = num_sampled_clients(cfg)
    if isinstance(settings, AdaptiveClipping):
        _check_adaptive_noise(settings, sampled)
    method = cfg.method.get("name")
    strategy_cls = import_class(str(cfg.method.strategy._target_))
    reason = not_averaging_reason(strategy_cls, strategy_settings(cfg))
    require(
        reason is None,
        f"method '{method}' {reason}, so privacy={name} has nothing to protect: use privacy=none",
    )
    aggregation = cfg.aggregation.name
    require(
        aggregation == "mean",
        f"privacy={name} calibrates its noise to a mean of the clipped updates, which "
        f"aggregation={aggregation} is not: use aggregation=mean",
    )
    shrink = (cfg.get("shrink") or {}).get("name")
    require(
        shrink in (None, "none"),
        f"privacy={name} calibrates its noise to a mean of the clipped updates, which "
        f"shrink={shrink} rescales by factors computed from them: use shrink=none",
    )
    uncovered = uncovered_payloads(strategy_cls, cfg)
    require(
        not uncovered or settings.payloads == "unprotected",
        f"method '{method}' sends the server {', '.join(uncovered)} besides its update, which "
        f"privacy={name} does not protect: set privacy.payloads=unprotected to run it anyway",
    )
    _check_float_model(cfg, name)


def _check_adaptive_noise(settings: AdaptiveClipping, sampled: int) -> None:
    """Flower splits the noise multiplier between the update and the clipped-count noise
    (``compute_adaptive_noise_params``): it must stay below 2 · clipped_count_stddev."""
    stddev = settings.clipped_count_stddev
    stddev = sampled / 20 if stddev is None else stddev
    require(
        settings.noise_multiplier == 0 or settings.noise_multiplier < 2 * stddev,
        f"privacy.noise_multiplier must be below 2 · privacy.clipped_count_stddev "
        f"({2 * stddev:g}; null means num_sampled_clients/20 = {sampled / 20:g}), got "
        f"{settings.noise_multiplier}: lower it or set privacy.clipped_count_stddev",
    )


def _check_float_model(cfg: DictConfig, name: str) -> None:
    """Flower's clipping scales every array of the update in place, which an integer
    array (a BatchNorm layer's counter) cannot take."""
    import numpy as np

    from fedimb.app.configuration.build import new_model
    from fedimb.core.data.datasets import dataset_info

    model = new_model(cfg, dataset_info(cfg.dataset))
    integer = [k for k, v in model.state_dict().items() if not np.issubdtype(_dtype(v), np.inexact)]
    if integer:
        raise ConfigError(
            f"model={cfg.model.name} has integer arrays ({integer[0]}: a BatchNorm counter) "
            f"that privacy={name}'s clipping cannot scale: choose a model without BatchNorm"
        )


def _dtype(tensor) -> Any:
    return tensor.detach().cpu().numpy().dtype


_TYPE_NAMES = {float: "a number", int: "an integer", str: "a text", type(None): "null"}
