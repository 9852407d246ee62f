"""Tiny local copies of the online data sets, each in its source's own format, written
into a test's folder: the Hub data sets as parquet files in the Hub's layout (with the
features' types: images, ``ClassLabel`` labels, FEMNIST's writer column), EMNIST as
torchvision's IDX files, MIT-BIH as wfdb records. The real loaders read them as a user's
mirror: ``dataset.hf_id=<folder>`` or ``dataset.root=<folder>``."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

#: each Hub data set's splits, image column, image mode and size, label column and classes
HUB = {
    "fmnist": {"splits": ("train", "test"), "image": "image", "mode": "L", "size": 28},
    "cifar10": {"splits": ("train", "test"), "image": "img", "mode": "RGB", "size": 32},
    "svhn": {
        "splits": ("train", "test", "extra"),
        "image": "image",
        "mode": "RGB",
        "size": 32,
        "config": "cropped_digits",
    },
    "cinic10": {
        "splits": ("train", "validation", "test"),
        "image": "image",
        "mode": "RGB",
        "size": 32,
    },
    "femnist": {
        "splits": ("train",),
        "image": "image",
        "mode": "L",
        "size": 28,
        "label": "character",
        "classes": 62,
    },
}
SPLIT_SIZES = {"train": 30, "test": 12, "validation": 6, "extra": 6}
#: FEMNIST's writers in the fixture (ids as on the Hub: 'f0000_14')
WRITERS = ("f0000_14", "f0001_41", "f0002_01", "f0003_10", "f0004_33")


def _images(rng, n: int, mode: str, size: int, grey_first: bool = False) -> list:
    from PIL import Image

    shape = (size, size) if mode == "L" else (size, size, 3)
    images = [Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(n)]
    if grey_first:  # a grey picture among colour ones (ImageNet-derived sets have them)
        images[0] = images[0].convert("L")
    return images


def hub_mirror(folder: Path, name: str, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Write data set ``name``'s splits as the Hub holds them; return each split's
    expected arrays: ``x`` (uint8 N×C×H×W as the loader should read them), ``y`` and,
    for FEMNIST, ``writer`` (the writer id of each sample)."""
    import datasets

    info = HUB[name]
    label = info.get("label", "label")
    classes = int(info.get("classes", 10))
    features = {
        info["image"]: datasets.Image(),
        label: datasets.ClassLabel(names=[f"class_{i}" for i in range(classes)]),
    }
    if name == "femnist":
        features |= {"writer_id": datasets.Value("string"), "hsf_id": datasets.Value("int64")}
    rng = np.random.default_rng(seed)
    data_dir = folder / info.get("config", "data")
    data_dir.mkdir(parents=True, exist_ok=True)
    expected = {}
    for split in info["splits"]:
        n = SPLIT_SIZES[split] * (2 if name == "femnist" else 1)
        images = _images(rng, n, info["mode"], info["size"], grey_first=name == "cinic10")
        labels = rng.integers(0, classes, n)
        columns = {info["image"]: images, label: labels.tolist()}
        if name == "femnist":
            writer_of = rng.integers(0, len(WRITERS), n)
            columns |= {"writer_id": [WRITERS[w] for w in writer_of], "hsf_id": [0] * n}
        table = datasets.Dataset.from_dict(columns, features=datasets.Features(features))
        table.to_parquet(str(data_dir / f"{split}-00000-of-00001.parquet"))
        x = np.stack([np.asarray(im.convert(info["mode"])) for im in images])
        x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)
        expected[split] = {"x": x, "y": labels}
        if name == "femnist":
            expected[split]["writer"] = np.asarray([WRITERS[w] for w in writer_of])
    if "config" in info:  # a named config, declared in the card as on the Hub
        lines = ["---", "configs:", f"- config_name: {info['config']}", "  data_files:"]
        for split in info["splits"]:
            lines += [f"  - split: {split}", f"    path: {info['config']}/{split}-*"]
        (folder / "README.md").write_text("\n".join([*lines, "---", ""]))
    return expected


def _idx(path: Path, array: np.ndarray) -> None:
    """``array`` (uint8) in the IDX format of (E)MNIST's files."""
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def emnist_files(root: Path, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """EMNIST balanced as torchvision keeps it under ``root`` (``EMNIST/raw``, glyphs
    stored transposed as NIST ships them); return each split's upright images and labels."""
    rng = np.random.default_rng(seed)
    raw = root / "EMNIST" / "raw"
    raw.mkdir(parents=True)
    expected = {}
    for split in ("train", "test"):
        n = SPLIT_SIZES[split]
        upright = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 47, n).astype(np.uint8)
        _idx(raw / f"emnist-balanced-{split}-images-idx3-ubyte", upright.transpose(0, 2, 1))
        _idx(raw / f"emnist-balanced-{split}-labels-idx1-ubyte", labels)
        expected[split] = {"x": upright[:, None], "y": labels.astype(np.int64)}
    return expected


#: the annotated beats of every fixture record: (sample, symbol); '+' is a rhythm note
BEATS = ((200, "N"), (420, "V"), (640, "A"), (700, "+"), (860, "L"))
RECORD_LENGTH = 1100


def mitbih_records(root: Path, records: tuple[str, ...], seed: int = 0) -> None:
    """MIT-BIH records as PhysioNet serves them: a header, two leads in format 212 at
    360 Hz (MLII, V1) and the reference beat annotations (``.atr``), per record."""
    import wfdb

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    samples = np.array([s for s, _ in BEATS])
    symbols = [c for _, c in BEATS]
    for record in records:
        signal = np.round(rng.normal(0, 0.3, (RECORD_LENGTH, 2)), 3)
        wfdb.wrsamp(
            record,
            fs=360,
            units=["mV", "mV"],
            sig_name=["MLII", "V1"],
            p_signal=signal,
            fmt=["212", "212"],
            adc_gain=[200.0, 200.0],
            baseline=[1024, 1024],
            write_dir=str(root),
        )
        wfdb.wrann(record, "atr", samples, symbol=symbols, write_dir=str(root))


def offline_caches(tmp_path: Path, monkeypatch) -> None:
    """No network, and every cache (fedimb's, Hugging Face's) inside the test's folder."""
    import datasets
    import flwr_datasets.common.telemetry as telemetry

    for key, value in {
        "FEDIMB_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "FLWR_TELEMETRY_ENABLED": "0",
        "FEDIMB_CACHE": str(tmp_path / "cache"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets"),
    }.items():
        monkeypatch.setenv(key, value)
    # read once at import: the process may have imported them before this test
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(telemetry, "FLWR_TELEMETRY_ENABLED", "0")
