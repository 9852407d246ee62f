"""Experiment configuration: compose ``conf/`` with Hydra overrides and resolve it; the
result is validated once per process (:mod:`fedimb.app.configuration.validation`) and
travels in a run through :mod:`fedimb.app.configuration.transport`. The groups, keys and
their hints are in :mod:`fedimb.app.configuration.keys`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.keys import (
    CONF_DIR,
    DEFAULT_STRATEGY,
    GROUPS,
    LIST_NAMES,
    check_overrides,
    declared_keys,
    either,
    group_choices,
    hydra_config,
    missing_key_message,
    unknown_option,
)
from fedimb.app.configuration.runtime_rules import RUNTIMES
from fedimb.app.configuration.seeds import register_data_seed_resolver
from fedimb.app.configuration.validation import methods_with_personal_evaluation, validate
from fedimb.core.errors import ConfigError

__all__ = [
    "CONF_DIR",
    "DEFAULT_STRATEGY",
    "GROUPS",
    "LIST_NAMES",
    "RUNTIMES",
    "check_overrides",
    "compose",
    "declared_keys",
    "either",
    "finalize",
    "group_choices",
    "import_class",
    "methods_with_personal_evaluation",
    "smoke_overrides",
    "sweep_variants",
    "unknown_option",
    "validate",
]

register_data_seed_resolver()  # before any configuration is composed or resolved


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


def compose(overrides: Sequence[str] = (), *, check: bool = True) -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides, then resolve and (with
    ``check``) validate."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    check_overrides(overrides)
    try:
        cfg = hydra_config(overrides)
    except (HydraException, OmegaConfBaseException) as err:
        # the message is built outside Hydra's lock: it reads the declared keys' cache
        lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
        missing = re.match(r"Could not override '([^']+)'", lines[0] if lines else "")
        message = missing_key_message(missing.group(1), overrides) if missing else None
        raise ConfigError(message or " ".join(lines[:2])) from None
    return finalize(cfg, check=check)


def finalize(cfg: DictConfig, *, check: bool = True) -> DictConfig:
    """Resolve interpolations, drop Hydra's own node, fill ``model: auto`` and a missing
    ``method.strategy``; with ``check``, validate (:mod:`fedimb.app.configuration.validation`)."""
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
    method = data.get("method")
    if isinstance(method, dict) and method.get("strategy") is None:
        method["strategy"] = {"_target_": DEFAULT_STRATEGY}  # a client-only method: FedAvg's server
    if data.get("model", {}).get("name") == "auto":
        data["model"] = default_model(data.get("dataset", {}).get("default_model"))
    resolved = OmegaConf.create(data)
    if check:
        validate(resolved)
    return resolved


def default_model(name) -> dict:
    """``model=auto``: the data set's default model with every option its own YAML
    (``conf/model/<name>.yaml``) gives, as ``model=<name>`` composes it, so that a saved
    configuration holds them."""
    path = CONF_DIR / "model" / f"{name}.yaml"
    if not path.is_file():
        return {"name": name}  # an unknown model: the model check names it
    return dict(OmegaConf.to_container(OmegaConf.load(path)))  # type: ignore[arg-type]


def smoke_overrides(method: str) -> list[str]:
    """The overrides of the shortest run that passes through every stage of ``method``
    (its YAML's ``smoke`` list; nothing for single-stage methods), for tests and
    benchmarks. Method keys get ``++`` so that they also apply in a sweep over methods."""
    smoke = compose([f"method={method}"]).method.get("smoke") or []
    return [f"++{item}" if item.startswith("method.") else str(item) for item in smoke]
