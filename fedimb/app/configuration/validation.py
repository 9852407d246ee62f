"""Validation of a resolved configuration: one table (:data:`CHECKS`) calls, in order,
the rules of the run's own settings and those that each part declares beside its code
(the method's strategy and client, the data set, the partitioner, the dropout, the
aggregation, the runtime). The front end and the ServerApp validate; a ClientApp
decodes what its ServerApp validated."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import import_class, method_classes, robust_support
from fedimb.app.configuration.data_rules import check_data_and_model
from fedimb.app.configuration.holdout_rules import check_seeds_and_holdout
from fedimb.app.configuration.keys import DEFAULT_STRATEGY, group_choices, hydra_config
from fedimb.app.configuration.limits import check_limits
from fedimb.app.configuration.mode_rules import check_mode
from fedimb.app.configuration.runtime_rules import check_runtime
from fedimb.app.configuration.search_space import check_search
from fedimb.app.faults import injection as faults
from fedimb.app.privacy.dp import check_privacy
from fedimb.app.privacy.secagg import check_secagg
from fedimb.core.errors import ConfigError, check_number, is_int, is_number, require
from fedimb.core.models.options import REPLACES_HEAD, check_model_options
from fedimb.core.process_cache import ProcessCache, cache_key

#: the configurations this process has validated (by their resolved JSON)
_VALIDATED: ProcessCache[bool] = ProcessCache()


def validate(cfg: DictConfig) -> None:
    """Check every value a run depends on; raise a one-line :class:`ConfigError`.
    A configuration is checked once per process (again only if it changed). The checks
    run outside the cache's lock: they may compose (for a message), which takes Hydra's."""
    key = cache_key(json.dumps(OmegaConf.to_container(cfg, resolve=True), sort_keys=True))
    if key in _VALIDATED:
        return
    for check in CHECKS:
        check(cfg)
    _VALIDATED.get(key, lambda: True)


def check_sections(cfg: DictConfig) -> None:
    for key in ("method", "dataset", "model", "partition", "dropout", "runtime", "train"):
        require(
            key in cfg and isinstance(cfg[key], DictConfig),
            f"the configuration lacks the '{key}' section",
        )


def check_run_settings(cfg: DictConfig) -> None:
    """The run's own top-level settings: sizes (upper bounds: .limits), sampling, device."""
    for key in ("seed", "num_clients", "num_rounds"):
        require(is_int(cfg.get(key)), f"{key} must be an integer, got {cfg.get(key)!r}")
    for key, least in (("seed", 0), ("num_clients", 1), ("num_rounds", 1)):
        require(cfg[key] >= least, f"{key} must be >= {least}, got {cfg[key]}")
    require(
        is_number(cfg.fraction_fit) and 0 < cfg.fraction_fit <= 1,
        f"fraction_fit must be in (0, 1], got {cfg.fraction_fit!r}",
    )
    require(
        cfg.sampling in ("uniform", "by_size"),
        f"sampling must be uniform or by_size, got {cfg.get('sampling')!r}",
    )
    require(
        is_int(cfg.min_fit_clients) and cfg.min_fit_clients >= 1,
        f"min_fit_clients must be an integer >= 1, got {cfg.min_fit_clients!r}",
    )
    minimum = cfg.min_successful_clients
    require(
        is_int(minimum) and minimum >= 1,
        f"min_successful_clients must be an integer >= 1, got {minimum!r}",
    )
    require(
        cfg.device in ("auto", "cpu", "cuda"),
        f"device must be auto, cpu or cuda, got {cfg.device!r}",
    )


