"""A run folder's config.yaml is data: ``fedimb resume`` and ``attach`` accept only the
top-level keys and the classes (``_target_``) a fresh run could name, checked before any
class is imported.

A fresh run composes ``conf/`` and refuses keys no file declares
(:mod:`fedimb.app.configuration.keys`); a run folder's config.yaml skips that composition, so
unchecked it could name any module to import and any callable to call with the run's
keywords. The classes accepted are those ``conf/`` names at that place (the methods'
strategies and clients), the ones older run folders name
(:data:`~fedimb.app.configuration.components.MOVED`, the default strategy) and
flwr-datasets' partitioners under ``partition.partitioner``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from fedimb.app.configuration.components import MOVED
from fedimb.app.configuration.keys import CONF_DIR, DEFAULT_STRATEGY, GROUPS, declared_keys
from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache, cache_key

#: ``partition=flwr``'s classes, one name below the module (the partitioner checks the name)
FLWR_PARTITIONER = ("partition.partitioner", re.compile(r"flwr_datasets\.partitioner\.\w+"))

#: the place of a ``_target_`` (the dotted path of its node) -> the classes named there
_TARGETS: ProcessCache[dict[str, frozenset[str]]] = ProcessCache()


def known_targets() -> dict[str, frozenset[str]]:
    """Every class ``conf/`` names, by place (``method.client`` -> the methods' clients),
    plus the default strategy and the classes that moved."""
    return _TARGETS.get(cache_key(str(CONF_DIR)), _read_targets)


def _read_targets() -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {"method.strategy": {DEFAULT_STRATEGY}}
    for old in MOVED:
        place = "method.strategy" if old.startswith("strategies.") else "method.client"
        found.setdefault(place, set()).add(old)
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        text = path.read_text()
        group = path.parent.relative_to(CONF_DIR).as_posix().replace("/", ".")
        prefix = "" if group == "." or "@package _global_" in text else f"{group}."
        _collect(OmegaConf.to_container(OmegaConf.create(text), resolve=False), prefix, found)
    return {place: frozenset(classes) for place, classes in found.items()}


def _collect(node: Any, prefix: str, found: dict[str, set[str]]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            found.setdefault(prefix.rstrip("."), set()).add(node["_target_"])
        for key, value in node.items():
            _collect(value, f"{prefix}{key}.", found)


def check_saved_config(data: Mapping[str, Any], source: str) -> None:
    """A one-line :class:`ConfigError` naming the key for a top-level key no file in
    ``conf/`` declares, or a ``_target_`` no fresh run could name at its place."""
    top = {*GROUPS, *(key.partition(".")[0] for key in declared_keys())}
    for key in data:
        if key not in top:
            raise ConfigError(f"{source}: unknown key '{key}': no file in conf/ declares it")
    _check_targets(data, "", source)


def _check_targets(node: Any, prefix: str, source: str) -> None:
    if isinstance(node, Mapping):
        if "_target_" in node:
            place, target = prefix.rstrip("."), node["_target_"]
            flwr_place, flwr_name = FLWR_PARTITIONER
            known = isinstance(target, str) and (
                target in known_targets().get(place, ())
                or (place == flwr_place and flwr_name.fullmatch(target) is not None)
            )
            if not known:
                key = f"{place}._target_" if place else "_target_"
                raise ConfigError(
                    f"{source}: {key}: refused {target!r}: not a class a fresh run can name there"
                )
        for key, value in node.items():
            _check_targets(value, f"{prefix}{key}.", source)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _check_targets(value, f"{prefix}{index}.", source)
