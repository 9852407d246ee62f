"""Secure aggregation (``secagg=``, ``conf/secagg/*.yaml``): Flower's SecAgg+ settings, their
rules, and which methods it can run.

Under SecAgg+ every client quantises its model weighted by its sample count, masks it, and
the server learns only the sum of the round's masked vectors, from which it recovers the
sample-weighted mean of the models and nothing else. So a method qualifies only where its
server needs no more than that mean, which is read from what its strategy declares, never
from a list of names (:func:`method_refusal`): its ``robust_aggregation`` (``none``: its own
server step; ``clip``: weights of its own, from what clients report), ``ensemble_global_test``
(no global model) and its declared ``payloads`` (arrays SecAgg+ does not mask). The fit step
itself is :mod:`fedimb.app.privacy.secagg_fit`, the clients' half :mod:`.secagg_mod`."""

from __future__ import annotations

import dataclasses
from typing import Any

from flwr.server.workflow import SecAggPlusWorkflow
from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import import_class, robust_support
from fedimb.app.privacy import account, dp
from fedimb.core.errors import ConfigError, require

NONE = "none"
SECAGGPLUS = "secaggplus"


@dataclasses.dataclass(frozen=True)
class SecAggPlusSettings:
    """``SecAggPlusWorkflow``'s arguments (Flower's names; the values are the YAML's)."""

    num_shares: int | float
    reconstruction_threshold: int | float
    max_weight: float
    clipping_range: float
    quantization_range: int
    modulus_range: int
    timeout: float | None


def secagg_name(cfg: DictConfig) -> str:
    """The run's ``secagg`` option (a saved configuration that predates it has it from
    :func:`fedimb.app.configuration.upgrade.upgrade`)."""
    return str(cfg.secagg.name)


def enabled(cfg: DictConfig) -> bool:
    return secagg_name(cfg) == SECAGGPLUS


def settings_of(cfg: DictConfig) -> SecAggPlusSettings:
    """The run's SecAgg+ settings as given (checked by :func:`check_secagg`)."""
    values = OmegaConf.to_container(cfg.secagg, resolve=True)
    assert isinstance(values, dict)
    return SecAggPlusSettings(
        **{f.name: values[f.name] for f in dataclasses.fields(SecAggPlusSettings)}
    )


def workflow_arguments(settings: SecAggPlusSettings, timeout: float | None) -> dict[str, Any]:
    """``SecAggPlusWorkflow``'s keyword arguments; ``timeout`` where the setting is null."""
    arguments = dataclasses.asdict(settings)
    if arguments["timeout"] is None:
        arguments["timeout"] = timeout
    return arguments


# ----------------------------------------------------------- which methods qualify
def method_refusal(
    strategy_cls: type, settings: dict[str, Any], cfg: DictConfig | None = None
) -> str | None:
    """Why SecAgg+ cannot run this method, from its strategy's declarations (``cfg``: the
    payloads that configuration makes its clients send), or None where its server needs only
    the sample-weighted mean of the client models."""
    reason = dp.not_averaging_reason(strategy_cls, settings)
    if reason is not None:
        return reason
    if robust_support(strategy_cls, settings) == "clip":
        return (
            "weights the client models by what the clients report (its weights are the "
            "method), while SecAgg+ gives the server only their mean weighted by sample count"
        )
    uncovered = dp.uncovered_payloads(strategy_cls, cfg)
    if uncovered:
        return (
            f"sends the server {', '.join(uncovered)} besides its model, which SecAgg+ does "
            "not mask (it sums the models alone)"
        )
    return None


def check_secagg(cfg: DictConfig) -> None:
    """The ``secagg`` settings, and whether the run's method, privacy, aggregation and
    runtime can run under SecAgg+ (one line each; called from
    :data:`fedimb.app.configuration.validation.CHECKS`, after the privacy and runtime checks)."""
    name = secagg_name(cfg)
    if name == NONE:
        return
    require(name == SECAGGPLUS, f"unknown secagg '{name}' (choose from: {NONE}, {SECAGGPLUS})")
    _check_settings(cfg)
    sampled = account.sample_size(cfg)  # the clients a round samples before dropout
    _check_sizes(settings_of(cfg), sampled)
    strategy_cls = import_class(str(cfg.method.strategy._target_))
    reason = method_refusal(strategy_cls, dp.strategy_settings(cfg), cfg)
    require(
        reason is None,
        f"method '{cfg.method.get('name')}' {reason}, so secagg=secaggplus cannot run it: "
        "use secagg=none",
    )
    hidden = "which SecAgg+ hides from the server"
    privacy = dp.privacy_name(cfg)
    require(
        privacy == dp.NONE or privacy in dp.CLIENT_SIDE,
        f"privacy={privacy} clips every client's update on the server, {hidden}: use "
        "privacy=dp_client_fixed or dp_client_adaptive (the clients clip)",
    )
    aggregation = cfg.aggregation.name
    require(
        aggregation == "mean",
        f"aggregation={aggregation} needs every client's model, {hidden}: use aggregation=mean",
    )
    require(
        cfg.aggregation.get("max_update_norm") is None,
        f"aggregation.max_update_norm clips each client's update on the server, {hidden}: set "
        "it to null (privacy=dp_client_fixed clips on the clients)",
    )
    shrink = (cfg.get("shrink") or {}).get("name")
    require(
        shrink in (None, "none"),
        f"shrink={shrink} computes its factors from every client's model, {hidden}: "
        "use shrink=none",
    )
    _check_runtime(cfg)
    _check_float_model(cfg)


