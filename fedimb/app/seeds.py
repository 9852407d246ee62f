"""The run's two seeds: ``seed_data`` (the validation split, the partition and the clients'
local test splits) and ``seed_train`` (initialisation, client sampling, dropout, batch
order and a method's own randomness). Either one left null takes ``seed``, so that one
``seed`` still drives everything by default; a comparison can then vary one source of
variance while holding the other fixed."""

from __future__ import annotations

from typing import Any


def _seed_or_default(cfg: Any, key: str) -> int:
    value = cfg.get(key)  # absent in older run folders' configurations: ``seed`` then
    return int(cfg.seed) if value is None else int(value)


def data_seed(cfg: Any) -> int:
    """The seed of the data's splits and partition: ``seed_data``, or ``seed`` where null."""
    return _seed_or_default(cfg, "seed_data")


def train_seed(cfg: Any) -> int:
    """The seed of the training's randomness: ``seed_train``, or ``seed`` where null."""
    return _seed_or_default(cfg, "seed_train")
