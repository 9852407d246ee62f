"""A saved configuration brought up to date, once, before anything reads it.

A run folder's ``config.yaml`` holds the keys its fedimb version knew. ``fedimb resume``,
``attach``, ``report``, ``compare`` and ``export`` read it through :func:`upgrade`: today's
defaults for the run's own choices (its method, data set, runtime, ... as each section's
``name`` says) merged under the saved values, so that every reader finds every key and
reads it without a fallback. Where a key that did not exist meant something else than
today's default, :data:`MIGRATIONS` says what, per ``config_version`` (conf/config.yaml
holds today's; a configuration without one predates version 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.keys import GROUPS, group_choices
from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache, cache_key

#: per version, what a configuration written before it means by keys it lacks (where
#: today's options declare them): before version 1 every node was asked which client it
#: is and kept its client's state in memory, a round did not wait for lost nodes, and the
#: simulation started its nodes as ``runtime.nodes=auto`` does; before version 2
#: FedLoGe's SSE-C took Adam steps of 0.01 towards unit columns (today's defaults, 1e-4
#: and 0.1, are the authors' training script's)
MIGRATIONS: dict[int, dict[str, Any]] = {
    1: {
        "runtime.client_ids": "claimed",
        "runtime.client_state": "memory",
        "runtime.rejoin_timeout": 0,
        "runtime.nodes": "auto",
    },
    2: {
        "method.strategy.sse_lr": 0.01,
        "method.strategy.sse_norm": 1.0,
    },
}

#: per version, the keys it retired where today's options no longer declare them: version
#: 3 calibrates the fixed-clipping DP noise to what each round averages, so
#: ``privacy.num_sampled_clients`` stayed with the adaptive variants only
RETIRED: dict[int, tuple[str, ...]] = {3: ("privacy.num_sampled_clients",)}

#: today's configuration per set of group choices, composed once per process
_DEFAULTS: ProcessCache[tuple[dict[str, Any], dict[str, str]]] = ProcessCache()


def saved_choices(saved: Mapping[str, Any]) -> dict[str, str]:
    """The group options a saved configuration was composed from, as its sections'
    ``name`` say; a group whose name is no option today is left out."""
    found = {}
    for group in GROUPS:
        section = saved.get(group)
        name = section.get("name") if isinstance(section, Mapping) else None
        if isinstance(name, str) and name in group_choices(group):
            found[group] = name
    return found


def defaults_for(choices: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Today's configuration for these choices, resolved and unchecked, and the choices it
    was composed from: an option that cannot be composed without the saved run's own
    values (``partition=file`` reads its file) is left out, and its section kept as saved."""

    def build() -> tuple[dict[str, Any], dict[str, str]]:
        try:
            return _composed(choices), dict(choices)
        except ConfigError:
            alone = {group: name for group, name in choices.items() if _composes(group, name)}
            return _composed(alone), alone

    return _DEFAULTS.get(cache_key(sorted(choices.items())), build)


def _composed(choices: Mapping[str, str]) -> dict[str, Any]:
    from fedimb.app.configuration.compose import compose

    overrides = [f"{group}={name}" for group, name in sorted(choices.items())]
    data = OmegaConf.to_container(compose(overrides, check=False), resolve=True)
    assert isinstance(data, dict)
    return {str(key): value for key, value in data.items()}


def _composes(group: str, name: str) -> bool:
    try:
        _composed({group: name})
    except ConfigError:
        return False
    return True


def whole_values(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """The mappings of ``node`` that are values, not sections: empty ones and those whose
    keys are dotted settings (a search space, ``train.lr: log(0.001, 0.3)``). Merging
    defaults under one would add keys its run did not have."""
    if not isinstance(node, Mapping):
        return []
    if prefix and (not node or any("." in str(key) for key in node)):
        return [(prefix, dict(node))]
    found = []
    for key, value in node.items():
        found += whole_values(value, f"{prefix}.{key}" if prefix else str(key))
    return found


def version_of(saved: Mapping[str, Any]) -> int:
    version = saved.get("config_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def upgrade(saved: Mapping[str, Any]) -> DictConfig:
    """``saved`` over today's defaults for its choices, the keys it lacks first given the
    meaning :data:`MIGRATIONS` states for its version; ``config_version`` becomes today's.
    A section whose option is unknown today (a renamed method, say) is kept as saved,
    with no defaults of another option merged under it."""
    data, choices = defaults_for(saved_choices(saved))
    defaults = OmegaConf.create(data)
    for group in GROUPS:
        if group in saved and group not in choices and group in defaults:
            del defaults[group]
    filled = OmegaConf.create(dict(saved))
    for version, meanings in sorted(MIGRATIONS.items()):
        if version_of(saved) >= version:
            continue
        for key, value in meanings.items():
            declared = OmegaConf.select(defaults, key, default=None) is not None
            if declared and OmegaConf.select(filled, key, default=None) is None:
                OmegaConf.update(filled, key, value, force_add=True)
    for version, keys in sorted(RETIRED.items()):
        for key in keys if version_of(saved) < version else ():
            parent, _, leaf = key.rpartition(".")
            section = OmegaConf.select(filled, parent, default=None)
            if OmegaConf.select(defaults, key, default=None) is None and leaf in (section or {}):
                del section[leaf]
    merged = OmegaConf.merge(defaults, filled)
    for path, value in whole_values(saved):  # a search space is the user's, key for key
        OmegaConf.update(merged, path, value, merge=False)
    merged.config_version = defaults.config_version
    assert isinstance(merged, DictConfig)
    return merged
