"""Experiment configuration: compose ``conf/`` with Hydra overrides, resolve, and validate
every value a run depends on (once per process); it travels in a run through
:mod:`fedimb.app.transport`."""

from __future__ import annotations

import difflib
import functools
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app import faults
from fedimb.app.components import import_class
from fedimb.core.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = (
    "method",
    "dataset",
    "model",
    "partition",
    "dropout",
    "runtime",
    "normalize",
    "aggregation",
    "tracking",
    "experiment",
)


def group_choices(group: str) -> list[str]:
    """The options of a config group, from the YAML files in ``conf/<group>/``."""
    folder = CONF_DIR / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


#: how ``fedimb list`` names a group's options (``fedimb list methods``)
LIST_NAMES = {
    group: group if group in ("normalize", "aggregation", "tracking") else f"{group}s"
    for group in GROUPS
}

#: a group this small is listed in full in an "unknown option" message
_SHORT_GROUP = 8


def unknown_option(group: str, option: str) -> ConfigError:
    """``unknown method 'fedavgg'; did you mean fedavg? (fedimb list methods shows all 25)``."""
    choices = group_choices(group)
    close = difflib.get_close_matches(option, choices, n=3, cutoff=0.6)
    message = f"unknown {group} '{option}'"
    if close:
        message += f"; did you mean {either(close)}?"
    if len(choices) <= _SHORT_GROUP:
        return ConfigError(f"{message} (choose from: {', '.join(choices) or 'none available'})")
    return ConfigError(f"{message} (fedimb list {LIST_NAMES[group]} shows all {len(choices)})")


def either(names: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else list(names))


def check_overrides(overrides: Sequence[str]) -> None:
    """Reject unknown config-group options (``method=foo``) with the nearest valid ones,
    and keys that ``+``/``++`` would add although no file in ``conf/`` declares them."""
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.startswith("+"):
            _check_added_key(key.lstrip("+"), override)
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or "(" in value:
            continue
        for option in value.split(","):
            option = option.strip()
            if option and option not in group_choices(key):
                raise unknown_option(key, option)


def _check_added_key(key: str, override: str) -> None:
    """``+key=value`` adds a key Hydra's composition lacks: legitimate for a config group
    (``+experiment=...``), Hydra's own settings, and keys some option of ``conf/``
    declares (``+runtime.num_gpus_per_client`` beside ``runtime=in_process`` then gets
    the validation's reason); anything else would run silently with a key nothing reads."""
    if (
        key in GROUPS
        or key == "hydra"
        or key.startswith("hydra.")
        or "/" in key
        or key in declared_keys()
    ):
        return
    raise ConfigError(
        f"unknown key '{key}' in {override}: no file in conf/ declares it{_nearest_keys(key)}"
    )


@functools.lru_cache(maxsize=1)
def declared_keys() -> dict[str, list[tuple[str, str]]]:
    """Every dotted key a YAML file in ``conf/`` declares, with the (group, option) pairs
    that declare it (``("", "config")`` for ``config.yaml``)."""
    found: dict[str, list[tuple[str, str]]] = {}
    sources = [("", "config", CONF_DIR / "config.yaml")]
    sources += [
        (group, path.stem, path)
        for group in GROUPS
        for path in sorted((CONF_DIR / group).glob("*.yaml"))
    ]
    for group, option, path in sources:
        text = path.read_text()
        prefix = "" if (not group or "@package _global_" in text) else f"{group}."
        data = OmegaConf.to_container(OmegaConf.create(text), resolve=False) or {}
        for key in _dotted_keys(data, prefix):
            found.setdefault(key, []).append((group, option))
    return found


