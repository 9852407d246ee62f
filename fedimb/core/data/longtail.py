"""Global class imbalance (Astraea §2.3/§4.1): long-tail profiles of class frequencies,
and the partitioner that keeps a profile's share of every class before splitting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.core.data.partitioners import Split, dirichlet, iid
from fedimb.core.data.scheme import Scheme, check_alpha
from fedimb.core.errors import ConfigError, is_number, require

# English letter frequencies (percent), the common reference table.
LETTER_FREQUENCIES = {
    "a": 8.167,
    "b": 1.492,
    "c": 2.782,
    "d": 4.253,
    "e": 12.702,
    "f": 2.228,
    "g": 2.015,
    "h": 6.094,
    "i": 6.966,
    "j": 0.153,
    "k": 0.772,
    "l": 4.025,
    "m": 2.406,
    "n": 6.749,
    "o": 7.507,
    "p": 1.929,
    "q": 0.095,
    "r": 5.987,
    "s": 6.327,
    "t": 9.056,
    "u": 2.758,
    "v": 0.978,
    "w": 2.360,
    "x": 0.150,
    "y": 1.974,
    "z": 0.074,
}
# EMNIST 'balanced' label order: 10 digits, 26 capitals, 11 distinct lower-case letters.
EMNIST_BALANCED_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt"


def longtail_profile(
    num_classes: int,
    profile: str,
    imbalance_ratio: float = 10.0,
    frequencies: Sequence[float] | None = None,
) -> np.ndarray:
    """Relative class frequencies (max 1) of a global long-tail profile.

    - ``exponential``: w_c = ratio^(-c/(C-1)) (head/tail ratio = ``imbalance_ratio``).
    - ``halfnormal``: w_c = exp(-(c/(C-1))^2 / (2 s^2)) with s chosen so that the
      head/tail ratio is ``imbalance_ratio`` (Astraea's imbalanced CINIC-10).
    - ``letters``: English letter frequencies (Astraea's LTRF sets). For EMNIST-balanced
      (47 classes) every letter class gets its letter's frequency and digits the mean
      letter frequency (the paper does not say); otherwise class c gets the c-th most
      frequent letter.
    - ``explicit``: the given ``frequencies``.
    """
    c = np.arange(num_classes, dtype=np.float64)
    span = max(num_classes - 1, 1)
    ratio = float(imbalance_ratio)
    if profile in ("exponential", "halfnormal") and ratio < 1:
        raise ConfigError(f"partition.imbalance_ratio must be >= 1, got {imbalance_ratio}")
    if profile == "exponential":
        w = ratio ** (-c / span)
    elif profile == "halfnormal":
        w = np.exp(-((c / span) ** 2) * np.log(ratio)) if ratio > 1 else np.ones(num_classes)
    elif profile == "letters":
        if num_classes == len(EMNIST_BALANCED_CHARS):
            mean = float(np.mean(list(LETTER_FREQUENCIES.values())))
            w = np.array([LETTER_FREQUENCIES.get(ch.lower(), mean) for ch in EMNIST_BALANCED_CHARS])
        elif num_classes <= 26:
            w = np.sort(np.array(list(LETTER_FREQUENCIES.values())))[::-1][:num_classes]
        else:
            raise ConfigError(
                f"the 'letters' profile needs <= 26 or exactly 47 classes, got {num_classes}"
            )
    elif profile == "explicit":
        if frequencies is None or len(frequencies) != num_classes:
            raise ConfigError(
                f"partition.frequencies must list {num_classes} values for profile 'explicit'"
            )
        w = np.asarray(frequencies, dtype=np.float64)
        if (w < 0).any() or w.max() <= 0:
            raise ConfigError("partition.frequencies must be non-negative with a positive maximum")
    else:
        raise ConfigError(
            f"unknown long-tail profile '{profile}' "
            "(choose from: exponential, explicit, halfnormal, letters)"
        )
    return w / w.max()


def longtail(
    labels,
    num_classes,
    num_clients,
    rng,
    seed,
    profile: str = "exponential",
    imbalance_ratio: float = 10.0,
    frequencies: Sequence[float] | None = None,
    client_split: str = "iid",
    alpha: float = 0.5,
    min_partition_size: int = 2,
) -> Split:
    """Global class imbalance (Astraea §2.3/§4.1): keep a ``profile`` fraction of each
    class, then split the kept samples over clients (``iid`` = Astraea's random local
    distributions, or ``dirichlet``)."""
    weights = longtail_profile(num_classes, profile, imbalance_ratio, frequencies)
    kept = []
    for c in range(num_classes):
        pool = rng.permutation(np.flatnonzero(labels == c))
        kept.append(pool[: max(1, int(np.floor(len(pool) * weights[c])))] if len(pool) else pool)
    subset = np.sort(np.concatenate(kept))
    if client_split == "iid":
        parts, _ = iid(labels[subset], num_classes, num_clients, rng, seed)
    elif client_split == "dirichlet":
        parts, _ = dirichlet(
            labels[subset], num_classes, num_clients, rng, seed, alpha, min_partition_size
        )
    else:
        raise ConfigError(
            f"partition.client_split must be 'iid' or 'dirichlet', got '{client_split}'"
        )
    return [subset[p] for p in parts], None


def longtail_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    check_alpha(spec)
    if "imbalance_ratio" in spec:
        ratio = spec["imbalance_ratio"]
        require(
            is_number(ratio) and ratio >= 1,
            f"partition.imbalance_ratio must be >= 1, got {ratio!r}",
        )


LONGTAIL = Scheme(longtail, longtail_rules, "raise partition.alpha or partition.min_partition_size")
