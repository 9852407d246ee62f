"""Data sets that are downloaded once (Hugging Face Hub through flwr-datasets, NIST,
PhysioNet) or read from a local copy (``<name>.npz``, a folder mirroring the Hub data set,
torchvision's EMNIST files, wfdb records), with a one-line error naming what to do
offline; the raw arrays are stored under ``$FEDIMB_CACHE`` after the first download.
A local copy is read without asking the network whether the source is reachable."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedimb.core.data.cache import cache_dir, save_npz
from fedimb.core.errors import DataUnavailableError

#: each Hub data set's id, config, columns and image mode (``L`` grey, ``RGB`` colour)
_HF_SOURCES: dict[str, dict[str, str]] = {
    "fmnist": {
        "hf_id": "zalando-datasets/fashion_mnist",
        "image": "image",
        "label": "label",
        "mode": "L",
    },
    "cifar10": {"hf_id": "uoft-cs/cifar10", "image": "img", "label": "label", "mode": "RGB"},
    "svhn": {
        "hf_id": "ufldl-stanford/svhn",
        "hf_config": "cropped_digits",
        "image": "image",
        "label": "label",
        "mode": "RGB",
    },
    "cinic10": {"hf_id": "flwrlabs/cinic10", "image": "image", "label": "label", "mode": "RGB"},
    # one ``train`` split only; its test split is made per writer (:mod:`.femnist`)
    "femnist": {
        "hf_id": "flwrlabs/femnist",
        "image": "image",
        "label": "character",
        "group": "writer_id",
        "mode": "L",
    },
    # text records (character_id, x, y): LEAF's speaking roles (:mod:`.shakespeare`)
    "shakespeare": {"hf_id": "flwrlabs/shakespeare", "group": "character_id"},
}


def reachable(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    """False without trying when FEDIMB_OFFLINE=1 or HF_HUB_OFFLINE=1 is set."""
    if os.environ.get("FEDIMB_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _offline_error(name: str, where: str, source_copy: str = "") -> DataUnavailableError:
    """One line: what is missing, and each way to supply it (``source_copy``: a copy in
    the source's own format, where the loader reads one)."""
    return DataUnavailableError(
        f"data set '{name}' is not available offline ({where} unreachable and no local copy): "
        f"run once with network access, or put {name}.npz (arrays x_train, y_train, x_test, "
        f"y_test) into dataset.root=<dir> or {cache_dir()}{source_copy}"
    )


def local_copy(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
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


def _images_to_array(column: Any, mode: str) -> np.ndarray:
    """PIL images as uint8 N×C×H×W, each converted to ``mode`` first: one image of
    another mode (a grey picture in a colour data set) would not stack with the rest."""
    arr = np.stack([np.asarray(img.convert(mode) if img.mode != mode else img) for img in column])
    if arr.ndim == 3:  # grey-scale: add the channel axis
        arr = arr[:, None]
    else:  # HWC -> CHW
        arr = arr.transpose(0, 3, 1, 2)
    return arr.astype(np.uint8)


def hf_source(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """Data set ``name``'s Hub source with the ``dataset.hf_*`` settings applied."""
    return {**_HF_SOURCES[name], **{k: v for k, v in spec.items() if k.startswith("hf_") and v}}


def local_mirror(hf_id: str) -> Path | None:
    """The folder ``dataset.hf_id`` names when it is a local copy of a Hub data set
    (parquet or arrow files in the Hub's layout), else None (a Hub id)."""
    path = Path(hf_id).expanduser()
    return path if path.is_dir() else None


def hf_splits(name: str, spec: Mapping[str, Any], splits: tuple[str, ...]) -> dict[str, Any]:
    """The named splits of data set ``name`` as flwr-datasets loads them, from the Hub
    or from a local mirror (``dataset.hf_id=<folder>``, read without the network)."""
    source = hf_source(name, spec)
    mirror = local_mirror(source["hf_id"])
    if mirror is None and not reachable():
        raise _offline_error(
            name,
            f"Hugging Face Hub ({source['hf_id']})",
            ", or set dataset.hf_id=<folder> holding a copy of the Hub data set",
        )
    from flwr_datasets import FederatedDataset
    from flwr_datasets.partitioner import IidPartitioner

    kwargs = {"subset": source["hf_config"]} if source.get("hf_config") else {}
    fds = FederatedDataset(
        dataset=str(mirror or source["hf_id"]),
        partitioners={"train": IidPartitioner(1)},
        shuffle=False,
        **kwargs,
    )
    return {split: fds.load_split(split) for split in splits}


def hf_arrays(name: str, spec: Mapping[str, Any], ds: Any) -> tuple[np.ndarray, np.ndarray]:
    """One split's images (uint8 N×C×H×W) and labels (int64)."""
    source = hf_source(name, spec)
    return (
        _images_to_array(ds[source["image"]], source["mode"]),
        np.asarray(list(ds[source["label"]]), dtype=np.int64),
    )


def download_hf(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for split, ds in hf_splits(name, spec, ("train", "test")).items():
        out[f"x_{split}"], out[f"y_{split}"] = hf_arrays(name, spec, ds)
    return out


def download_emnist(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """EMNIST 'balanced' (47 classes) through torchvision's loader, from its files under
    ``dataset.root`` (or the cache) when they are there, else from NIST."""
    from torchvision.datasets import EMNIST

    root = Path(str(spec.get("root") or cache_dir())).expanduser()
    raw = root / "EMNIST" / "raw"
    present = all(
        (raw / f"emnist-balanced-{part}-{kind}-ubyte").is_file()
        for part in ("train", "test")
        for kind in ("images-idx3", "labels-idx1")
    )
    if not present and not reachable("biometrics.nist.gov"):
        raise _offline_error(
            name, "the NIST EMNIST server", ", or torchvision's EMNIST/raw files under dataset.root"
        )
    out = {}
    for split, train in (("train", True), ("test", False)):
        ds = EMNIST(str(root), split="balanced", train=train, download=not present)
        # torchvision stores EMNIST transposed; flip back to upright glyphs.
        out[f"x_{split}"] = ds.data.numpy().transpose(0, 2, 1)[:, None].astype(np.uint8)
        out[f"y_{split}"] = ds.targets.numpy().astype(np.int64)
    return out


def download_mitbih(name: str, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """MIT-BIH arrhythmia beats via wfdb, from ``dataset.root`` or PhysioNet."""
    from fedimb.core.data.ecg import load_mitbih

    return load_mitbih(
        spec, reachable=lambda: reachable("physionet.org"), offline_error=_offline_error
    )


def online_source(name: str, download: Callable[[str, Mapping[str, Any]], dict[str, np.ndarray]]):
    """The ``load_raw`` of data set ``name``: its local copy, else ``download`` (stored)."""

    def load_raw(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
        local = local_copy(name, spec)
        if local is not None:
            return local
        raw = download(name, spec)
        save_npz(cache_dir() / f"{name}.npz", raw)
        return raw

    return load_raw
