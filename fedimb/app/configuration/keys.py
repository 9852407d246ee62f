"""The configuration's groups and keys: the options of each group in ``conf/``, the
keys its files declare, and the one-line messages for a misspelt option or key (with the
nearest valid names)."""

from __future__ import annotations

import difflib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache, cache_key

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"
GROUPS = (
    "method",
    "dataset",
    "model",
    "partition",
    "dropout",
    "runtime",
    "normalize",
    "shrink",
    "aggregation",
    "privacy",
    "secagg",
    "mode",
    "speed",
    "tracking",
    "experiment",
)

#: the server of a method whose YAML names no ``strategy`` (a method that changes only the client)
DEFAULT_STRATEGY = "strategies.fedavg.FedAvgStrategy"


def group_choices(group: str) -> list[str]:
    """The options of a config group, from the YAML files in ``conf/<group>/``."""
    folder = CONF_DIR / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


#: how ``fedimb list`` names a group's options (``fedimb list methods``)
_OWN_NAMES = (
    "normalize",
    "shrink",
    "aggregation",
    "privacy",
    "secagg",
    "tracking",
)
LIST_NAMES = {group: group if group in _OWN_NAMES else f"{group}s" for group in GROUPS}

#: a group this small is listed in full in an "unknown option" message
_SHORT_GROUP = 8


def unknown_option(group: str, option: str) -> ConfigError:
    """``unknown method 'fedavgg'; did you mean fedavg? (fedimb list methods shows all)``:
    no count, so that the message a page quotes stays true when a method is added."""
    choices = group_choices(group)
    close = difflib.get_close_matches(option, choices, n=3, cutoff=0.6)
    message = f"unknown {group} '{option}'"
    if close:
        message += f"; did you mean {either(close)}?"
    if len(choices) <= _SHORT_GROUP:
        return ConfigError(f"{message} (choose from: {', '.join(choices) or 'none available'})")
    return ConfigError(f"{message} (fedimb list {LIST_NAMES[group]} shows all)")


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


#: the keys ``conf/`` declares, read once per process
_DECLARED: ProcessCache[dict[str, list[tuple[str, str]]]] = ProcessCache()


def declared_keys() -> dict[str, list[tuple[str, str]]]:
    """Every dotted key a YAML file in ``conf/`` declares, with the (group, option) pairs
    that declare it (``("", "config")`` for ``config.yaml``)."""
    return _DECLARED.get(cache_key(str(CONF_DIR)), _read_declared_keys)


def _read_declared_keys() -> dict[str, list[tuple[str, str]]]:
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


def missing_key_message(key: str, overrides: Sequence[str]) -> str | None:
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
    named = [o for o in options if _option_name(group, o) == o]
    example = (named or options)[0]
    others = [o for o in options if o != example]
    also = f" (or {', '.join(others)})" if others else ""
    return f"{group}={chosen} has no {setting}; use {group}={example}{also} {key}={value}"


def _option_name(group: str, option: str) -> str | None:
    """The ``name`` that ``conf/<group>/<option>.yaml`` gives (None where it gives none)."""
    node = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
    return str(node.get("name")) if isinstance(node, DictConfig) else None


def _chosen_option(group: str, overrides: Sequence[str]) -> str | None:
    """The option of ``group`` that ``overrides`` select (defaults and experiments included)."""
    try:
        cfg = hydra_config(overrides, with_hydra=True)
        return str(cfg.hydra.runtime.choices.get(group))
    except Exception:  # noqa: BLE001 - only for a better message; Hydra's stands otherwise
        return None


#: guards Hydra's global state (``initialize_config_dir`` sets it for the process), not a
#: cache; held only around one composition, never while a process cache is read
COMPOSE_LOCK = threading.RLock()


def hydra_config(overrides: Sequence[str], *, with_hydra: bool = False) -> DictConfig:
    """``conf/config.yaml`` composed by Hydra with ``overrides``, unresolved and unchecked
    (``with_hydra``: with Hydra's own node, which names the chosen options)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with COMPOSE_LOCK:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return hydra_compose(
                config_name="config", overrides=list(overrides), return_hydra_config=with_hydra
            )