def _dotted_keys(data: Any, prefix: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    keys = []
    for name, value in data.items():
        if name in ("defaults", "hydra") and not prefix:
            continue
        keys.append(f"{prefix}{name}")
        keys.extend(_dotted_keys(value, f"{prefix}{name}."))
    return keys


def _nearest_keys(key: str) -> str:
    """``; did you mean a, b or c?`` (or how to see every key)."""
    close = difflib.get_close_matches(key, list(declared_keys()), n=3, cutoff=0.6)
    if close:
        return f"; did you mean {either(close)}?"
    return " (fedimb --cfg job prints every key of the configuration)"


def _missing_key_message(key: str, overrides: Sequence[str]) -> str | None:
    """Why Hydra 'could not override' ``key``: no file declares it, or the chosen option
    of its group lacks it (``partition.alpha`` with ``partition=pathological``). None
    when neither applies (Hydra's own message stands)."""
    owners = declared_keys().get(key)
    if not owners:
        return f"unknown key '{key}'{_nearest_keys(key)}"
    group, _, setting = key.partition(".")
    options = sorted({option for g, option in owners if g == group})
    if group not in GROUPS or not options:
        return None
    chosen = _chosen_option(group, [o for o in overrides if o.partition("=")[0].lstrip("+") != key])
    if chosen is None or chosen in options:
        return None
    value = next(
        (o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+") == key), "..."
    )
    named = [
        o for o in options if str(OmegaConf.load(CONF_DIR / group / f"{o}.yaml").get("name")) == o
    ]
    example = (named or options)[0]
    others = [o for o in options if o != example]
    also = f" (or {', '.join(others)})" if others else ""
    return f"{group}={chosen} has no {setting}; use {group}={example}{also} {key}={value}"


def _chosen_option(group: str, overrides: Sequence[str]) -> str | None:
    """The option of ``group`` that ``overrides`` select (defaults and experiments included)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(
                config_name="config", overrides=list(overrides), return_hydra_config=True
            )
        return str(cfg.hydra.runtime.choices.get(group))
    except Exception:  # noqa: BLE001 - only for a better message; Hydra's stands otherwise
        return None


def sweep_variants(overrides: Sequence[str]) -> list[list[str]]:
    """One override list per swept value (``key=a,b`` -> ``key=a`` and ``key=b``, the
    other keys at their first value), enough to check every value of a sweep once."""
    split = []
    for override in overrides:
        key, sep, value = override.partition("=")
        plain = sep and not any(ch in value for ch in "()[]{}'\"")
        split.append((key, value.split(",")) if plain and "," in value else (override, None))
    firsts = [f"{k}={v[0]}" if v else k for k, v in split]
    variants = [firsts]
    for i, (key, values) in enumerate(split):
        for value in (values or [])[1:]:
            variants.append(firsts[:i] + [f"{key}={value}"] + firsts[i + 1 :])
    return variants


_COMPOSE_LOCK = threading.Lock()


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides, then resolve and validate."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    check_overrides(overrides)
    with _COMPOSE_LOCK:
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
                cfg = hydra_compose(config_name="config", overrides=list(overrides))
        except (HydraException, OmegaConfBaseException) as err:
            lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
            missing = re.match(r"Could not override '([^']+)'", lines[0] if lines else "")
            message = _missing_key_message(missing.group(1), overrides) if missing else None
            raise ConfigError(message or " ".join(lines[:2])) from None
    return finalize(cfg)


def finalize(cfg: DictConfig) -> DictConfig:
    """Resolve interpolations, drop Hydra's own node, fill ``model: auto``; validate."""
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # interpolation errors
        raise ConfigError(f"cannot resolve the configuration: {err}") from None
    assert isinstance(data, dict)
    data.pop("hydra", None)
    partition = data.get("partition") or {}
    if partition.get("name") == "file" and partition.get("clients") is None:
        from fedimb.core.data.partition_file import read_partition_file

        partition.update(read_partition_file(partition.get("path")))
    if data.get("model", {}).get("name") == "auto":
        data["model"] = {"name": data.get("dataset", {}).get("default_model")}
    resolved = OmegaConf.create(data)
    validate(resolved)
    return resolved


def smoke_overrides(method: str) -> list[str]:
    """The overrides of the shortest run that passes through every stage of ``method``
    (its YAML's ``smoke`` list; nothing for single-stage methods), for tests and
    benchmarks. Method keys get ``++`` so that they also apply in a sweep over methods."""
    smoke = compose([f"method={method}"]).method.get("smoke") or []
    return [f"++{item}" if item.startswith("method.") else str(item) for item in smoke]


# ---------------------------------------------------------------------- validation
RUNTIMES = ("simulation", "deployment", "in_process")


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate(cfg: DictConfig) -> None:
    """Check every value a run depends on; raise a one-line :class:`ConfigError`.
    A configuration is checked once per process (again only if it changed)."""
    fingerprint = json.dumps(OmegaConf.to_container(cfg, resolve=True), sort_keys=True)
    if fingerprint in _VALIDATED:
        return
    _check(cfg)
    _VALIDATED.add(fingerprint)


_VALIDATED: set[str] = set()


def _check(cfg: DictConfig) -> None:
    from fedimb.core.data.datasets import dataset_info
    from fedimb.core.data.partition import PARTITIONERS
    from fedimb.core.models import MODELS
    from fedimb.core.training import TrainConfig

    for key in ("method", "dataset", "model", "partition", "dropout", "runtime", "train"):
        _need(
            key in cfg and isinstance(cfg[key], DictConfig),
            f"the configuration lacks the '{key}' section",
        )
    for key in ("seed", "num_clients", "num_rounds"):
        _need(_is_int(cfg.get(key)), f"{key} must be an integer, got {cfg.get(key)!r}")
    _need(cfg.seed >= 0, f"seed must be >= 0, got {cfg.seed}")
    _need(cfg.num_clients >= 1, f"num_clients must be >= 1, got {cfg.num_clients}")
    _need(cfg.num_rounds >= 1, f"num_rounds must be >= 1, got {cfg.num_rounds}")
    _need(
        _is_number(cfg.fraction_fit) and 0 < cfg.fraction_fit <= 1,
        f"fraction_fit must be in (0, 1], got {cfg.fraction_fit!r}",
    )
    _need(
        cfg.get("sampling", "uniform") in ("uniform", "by_size"),
        f"sampling must be uniform or by_size, got {cfg.get('sampling')!r}",
    )
    _need(
        _is_int(cfg.min_fit_clients) and cfg.min_fit_clients >= 1,
        f"min_fit_clients must be an integer >= 1, got {cfg.min_fit_clients!r}",
    )
    minimum = cfg.get("min_successful_clients", 1)
    _need(
        _is_int(minimum) and minimum >= 1,
        f"min_successful_clients must be an integer >= 1, got {minimum!r}",
    )
    _need(
        cfg.device in ("auto", "cpu", "cuda"),
        f"device must be auto, cpu or cuda, got {cfg.device!r}",
    )

    for key in ("strategy", "client"):
        _need(
            key in cfg.method and "_target_" in cfg.method[key],
            f"method '{cfg.method.get('name')}' must name method.{key}._target_",
        )

    client_cls = import_class(str(cfg.method.client._target_))
    strategy_cls = import_class(str(cfg.method.strategy._target_))
    for part, cls in (("client", client_cls), ("strategy", strategy_cls)):  # the method's own rules
        check_settings = getattr(cls, "check_settings", None)
        if check_settings is not None:
            check_settings({k: v for k, v in cfg.method[part].items() if k != "_target_"})
    if cfg.get("evaluation", {}).get("personal"):
        if not all(getattr(c, "personal_evaluation", False) for c in (client_cls, strategy_cls)):
            raise ConfigError(  # the list composes every method: only when it is needed
                f"method '{cfg.method.get('name')}' has no personal model to evaluate (evaluation.personal=true); "
                f"methods with one: {', '.join(methods_with_personal_evaluation())}"
            )

    info = dataset_info(cfg.dataset)
    _need(
        cfg.model.name in MODELS,
        f"unknown model '{cfg.model.name}' (choose from: {', '.join(sorted(MODELS))})",
    )
    if getattr(client_cls, "trains_encoder_alone", False):
        _check_encoder_has_parameters(cfg, info)

    TrainConfig.check(cfg.train)
    if "fault" in cfg:
        faults.check(cfg.fault, cfg)

    p = cfg.partition
    _need(
        p.name in PARTITIONERS,
        f"unknown partition '{p.name}' (choose from: {', '.join(sorted(PARTITIONERS))})",
    )
    if "alpha" in p:
        _need(_is_number(p.alpha) and p.alpha > 0, f"partition.alpha must be > 0, got {p.alpha!r}")
    if "classes_per_client" in p:
        _need(
            _is_int(p.classes_per_client) and 1 <= p.classes_per_client <= info.num_classes,
            f"partition.classes_per_client must be in [1, {info.num_classes}], got {p.classes_per_client!r}",
        )
    if p.get("samples_per_client") is not None:
        _need(
            _is_int(p.samples_per_client) and p.samples_per_client >= 1,
            f"partition.samples_per_client must be an integer >= 1 or null, got {p.samples_per_client!r}",
        )
    if "classes_per_group" in p:
        groups = list(p.classes_per_group or [])
        _need(
            len(groups) >= 1 and all(_is_int(k) and 1 <= k <= info.num_classes for k in groups),
            f"partition.classes_per_group entries must be integers in [1, {info.num_classes}], got {groups}",
        )
        _need(
            len(groups) <= cfg.num_clients,
            f"{len(groups)} client groups need at least {len(groups)} clients",
        )
    for key in ("rho", "tau"):
        if key in p:
            _need(
                _is_number(p[key]) and 0 < p[key] <= 1,
                f"partition.{key} must be in (0, 1], got {p[key]!r}",
            )
    if "imbalance_ratio" in p:
        _need(
            _is_number(p.imbalance_ratio) and p.imbalance_ratio >= 1,
            f"partition.imbalance_ratio must be >= 1, got {p.imbalance_ratio!r}",
        )

    from fedimb.core.data.partitioners import client_groups
    from fedimb.core.dropout import availability_from_config

    groups = (
        client_groups(cfg.num_clients, len(p.classes_per_group)) if p.name == "clustered" else None
    )
    availability_from_config(cfg.dropout, cfg.num_clients, groups, cfg.seed)

    norm = cfg.get("normalize") or {}
    _need(
        norm.get("name", "none") in ("none", "latent_cosine"),
        f"unknown normalize '{norm.get('name')}' (choose from: latent_cosine, none)",
    )
    if norm.get("name") == "latent_cosine":
        _need(
            _is_number(norm.get("temperature")) and norm.temperature > 0,
            f"normalize.temperature must be > 0, got {norm.get('temperature')!r}",
        )
    _check_aggregation(cfg, strategy_cls)

    r = cfg.runtime
    _need(
        r.get("name") in RUNTIMES,
        f"unknown runtime '{r.get('name')}' (choose from: {', '.join(RUNTIMES)})",
    )
    if r.name == "simulation":
        _need(
            _is_int(r.num_cpus_per_client) and r.num_cpus_per_client >= 1,
            f"runtime.num_cpus_per_client must be an integer >= 1, got {r.num_cpus_per_client!r}",
        )
        address = r.get("ray_address")
        _need(
            address is None or (isinstance(address, str) and (address == "auto" or ":" in address)),
            f"runtime.ray_address must be host:port, auto or null, got {address!r}",
        )
    elif r.name == "deployment":
        _need(
            isinstance(r.get("address"), str) and ":" in r.address,
            f"runtime.address must be host:port, got {r.get('address')!r}",
        )
    _check_gpus_per_client(cfg)
    for key in ("round_timeout", "connect_timeout"):
        value = r.get(key)
        _need(
            value is None or (_is_number(value) and value > 0),
            f"runtime.{key} must be a positive number of seconds or null, got {value!r}",
        )
    if "wait_for_nodes" in r:
        _need(
            _is_number(r.wait_for_nodes) and r.wait_for_nodes >= 0,
            f"runtime.wait_for_nodes must be a number of seconds >= 0 (0: check once), got {r.wait_for_nodes!r}",
        )
    if "reattach_seconds" in r:
        _need(
            _is_number(r.reattach_seconds) and r.reattach_seconds > 0,
            f"runtime.reattach_seconds must be a positive number of seconds, got {r.reattach_seconds!r}",
        )
    _need(
        isinstance(r.get("detach", False), bool),
        f"runtime.detach must be true or false, got {r.get('detach')!r}",
    )
    _need(
        _is_int(cfg.evaluation.every) and cfg.evaluation.every >= 1,
        f"evaluation.every must be an integer >= 1, got {cfg.evaluation.every!r}",
    )
    local_every = cfg.evaluation.get("local_every")
    _need(
        local_every is None or (_is_int(local_every) and local_every >= 0),
        f"evaluation.local_every must be an integer >= 0 or null, got {local_every!r}",
    )
    fraction = cfg.evaluation.get("local_test_fraction", 0.0)
    _need(
        _is_number(fraction) and 0 <= fraction < 1,
        f"evaluation.local_test_fraction must be in [0, 1), got {fraction!r}",
    )
    own_tests = dataset_info(cfg.dataset).client_tests and str(cfg.partition.name) == "natural"
    _need(
        not cfg.evaluation.get("personal") or fraction > 0 or own_tests,
        "evaluation.personal needs local test data: set evaluation.local_test_fraction > 0",
    )
    _need(
        isinstance(cfg.get("resume", False), bool),
        f"resume must be true or false, got {cfg.get('resume')!r}",
    )
    target = cfg.evaluation.get("target_accuracy")
    _need(
        target is None or (_is_number(target) and 0 < target <= 1),
        f"evaluation.target_accuracy must be in (0, 1] or null, got {target!r}",
    )


def _check_aggregation(cfg: DictConfig, strategy_cls) -> None:
    """``aggregation``: its settings, and whether the method's server step can use them.
    A strategy's ``robust_aggregation`` (a value, or a function of its method.strategy
    settings) says so: ``any`` (default) every rule and clipping; ``clip`` only the
    method's own weighted mean, with clipping (its weights are the method); ``none``
    neither (its server step is no average of the client models)."""
    from fedimb.core import robust

    settings = robust.RobustSettings.from_config(cfg.get("aggregation"))
    robust.check(settings, int(cfg.num_clients))
    support = getattr(strategy_cls, "robust_aggregation", "any")
    if callable(support):
        support = support({k: v for k, v in cfg.method.strategy.items() if k != "_target_"})
    method = cfg.method.get("name")
    if support == "clip":
        _need(
            settings.name == "mean",
            f"method '{method}' weights the client models itself, which aggregation={settings.name} would ignore: "
            f"use aggregation=mean (aggregation.max_update_norm still clips updates)",
        )
    elif support == "none":
        chosen = (
            f"aggregation={settings.name}"
            if settings.name != "mean"
            else f"aggregation.max_update_norm={settings.max_update_norm}"
        )
        _need(
            settings.is_plain_mean,
            f"method '{method}' does not average the client models, so {chosen} does not apply: "
            f"use aggregation=mean aggregation.max_update_norm=null",
        )


def _check_encoder_has_parameters(cfg: DictConfig, info) -> None:
    """A method that trains the encoder apart from the head needs an encoder with
    parameters (``model=mclr`` has none unless ``model.encoder=linear``)."""
    from fedimb.core.models import build_model

    model = build_model(
        OmegaConf.to_container(cfg.model, resolve=True), info.input_shape, info.num_classes
    )
    _need(
        any(True for _ in model.encoder.parameters()),
        f"method '{cfg.method.name}' trains the model's encoder apart from its head, but model={cfg.model.name}'s "
        f"encoder has no parameters (it passes the inputs through): set model=mclr model.encoder=linear "
        f"(an identity-initialised linear encoder) or choose another model",
    )


def _check_gpus_per_client(cfg: DictConfig) -> None:
    """``runtime.num_gpus_per_client``: Ray's GPU share per virtual client (Flower's
    ``client-resources-num-gpus``), so only the simulation has it; a GPU reserved for
    clients that ``device=cpu`` keeps off it would only idle."""
    r = cfg.runtime
    if r.name != "simulation":
        _need(
            "num_gpus_per_client" not in r,
            f"runtime.num_gpus_per_client is a setting of runtime=simulation (Ray's GPUs per virtual client), "
            f"not of runtime={r.name}; there device=auto or device=cuda puts the clients on a GPU",
        )
        return
    gpus = r.get("num_gpus_per_client", 0.0)
    _need(
        _is_number(gpus) and gpus >= 0,
        f"runtime.num_gpus_per_client must be a number >= 0 (0.25: four clients share a GPU), got {gpus!r}",
    )
    _need(
        gpus == 0 or cfg.device != "cpu",
        f"runtime.num_gpus_per_client={gpus} reserves GPUs, but device=cpu keeps the clients off them: "
        f"use device=auto or device=cuda, or runtime.num_gpus_per_client=0",
    )


def methods_with_personal_evaluation() -> list[str]:
    """The methods whose strategy and client both opt into the personal evaluation."""
    found = []
    for name in group_choices("method"):
        method = compose([f"method={name}"]).method
        if all(
            getattr(import_class(str(method[part]._target_)), "personal_evaluation", False)
            for part in ("strategy", "client")
        ):
            found.append(name)
    return found
