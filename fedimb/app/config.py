"""Experiment configuration: compose ``conf/`` with Hydra overrides, resolve, validate
(:mod:`fedimb.app.validation`); it travels in a run through :mod:`fedimb.app.transport`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from fedimb.app.validation import validate
from fedimb.core.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("method", "dataset", "model", "partition", "dropout", "runtime", "normalize", "experiment")


def group_choices(group: str) -> list[str]:
    """The options of a config group, from the YAML files in ``conf/<group>/``."""
    folder = CONF_DIR / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def check_overrides(overrides: Sequence[str]) -> None:
    """Reject unknown config-group options (``method=foo``) with the valid choices."""
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or "(" in value:
            continue
        choices = group_choices(key)
        for option in value.split(","):
            option = option.strip()
            if option and option not in choices:
                raise ConfigError(
                    f"unknown {key} '{option}' (choose from: {', '.join(choices) or 'none available'})"
                )


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
            variants.append(firsts[:i] + [f"{key}={value}"] + firsts[i + 1:])
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
            raise ConfigError(" ".join(lines[:2])) from None
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
