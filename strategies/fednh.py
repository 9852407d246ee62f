"""FedNH server (Dai et al., AAAI 2023), as the authors' code's ``FedNHServer.aggregate``
(Yutong-Dai/FedNH) computes it.

The encoder (and the scale s) is FedAvg'ed. The prototypes, the cosine head's
``weight`` (:mod:`fedimb.core.models.cosine`), are not averaged: after averaging, the
server replaces them by the smoothed update of the previous global prototypes with the
clients' normalised class means (:func:`fedimb.core.prototypes.smoothed_prototypes`):
p_c ← normalise(ρ·p_c + (1 − ρ)·μ_c), μ_c the normalised, count-weighted average of
the reporting clients' normalised class means. Classes no client reported keep theirs.

The previous prototypes are read from the current global model, so a checkpoint and a
resume keep them with no state of their own. The clients' statistics are checked
against their declaration (:mod:`clients.fednh`) before they are read: a reply with
NaN/Inf, the wrong shape or counts that do not sum to its sample count is rejected as a
whole; a class mean pointing away from the median direction of its class (the holders'
means and the current prototype, one vote each; ``influence.min_cosine``: a sign-flipped
mean keeps every bound) is set aside, counted; prototypes that would still not be finite
are never adopted (the previous ones stay, and the round notes it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clients.fednh import CLASS_COUNTS, FEATURE_MEANS, PAYLOADS
from fedimb.core.errors import ConfigError, check_number
from fedimb.core.models.cosine import prototype_slot
from fedimb.core.prototypes import smoothed_prototypes
from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate, PersonalEvaluation


def check_fraction(key: str, value) -> None:
    """A one-line error unless ``value`` (ρ, a smoothing weight) is a number in [0, 1]."""
    check_number(key, value, 0)
    if value > 1:
        raise ConfigError(f"{key} must be <= 1, got {value!r}")


class FedNHStrategy(PersonalEvaluation, BaseStrategy):
    """FedAvg of the encoder; smoothed prototype update of the cosine head."""

    payloads = PAYLOADS  # every reply is checked against them before aggregate reads it

    @dataclasses.dataclass(frozen=True)
    class Settings:
        rho: float = setting(check_fraction)

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.rho = float(s.rho)
        self.slot = prototype_slot(run.new_model())

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        previous = self.current_weights[self.slot] if self.current_weights else None
        weights = super().aggregate(server_round, updates)
        if weights is None or previous is None:
            return weights
        new = self.updated_prototypes(previous, updates)
        weights[self.slot] = new.astype(previous.dtype)
        return weights

    def updated_prototypes(self, previous: np.ndarray, updates: list[ClientUpdate]) -> np.ndarray:
        """The smoothed prototypes from the accepted updates' class means, or the
        previous ones (and a note) where the result is not finite."""
        means = [u.payload[FEATURE_MEANS] for u in updates]
        counts = self.agreeing_counts(
            [u.partition_id for u in updates],
            means,
            [u.payload[CLASS_COUNTS] for u in updates],
            previous,
            "class_mean",
        )
        new = smoothed_prototypes(previous, means, counts, self.rho)
        if not np.all(np.isfinite(new)):
            self.round_log.note("prototype update not finite: previous prototypes kept")
            return previous
        moved = np.any(new != previous, axis=1)
        self.round_log.extra["prototypes_moved"] = int(moved.sum())
        return new
