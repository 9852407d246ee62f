"""The run's two seeds: ``seed_data`` (the validation split, the partition and the clients'
local test splits) and ``seed_train`` (initialisation, client sampling, dropout, batch
order and a method's own randomness). Either one left null takes ``seed``, so that one
``seed`` still drives everything by default; a comparison can then vary one source of
variance while holding the other fixed."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

#: the resolver a data set's own seed follows: ``data_seed: ${data_seed:}`` (Synthetic's draw)
DATA_SEED_RESOLVER = "data_seed"


def _seed_or_default(cfg: Any, key: str) -> int:
    value = cfg.get(key)  # absent in older run folders' configurations: ``seed`` then
    return int(cfg.seed) if value is None else int(value)


def data_seed(cfg: Any) -> int:
    """The seed of the data's splits and partition: ``seed_data``, or ``seed`` where null."""
    return _seed_or_default(cfg, "seed_data")


def train_seed(cfg: Any) -> int:
    """The seed of the training's randomness: ``seed_train``, or ``seed`` where null."""
    return _seed_or_default(cfg, "seed_train")


def register_data_seed_resolver() -> None:
    """``${data_seed:}`` in a configuration resolves to :func:`data_seed` of its root, so
    that a generated data set's draw (Synthetic's ``dataset.data_seed``) follows
    ``seed_data`` where set, else ``seed``."""
    if not OmegaConf.has_resolver(DATA_SEED_RESOLVER):
        OmegaConf.register_new_resolver(DATA_SEED_RESOLVER, lambda *, _root_: data_seed(_root_))