def check_method(cfg: DictConfig) -> None:
    """The method's own rules: each half's ``check_settings`` (its ``Settings``),
    the strategy's ``check_configuration`` where its rules read other sections, its
    model options, and whether it has the personal model ``evaluation.personal`` asks for."""
    client_cls, strategy_cls = method_classes(cfg)
    for part, cls in (("client", client_cls), ("strategy", strategy_cls)):
        check_settings = getattr(cls, "check_settings", None)
        if check_settings is not None:
            check_settings({k: v for k, v in cfg.method[part].items() if k != "_target_"})
    check_configuration = getattr(strategy_cls, "check_configuration", None)
    if check_configuration is not None:
        check_configuration(cfg)
    options = cfg.method.get("model_options") or OmegaConf.create({})
    require(
        isinstance(options, DictConfig),
        f"method.model_options must be a mapping of option: value, got {options!r}",
    )
    check_model_options(cast(dict[str, Any], OmegaConf.to_container(options, resolve=True)))
    replaced = [name for name in options if name in REPLACES_HEAD]
    require(
        not (replaced and getattr(client_cls, "needs_linear_head", False)),
        f"method '{cfg.method.get('name')}' needs the model's linear head, which "
        f"method.model_options.{replaced[0] if replaced else ''} replaces",
    )
    if cfg.evaluation.personal:
        if not all(getattr(c, "personal_evaluation", False) for c in (client_cls, strategy_cls)):
            raise ConfigError(  # the list composes every method: only when it is needed
                f"method '{cfg.method.get('name')}' has no personal model to evaluate "
                f"(evaluation.personal=true); methods with one: "
                f"{', '.join(methods_with_personal_evaluation())}"
            )


def methods_with_personal_evaluation() -> list[str]:
    """The methods whose strategy and client both opt into the personal evaluation."""
    found = []
    for name in group_choices("method"):
        method = hydra_config([f"method={name}"]).method
        strategy = method.strategy._target_ if method.get("strategy") else DEFAULT_STRATEGY
        if all(
            getattr(import_class(str(target)), "personal_evaluation", False)
            for target in (strategy, method.client._target_)
        ):
            found.append(name)
    return found


def check_training(cfg: DictConfig) -> None:
    """The local training settings, and a deliberate fault where the run injects one."""
    from fedimb.core.training import TrainConfig

    TrainConfig.check(cfg.train)
    if "fault" in cfg:
        faults.check(cfg.fault, cfg)


def check_partition_and_dropout(cfg: DictConfig) -> None:
    """The partitioner's rules (declared beside it), then the dropout model, which
    needs the partition's client groups."""
    from fedimb.core.data.datasets import dataset_info
    from fedimb.core.data.partition import check_partition
    from fedimb.core.data.partitioners import client_groups
    from fedimb.core.dropout import availability_from_config

    p = cfg.partition
    check_partition(p, dataset_info(cfg.dataset).num_classes, int(cfg.num_clients))
    groups = (
        client_groups(cfg.num_clients, len(p.classes_per_group)) if p.name == "clustered" else None
    )
    availability_from_config(cfg.dropout, cfg.num_clients, groups, cfg.seed)


def check_normalize(cfg: DictConfig) -> None:
    norm = cfg.normalize
    require(
        norm.name in ("none", "latent_cosine"),
        f"unknown normalize '{norm.get('name')}' (choose from: latent_cosine, none)",
    )
    if norm.get("name") == "latent_cosine":
        temperature = norm.get("temperature")
        require(
            is_number(temperature) and temperature > 0,
            f"normalize.temperature must be > 0, got {temperature!r}",
        )