def _check_settings(cfg: DictConfig) -> None:
    values = {str(k): v for k, v in OmegaConf.to_container(cfg.secagg, resolve=True).items()}  # type: ignore[union-attr]
    known = [f.name for f in dataclasses.fields(SecAggPlusSettings)]
    for key in values:
        require(
            key in (*known, "name"),
            f"secagg={SECAGGPLUS} has no setting secagg.{key} (its settings: {', '.join(known)})",
        )
    for key in known:
        require(key in values, f"secagg.{key} is missing (secagg={SECAGGPLUS})")
    for key in ("num_shares", "reconstruction_threshold"):
        value = values[key]
        require(
            _number(value)
            and (value == 1 or (isinstance(value, int) and value >= 2) or 0 < value <= 1),
            f"secagg.{key} must be an integer or a fraction in (0, 1], got {value!r}",
        )
    shares, threshold = values["num_shares"], values["reconstruction_threshold"]
    require(
        not isinstance(shares, int) or shares == 1 or shares >= 3,
        f"secagg.num_shares must be at least 3 as an integer (Flower's rule), got {shares}",
    )
    require(
        not (
            isinstance(shares, int) and isinstance(threshold, int) and shares > 1 and threshold > 1
        )
        or threshold < shares,
        f"secagg.reconstruction_threshold must be below secagg.num_shares ({shares}), "
        f"got {threshold}",
    )
    for key in ("max_weight", "clipping_range"):
        require(
            _number(values[key]) and values[key] > 0,
            f"secagg.{key} must be > 0, got {values[key]!r}",
        )
    quantization, modulus = values["quantization_range"], values["modulus_range"]
    require(
        _integer(quantization) and quantization > 0,
        f"secagg.quantization_range must be an integer > 0, got {quantization!r}",
    )
    require(
        _integer(modulus) and quantization < modulus <= 2**32 and modulus & (modulus - 1) == 0,
        f"secagg.modulus_range must be a power of 2 above secagg.quantization_range "
        f"({quantization}) and at most 2^32, got {modulus!r}",
    )
    timeout = values["timeout"]
    require(
        timeout is None or (_number(timeout) and timeout > 0),
        f"secagg.timeout must be a number of seconds > 0 or null, got {timeout!r}",
    )


def _check_sizes(settings: SecAggPlusSettings, sampled: int) -> None:
    """A round must have at least 2 clients (Flower's minimum), their quantised sum must fit
    the modulus, and an integer threshold must leave a round something to reconstruct."""
    require(
        sampled >= 2,
        f"secagg=secaggplus needs at least 2 clients per round, and the run samples {sampled}: "
        "raise fraction_fit or min_fit_clients",
    )
    most = settings.modulus_range // settings.quantization_range
    require(
        sampled < most,
        f"secagg=secaggplus sums {sampled} clients' quantised models, which overflows "
        f"modulus_range / quantization_range = {most}: raise secagg.modulus_range or lower "
        "secagg.quantization_range",
    )
    threshold = settings.reconstruction_threshold
    require(
        not isinstance(threshold, int) or threshold <= sampled,
        f"secagg.reconstruction_threshold={threshold} exceeds the {sampled} clients a round "
        "samples, so no round could complete",
    )


def _check_runtime(cfg: DictConfig) -> None:
    from fedimb.app.configuration.runtime_rules import node_count

    nodes, clients = node_count(cfg), int(cfg.num_clients)
    require(
        nodes >= clients,
        f"the simulation lends its {nodes} nodes to {clients} clients, while SecAgg+ keeps a "
        "client's secrets on its node through the round: give every client a node "
        "(runtime.nodes=num_clients, runtime.client_state=memory)",
    )


def _check_float_model(cfg: DictConfig) -> None:
    """SecAgg+ quantises every array as floats, which an integer array (a BatchNorm
    layer's counter) would not survive as its type."""
    import numpy as np

    from fedimb.app.configuration.build import new_model
    from fedimb.core.data.datasets import dataset_info

    model = new_model(cfg, dataset_info(cfg.dataset))
    for key, value in model.state_dict().items():
        if not np.issubdtype(value.detach().cpu().numpy().dtype, np.inexact):
            raise ConfigError(
                f"model={cfg.model.name} has integer arrays ({key}: a BatchNorm counter) that "
                "SecAgg+'s quantisation cannot carry: choose a model without BatchNorm"
            )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def workflow(cfg: DictConfig, timeout: float | None) -> SecAggPlusWorkflow:
    """Flower's workflow with the run's settings (``timeout``: a stage's wait where the
    setting is null)."""
    return SecAggPlusWorkflow(**workflow_arguments(settings_of(cfg), timeout))
