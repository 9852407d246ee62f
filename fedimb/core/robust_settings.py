"""The ``aggregation`` section (:mod:`fedimb.core.robust` applies it): the rule, the
Byzantine clients assumed, the rules' own settings, their one-line checks, and the fewest
updates a round needs under each rule.

f is ``aggregation.f`` where given, else ``aggregation.max_attackers`` (the Byzantine
clients the user assumes). With bucketing the rule keeps f: at most f buckets hold an
attacker. Each rule's own assumption sets the fewest inputs it needs: Krum and Multi-Krum
2f + 3 (the paper's n > 2f + 2), Bulyan 4f + 3, the trimmed mean without ``beta`` 2f + 1;
with buckets of s a round needs (need − 1)·s + 1 updates, so that ⌈n/s⌉ ≥ need. A round
with fewer accepted updates keeps the previous global model and says why
(:func:`fedimb.core.robust.combine` returns None and the reason); a smaller federation
than that is refused with the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedimb.core.errors import ConfigError, check_number, is_number

RULES = ("mean", "median", "trimmed_mean", "krum", "multikrum", "bulyan", "centered_clip")


@dataclass(frozen=True)
class RobustSettings:
    """The ``aggregation`` section: the rule; max_attackers (the Byzantine clients the user
    assumes) and f (Krum's, Multi-Krum's and Bulyan's f where it should differ; None:
    max_attackers); beta (the trimmed mean's cut at each end; None: f values); the L2
    bound on each client's update (None: no clipping); the bucket size (None: no
    bucketing); centred clipping's radius τ and iteration count (None in the other
    rules, whose options do not declare them). Every value comes from
    ``conf/aggregation/<name>.yaml``; a key an option does not declare is None."""

    name: str
    max_attackers: int
    f: int | None = None
    beta: float | None = None
    max_update_norm: float | None = None
    bucket_size: int | None = None
    tau: float | None = None
    iterations: int | None = None

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> RobustSettings:
        """Settings from the configuration's ``aggregation`` section; a value out of range
        is a one-line :class:`ConfigError`."""
        settings = cls(
            name=section["name"],
            max_attackers=section["max_attackers"],
            f=section.get("f"),
            beta=section.get("beta"),
            max_update_norm=section.get("max_update_norm"),
            bucket_size=section.get("bucket_size"),
            tau=section.get("tau"),
            iterations=section.get("iterations"),
        )
        _check_values(settings)
        return settings

    @property
    def is_plain_mean(self) -> bool:
        """The method's own weighted mean, untouched (the default)."""
        return self.name == "mean" and self.max_update_norm is None

    @property
    def attackers(self) -> int:
        """f: ``f`` where given, else ``max_attackers``."""
        return self.max_attackers if self.f is None else self.f


def _check_values(settings: RobustSettings) -> None:
    """One-line :class:`ConfigError` for the first value out of range."""
    if settings.name not in RULES:
        raise ConfigError(
            f"unknown aggregation '{settings.name}' (choose from: {', '.join(RULES)})"
        )
    check_number("aggregation.max_attackers", settings.max_attackers, 0, integer=True)
    if settings.f is not None:
        check_number("aggregation.f", settings.f, 0, integer=True)
    beta = settings.beta
    if beta is not None and not (is_number(beta) and 0 <= beta < 0.5):
        raise ConfigError(f"aggregation.beta must be in [0, 0.5) or null, got {beta!r}")
    bound = settings.max_update_norm
    if bound is not None and not (is_number(bound) and math.isfinite(bound) and bound > 0):
        raise ConfigError(
            f"aggregation.max_update_norm must be a positive number or null, got {bound!r}"
        )
    if settings.bucket_size is not None:
        check_number("aggregation.bucket_size", settings.bucket_size, 1, integer=True)
        if settings.name == "mean":
            raise ConfigError(
                "aggregation.bucket_size changes nothing in aggregation=mean (the mean of "
                "bucket means is a mean): choose a robust rule or aggregation.bucket_size=null"
            )
    if settings.name == "centered_clip":
        tau = settings.tau
        if not (is_number(tau) and math.isfinite(tau) and tau > 0):
            raise ConfigError(f"aggregation.tau must be a positive number, got {tau!r}")
        check_number("aggregation.iterations", settings.iterations, 1, integer=True)


def check(settings: RobustSettings, num_clients: int) -> None:
    """One-line :class:`ConfigError` for the first setting out of range, or a federation
    too small for the rule."""
    _check_values(settings)
    need = minimum_updates(settings)
    if num_clients < need:
        raise ConfigError(
            f"aggregation={settings.name} with {assumption(settings)} "
            f"needs at least {need} updates a round, "
            f"but the federation has {num_clients} clients"
        )


def assumption(settings: RobustSettings) -> str:
    bucketing = f" and bucket_size={settings.bucket_size}" if settings.bucket_size else ""
    return f"f={settings.attackers}{bucketing}"


def _rule_minimum(settings: RobustSettings) -> int:
    """The fewest inputs (updates or bucket means) the rule's own assumption allows."""
    f = settings.attackers
    if settings.name in ("krum", "multikrum"):
        return 2 * f + 3
    if settings.name == "bulyan":
        return 4 * f + 3
    if settings.name == "trimmed_mean" and settings.beta is None:
        return 2 * f + 1
    return 1


def minimum_updates(settings: RobustSettings) -> int:
    """The fewest client updates a round needs: the rule's minimum, or with buckets of s
    the fewest n with ⌈n/s⌉ at that minimum (module docstring)."""
    need = _rule_minimum(settings)
    s = settings.bucket_size
    return need if not s else (need - 1) * s + 1
