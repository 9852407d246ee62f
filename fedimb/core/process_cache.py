"""Values built once per process and shared by every client the process serves.

A Ray actor or an in-process runtime serves many clients and rounds; what they share
(a loaded data set, its partition, a compiled model, inputs moved to a GPU, a client's
rebalanced data) is built once, under one lock, and keyed by :func:`cache_key`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import numpy as np

V = TypeVar("V")

#: one lock for every cache: a value is built at most once even when threads ask together
#: (re-entrant, so building one value may read another cache)
_LOCK = threading.RLock()


def cache_key(*parts: Any) -> Hashable:
    """A hashable key for configuration nodes, arrays and tensors: mappings and
    sequences by content, arrays by dtype, shape and a SHA-1 of their bytes."""
    return tuple(_keyable(part) for part in parts)


def _keyable(value: Any) -> Hashable:
    if hasattr(value, "_metadata") and hasattr(value, "_get_node"):  # an OmegaConf node
        from omegaconf import OmegaConf

        return _keyable(OmegaConf.to_container(value, resolve=True))
    if isinstance(value, dict):
        return tuple(sorted((str(k), _keyable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_keyable(v) for v in value)
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return (str(data.dtype), data.shape, hashlib.sha1(data.tobytes()).hexdigest())
    if isinstance(value, Hashable):
        return value
    return repr(value)


class ProcessCache(Generic[V]):
    """A per-process map from :func:`cache_key` keys to values built on first use;
    with ``max_entries`` the oldest entries go first."""

    def __init__(self, max_entries: int | None = None):
        self.max_entries = max_entries
        self._values: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value under ``key``, built by ``build()`` if this process has none yet."""
        with _LOCK:
            if key not in self._values:
                self._values[key] = build()
                while self.max_entries is not None and len(self._values) > self.max_entries:
                    self._values.popitem(last=False)
            return self._values[key]

    def __contains__(self, key: Hashable) -> bool:
        with _LOCK:
            return key in self._values

    def __len__(self) -> int:
        with _LOCK:
            return len(self._values)

    def clear(self) -> None:
        with _LOCK:
            self._values.clear()