def check_aggregation(cfg: DictConfig) -> None:
    """``aggregation`` and ``influence``: their settings, and whether the method's server
    step can use the rule. A strategy's ``robust_aggregation`` (a value, or a function of
    its method.strategy settings) says so: ``any`` (default) every rule and clipping;
    ``clip`` only the method's own weighted mean, with clipping (its weights are the
    method); ``none`` neither (its server step is no average of the client models)."""
    from fedimb.core import robust
    from fedimb.core.influence import InfluenceSettings

    settings = robust.RobustSettings.from_config(cfg.aggregation)
    robust.check(settings, int(cfg.num_clients))
    InfluenceSettings.from_config(cfg.get("influence")).check()
    support = aggregation_support(cfg)
    method = cfg.method.get("name")
    if support == "clip":
        require(
            settings.name == "mean",
            f"method '{method}' weights the client models itself, which "
            f"aggregation={settings.name} would ignore: use aggregation=mean "
            f"(aggregation.max_update_norm still clips updates)",
        )
    elif support == "none":
        chosen = (
            f"aggregation={settings.name}"
            if settings.name != "mean"
            else f"aggregation.max_update_norm={settings.max_update_norm}"
        )
        require(
            settings.is_plain_mean,
            f"method '{method}' does not average the client models, so {chosen} does not "
            f"apply: use aggregation=mean aggregation.max_update_norm=null",
        )


def aggregation_support(cfg: DictConfig) -> str:
    """The method's ``robust_aggregation``: ``any``, ``clip`` or ``none`` (its server step
    is no average of the client models)."""
    _, strategy_cls = method_classes(cfg)
    settings = {k: v for k, v in cfg.method.strategy.items() if k != "_target_"}
    return robust_support(strategy_cls, settings)


def check_shrink(cfg: DictConfig) -> None:
    """``shrink``: its settings, and a method whose new global model is an average of the
    client models (what FedLWS's layer-wise factors scale)."""
    from fedimb.core.shrinking import ShrinkSettings

    name = cfg.shrink.get("name")
    require(
        ShrinkSettings.from_config(cfg.shrink) is None or aggregation_support(cfg) != "none",
        f"method '{cfg.method.get('name')}' does not average the client models, so "
        f"shrink={name} does not apply: use shrink=none",
    )


def check_evaluation(cfg: DictConfig) -> None:
    """How often and on what the run tests, whether it resumes, and its target."""
    from fedimb.core.data.datasets import dataset_info

    evaluation = cfg.evaluation
    check_number("evaluation.every", evaluation.every, 1, integer=True)
    local_every = evaluation.get("local_every")
    require(
        local_every is None or (is_int(local_every) and local_every >= 0),
        f"evaluation.local_every must be an integer >= 0 or null, got {local_every!r}",
    )
    fraction = evaluation.local_test_fraction
    require(
        is_number(fraction) and 0 <= fraction < 1,
        f"evaluation.local_test_fraction must be in [0, 1), got {fraction!r}",
    )
    share = evaluation.get("local_validation_fraction")
    require(
        is_number(share) and 0 <= share < 1,
        f"evaluation.local_validation_fraction must be in [0, 1), got {share!r}",
    )
    own_tests = dataset_info(cfg.dataset).client_tests and str(cfg.partition.name) == "natural"
    devices = cfg.dataset.get("num_devices")
    require(
        not own_tests or devices is None or int(devices) == int(cfg.num_clients),
        f"partition=natural merges {devices} devices into {cfg.num_clients} clients, but each "
        "device's test set belongs to one client: set dataset.num_devices=num_clients",
    )
    require(
        not evaluation.get("personal") or fraction > 0 or own_tests,
        "evaluation.personal needs local test data: set evaluation.local_test_fraction > 0",
    )
    require(
        isinstance(cfg.resume, bool),
        f"resume must be true or false, got {cfg.get('resume')!r}",
    )
    target = evaluation.get("target_accuracy")
    require(
        target is None or (is_number(target) and 0 < target <= 1),
        f"evaluation.target_accuracy must be in (0, 1] or null, got {target!r}",
    )


#: every check of a configuration, in the order its first failure is reported
CHECKS: tuple[Callable[[DictConfig], None], ...] = (
    check_sections,
    check_run_settings,
    check_limits,
    check_seeds_and_holdout,
    check_method,
    check_data_and_model,
    check_training,
    check_partition_and_dropout,
    check_normalize,
    check_shrink,
    check_aggregation,
    check_privacy,
    check_runtime,
    check_secagg,
    check_evaluation,
    check_mode,
    check_search,
)
