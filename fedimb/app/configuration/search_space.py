"""Search spaces of ``fedimb tune``: the shared knobs (``tune.search`` in conf/config.yaml)
and each method's own (``search`` in its ``conf/method/<name>.yaml``), translated into the
override syntax of Hydra's Optuna sweeper.

Each entry is ``key: value``, the key a dotted configuration key and the value one of

- a list: a choice among its values,
- ``log(a, b)``: a float drawn log-uniformly from [a, b],
- ``float(a, b)``: a float drawn uniformly from [a, b],
- ``int(a, b)``: an integer drawn uniformly from [a, b].

The configuration's check (:func:`check_search`) refuses, with one line, an entry whose
key the configuration lacks or whose value does not parse."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from fedimb.core.errors import ConfigError

#: the kinds of range and the Optuna sweeper's form of each (``{a}``, ``{b}`` the bounds)
RANGES = {
    "log": "tag(log, interval({a}, {b}))",
    "float": "interval({a}, {b})",
    "int": "int(interval({a}, {b}))",
}
_RANGE = re.compile(r"^\s*(log|float|int)\s*\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*$")
_SYNTAX = "a list of choices, log(a, b), float(a, b) or int(a, b)"


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched key: a choice among ``values``, or a range ``kind`` from ``values[0]``
    to ``values[1]``."""

    key: str
    kind: str  # choice | log | float | int
    values: tuple[Any, ...]

    def sweep_override(self) -> str:
        """``key=<the Optuna sweeper's form>``, e.g. ``train.lr=tag(log, interval(0.001, 0.3))``."""
        if self.kind == "choice":
            return f"{self.key}=choice({', '.join(_override_value(v) for v in self.values)})"
        low, high = self.values
        return f"{self.key}={RANGES[self.kind].format(a=low, b=high)}"

    def extremes(self) -> tuple[Any, ...]:
        """The values a check composes: every choice, or the two bounds of a range."""
        return self.values


def _override_value(value: Any) -> str:
    """A choice as Hydra's override grammar reads it back as the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse_dimension(key: str, value: Any, where: str) -> Dimension:
    """The :class:`Dimension` of one entry of ``where`` (``tune.search``, ``method.search``)."""
    if isinstance(value, (list, tuple, ListConfig)):
        choices = tuple(value)
        if not choices or not all(
            c is None or isinstance(c, (bool, int, float, str)) for c in choices
        ):
            raise ConfigError(
                f"{where}.{key} must list at least one plain value (number, string, true/false, "
                f"null), got {list(choices)!r}"
            )
        return Dimension(key, "choice", choices)
    match = _RANGE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(f"{where}.{key} must be {_SYNTAX}, got {value!r}")
    kind, low, high = match.group(1), _number(match.group(2)), _number(match.group(3))
    if low is None or high is None or not low < high:
        raise ConfigError(f"{where}.{key}: {kind}(a, b) needs numbers a < b, got {value!r}")
    if kind == "int" and not (float(low).is_integer() and float(high).is_integer()):
        raise ConfigError(f"{where}.{key}: int(a, b) needs integer bounds, got {value!r}")
    if kind == "log" and low <= 0:
        raise ConfigError(f"{where}.{key}: log(a, b) needs a > 0, got {value!r}")
    bounds = (int(low), int(high)) if kind == "int" else (float(low), float(high))
    return Dimension(key, kind, bounds)


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _entries(node: Any, where: str) -> dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, (dict, DictConfig)):
        raise ConfigError(f"{where} must be a mapping of key: {_SYNTAX}, got {node!r}")
    entries = OmegaConf.to_container(node) if isinstance(node, DictConfig) else node
    assert isinstance(entries, dict)
    return {str(k): v for k, v in entries.items()}


def search_space(cfg: DictConfig) -> list[Dimension]:
    """The dimensions a tuning run of this configuration searches: ``tune.search`` (the
    shared knobs), then the method's ``search`` (which wins where both name a key)."""
    tune = cfg.get("tune") or {}
    sources = (("tune.search", tune.get("search")), ("method.search", cfg.method.get("search")))
    merged: dict[str, Dimension] = {}
    for where, node in sources:
        for key, value in _entries(node, where).items():
            merged[key] = parse_dimension(key, value, where)
    return list(merged.values())


_ABSENT = object()


def check_search(cfg: DictConfig) -> None:
    """Every search entry parses and names a key of the configuration (one line if not)."""
    for dimension in search_space(cfg):
        if dimension.key.split(".")[0] in ("tune", "seed", "hydra"):
            raise ConfigError(f"{dimension.key} cannot be searched (it is fixed by fedimb tune)")
        if OmegaConf.select(cfg, dimension.key, default=_ABSENT) is _ABSENT:
            raise ConfigError(
                f"search key '{dimension.key}' is no key of the configuration "
                f"(method={cfg.method.get('name')}; fedimb --cfg job prints every key)"
            )
