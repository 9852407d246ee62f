"""Data sets that are downloaded once (Hugging Face Hub through flwr-datasets, NIST,
PhysioNet) or read from a local copy, with a one-line error naming what to do offline;
the raw arrays are stored under ``$FEDIMB_CACHE`` after the first download."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedimb.core.data.cache import cache_dir, save_npz
from fedimb.core.errors import DataUnavailableError

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


def download_hf(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
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


def download_emnist(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
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


def download_mitbih(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """MIT-BIH arrhythmia beats via wfdb, from ``dataset.root`` or PhysioNet."""
    from fedimb.core.data.ecg import load_mitbih

    return load_mitbih(
        spec, reachable=_hub_reachable("physionet.org"), offline_error=_offline_error
    )


def online_source(name: str, download: Callable[[str, Mapping[str, Any]], dict[str, np.ndarray]]):
    """The ``load_raw`` of data set ``name``: its local copy, else ``download`` (stored)."""

    def load_raw(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
        local = _local_copy(name, spec)
        if local is not None:
            return local
        raw = download(name, spec)
        save_npz(cache_dir() / f"{name}.npz", raw)
        return raw

    return load_raw
