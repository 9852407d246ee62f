"""Named array payloads inside ``FitIns.config`` / ``FitRes.metrics``.

Extra arrays (prototypes, latent means, control variates, label counts) travel under
their own keys, encoded with Flower's ``ndarray_to_bytes``, never appended to the
parameter list: a name says what an array is, where a position in the list would
break as soon as a method sends one array more or less.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flwr.common import bytes_to_ndarray, ndarray_to_bytes

PREFIX = "array:"


def pack(arrays: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """``{name: array}`` -> config/metrics entries ``{"array:<name>": bytes}``."""
    return {f"{PREFIX}{name}": ndarray_to_bytes(np.asarray(arr)) for name, arr in arrays.items()}


def unpack(record: Mapping[str, object]) -> dict[str, np.ndarray]:
    """All named arrays in a config/metrics dict, keyed by their names."""
    return {
        key[len(PREFIX) :]: bytes_to_ndarray(value)
        for key, value in record.items()
        if key.startswith(PREFIX) and isinstance(value, bytes)
    }


def scalars(record: Mapping[str, object]) -> dict[str, float]:
    """The numeric (non-payload) entries of a metrics dict."""
    return {
        k: float(v)
        for k, v in record.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def nbytes(record: Mapping[str, object]) -> int:
    """Approximate wire size of a config/metrics dict (payload bytes and strings)."""
    total = 0
    for key, value in record.items():
        total += len(key)
        if isinstance(value, (bytes, str)):
            total += len(value)
        else:
            total += 8
    return total
