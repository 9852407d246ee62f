"""Bounded influence: each number a client reports is bounded relative to the others'
before it weighs that client or feeds a server step (pure numpy, no Flower imports).

A client's value is compared with the median of the *other* clients' values (the
leave-one-out median), so that one client cannot move its own reference, and two honest
clients are enough to bound a third. A value more than ``ratio`` times that median is cut
down to it (:func:`bound_above`); a loss, which weighs a client through a power that may be
negative (GRP-FED's adaptive q), is kept within ``[median / ratio, median * ratio]``
(:func:`bound_within`). Each function returns the bounded values and the indices it cut,
so that the caller counts them. With fewer than two values, or where the others' median
is zero, there is nothing to compare against, and nothing is cut.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedimb.core.errors import ConfigError

#: numbers, one per client
Values = Sequence[float] | np.ndarray


def others_medians(values: Values) -> np.ndarray:
    """For each value, the median of all the other values (NaN where there is no other)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return np.full(v.shape, np.nan)
    return np.array([np.median(np.delete(v, i)) for i in range(v.size)])


def references(values: Values, floor: float = 0.0) -> np.ndarray:
    """What each value is compared with: the others' median, or ``floor`` where that is
    larger (NaN where there are no others)."""
    reference = others_medians(values)
    return np.where(np.isnan(reference), np.nan, np.maximum(reference, floor))


def bound_above(values: Values, ratio: float, floor: float = 0.0) -> tuple[np.ndarray, list[int]]:
    """Each value at most ``ratio`` times its reference (:func:`references`: the others'
    median, at least ``floor``); the indices cut."""
    v = np.asarray(values, dtype=np.float64)
    ceiling = ratio * references(v, floor)
    cut = [i for i in range(v.size) if ceiling[i] > 0 and v[i] > ceiling[i]]
    out = v.copy()
    out[cut] = ceiling[cut]
    return out, cut


def bound_within(values: Values, ratio: float) -> tuple[np.ndarray, list[int]]:
    """Each positive value within a factor ``ratio`` of the median of the others, on
    either side; the indices cut."""
    v = np.asarray(values, dtype=np.float64)
    reference = others_medians(v)
    high, low = ratio * reference, reference / ratio
    cut = [i for i in range(v.size) if reference[i] > 0 and not low[i] <= v[i] <= high[i]]
    out = v.copy()
    out[cut] = np.clip(v[cut], low[cut], high[cut])
    return out, cut


def bound_norms(
    vectors: Sequence[np.ndarray], ratio: float
) -> tuple[list[np.ndarray], list[int], np.ndarray]:
    """Each vector scaled down to at most ``ratio`` times the median of the others' L2
    norms (its direction kept); the bounded vectors, the indices cut and every vector's
    norm before the cut. Norms are taken in float64 and each vector keeps its dtype."""
    norms = np.array([float(np.linalg.norm(np.asarray(x, dtype=np.float64))) for x in vectors])
    bounded, cut = bound_above(norms, ratio)
    out = list(vectors)
    for i in cut:
        x = np.asarray(vectors[i])
        out[i] = (x.astype(np.float64) * (bounded[i] / norms[i])).astype(x.dtype)
    return out, cut, norms


def cosines_to_median(
    rows: np.ndarray, held: np.ndarray, anchor: np.ndarray | None = None
) -> np.ndarray:
    """For each held row (one client's direction for one class), its cosine with the
    coordinate-wise median of every held row and ``anchor`` (each as a unit vector;
    FedNH's: the class's current prototype, one vote among the clients'). A minority
    of flipped rows cannot move the median far, and with two opposed holders the anchor
    decides. NaN for rows not held, zero rows, or a zero median."""
    r = np.asarray(rows, dtype=np.float64)
    held = np.asarray(held, dtype=bool)
    out = np.full(len(r), np.nan)
    votes = [_unit(r[i]) for i in np.nonzero(held)[0]]
    if anchor is not None:
        votes.append(_unit(np.asarray(anchor, dtype=np.float64)))
    if not votes:
        return out
    median = np.median(np.stack(votes), axis=0)
    scale = float(np.linalg.norm(median))
    for i in np.nonzero(held)[0]:
        norm = float(np.linalg.norm(r[i])) * scale
        if norm > 0:
            out[i] = float(r[i] @ median) / norm
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


@dataclass(frozen=True)
class InfluenceSettings:
    """The ``influence`` section, each bound a factor on the others' median: ``ratio`` for
    the sample count a device announces (honest sizes differ least), ``update_ratio`` for
    update norms, ``statistic_ratio`` for what a server step reads per class or per
    parameter (class statistics, prototypes, feature gradients, control deltas: honest
    clients differ most there), ``loss_ratio`` for reported losses; ``min_cosine`` the
    least cosine a class direction (FedNH's class means) may make with the other
    clients' for that class (their median with the class's anchor). None switches a bound off."""

    ratio: float | None = None
    update_ratio: float | None = None
    statistic_ratio: float | None = None
    loss_ratio: float | None = None
    min_cosine: float | None = None

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> InfluenceSettings:
        """The settings of ``section`` (conf/config.yaml holds the defaults); a missing
        key, as in a run folder from before the bounds, bounds nothing."""
        section = section or {}
        return cls(
            ratio=section.get("ratio"),
            update_ratio=section.get("update_ratio"),
            statistic_ratio=section.get("statistic_ratio"),
            loss_ratio=section.get("loss_ratio"),
            min_cosine=section.get("min_cosine"),
        )

    def check(self) -> None:
        """One-line :class:`ConfigError` for a bound that is not a number > 1 or null."""
        for name in ("ratio", "update_ratio", "statistic_ratio", "loss_ratio"):
            value = getattr(self, name)
            if value is None:
                continue
            if not (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value > 1
            ):
                raise ConfigError(f"influence.{name} must be a number > 1 or null, got {value!r}")
        cosine = self.min_cosine
        if cosine is not None and not (
            isinstance(cosine, (int, float)) and not isinstance(cosine, bool) and -1 <= cosine < 1
        ):
            raise ConfigError(
                f"influence.min_cosine must be a number in [-1, 1) or null, got {cosine!r}"
            )
