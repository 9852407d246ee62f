"""How a partitioner declares its settings: a :class:`Scheme` pairs the split with the
rules of its ``partition`` settings and the hint that spreads samples over more
clients, so the configuration's check, the split and the preflight read one
declaration."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fedimb.core.errors import is_int, is_number, require

#: a partitioner's rules: (its ``partition`` settings, the data set's classes, num_clients)
Rules = Callable[[Mapping[str, Any], int, int], None]

#: the arguments every partitioner gets from the caller, not from its settings
_CALL_ARGUMENTS = ("labels", "num_classes", "num_clients", "rng", "seed")


def no_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    """A partitioner whose settings need no check before it runs."""


@dataclass(frozen=True)
class Scheme:
    """A partitioner with the rules of its settings and the hint that spreads samples
    over more clients when some are left without any."""

    split: Callable[..., Any]
    rules: Rules = no_rules
    spread_hint: str = "change the partition"

    @property
    def settings(self) -> list[str]:
        """The ``partition`` keys it reads (its keyword parameters)."""
        names = list(inspect.signature(self.split).parameters)
        return [n for n in names if n not in _CALL_ARGUMENTS]

    def check(self, name: str, spec: Mapping[str, Any], num_classes: int, num_clients: int):
        """One-line :class:`ConfigError` for a key it does not read or a rule broken."""
        for key in spec:
            require(
                key in ("name", "allow_empty_clients") or key in self.settings,
                f"partition '{name}' has no setting '{key}' "
                f"(its settings: {', '.join(self.settings) or 'none'})",
            )
        self.rules(spec, num_classes, num_clients)


def check_alpha(spec: Mapping[str, Any]) -> None:
    """``partition.alpha``, the Dirichlet concentration: > 0."""
    if "alpha" in spec:
        alpha = spec["alpha"]
        require(is_number(alpha) and alpha > 0, f"partition.alpha must be > 0, got {alpha!r}")


def check_samples_per_client(spec: Mapping[str, Any]) -> None:
    """``partition.samples_per_client``: an integer >= 1, or null (split evenly)."""
    value = spec.get("samples_per_client")
    require(
        value is None or (is_int(value) and value >= 1),
        f"partition.samples_per_client must be an integer >= 1 or null, got {value!r}",
    )
