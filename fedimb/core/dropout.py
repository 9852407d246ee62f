"""Who is available in a round: client dropout and persistent straggling.

A client that is sampled but unavailable is not contacted and is counted as a failure
of the round (it has "nothing to upload", ReBaFL §3). Availability is drawn from a
counter-based generator keyed by (seed, period), so it does not depend on which other
clients were sampled, on timing, or on the order of calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.core.errors import ConfigError

_STREAM = 0xD40


class Availability:
    """Success probability per client, redrawn every ``period`` rounds.

    ``period = 1`` is independent dropout in every round (ReBaFL §5.2); ``period = s``
    keeps each client's state for s rounds, then redraws it (persistent straggling,
    ReBaFL §5.5.3).
    """

    def __init__(self, p: Sequence[float] | np.ndarray, period: int = 1, seed: int = 0):
        self.p = np.asarray(p, dtype=np.float64)
        self.period = int(period)
        self.seed = int(seed)

    @property
    def num_clients(self) -> int:
        return int(self.p.shape[0])

    def mask(self, server_round: int) -> np.ndarray:
        """Availability of every client in ``server_round`` (1-based)."""
        block = (int(server_round) - 1) // self.period
        draws = np.random.default_rng([self.seed, block, _STREAM]).random(self.num_clients)
        return draws < self.p

    def filter(self, server_round: int, clients: Sequence[int]) -> list[int]:
        """The subset of ``clients`` (partition ids) that is available this round."""
        mask = self.mask(server_round)
        return [int(c) for c in clients if 0 <= int(c) < self.num_clients and mask[int(c)]]


def availability_from_config(
    spec: Mapping[str, Any],
    num_clients: int,
    groups: Sequence[int] | np.ndarray | None,
    seed: int,
) -> Availability:
    """Build the availability model of a ``dropout`` config node.

    Exactly one of ``p`` (all clients), ``p_per_client`` (one value per client) or
    ``p_per_group`` (one value per partition group, e.g. ``clustered``) sets the success
    probabilities; ``name: none`` means always available.
    """
    period = spec.get("period")
    always = spec.get("name") == "none"  # its YAML declares no period: nothing to redraw
    checked = period is not None or not always
    if checked and (not isinstance(period, int) or isinstance(period, bool) or period < 1):
        raise ConfigError(f"dropout.period must be an integer >= 1, got {period!r}")
    if always:
        return Availability(np.ones(num_clients), 1, seed)
    assert isinstance(period, int)  # checked above
    per_client, per_group = spec.get("p_per_client"), spec.get("p_per_group")
    if per_client is not None and per_group is not None:
        raise ConfigError("set only one of dropout.p_per_client and dropout.p_per_group")
    if per_client is not None:
        p = _probabilities(per_client, "dropout.p_per_client")
        if len(p) != num_clients:
            raise ConfigError(f"dropout.p_per_client has {len(p)} values for {num_clients} clients")
    elif per_group is not None:
        probs = _probabilities(per_group, "dropout.p_per_group")
        if groups is None:
            raise ConfigError(
                "dropout.p_per_group needs a partition with client groups (partition=clustered)"
            )
        n_groups = int(np.max(groups)) + 1
        if len(probs) != n_groups:
            raise ConfigError(
                f"dropout.p_per_group has {len(probs)} values for {n_groups} client groups"
            )
        p = probs[np.asarray(groups, dtype=np.int64)]
    else:
        value = spec.get("p")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            raise ConfigError(f"dropout.p must lie in [0, 1], got {value!r}")
        p = np.full(num_clients, float(value))
    return Availability(p, period, seed)


def _probabilities(values: Any, what: str) -> np.ndarray:
    try:
        arr = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{what} must be a number or a list of numbers in [0, 1], got {values!r}"
        ) from None
    if arr.size == 0 or not np.all((arr >= 0) & (arr <= 1)):
        raise ConfigError(f"{what} must lie in [0, 1], got {values!r}")
    return arr
