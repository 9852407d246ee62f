"""Synthetic(α, β): the generated federated data set of the federated-optimisation
literature (Shamir et al. 2014, as adapted by Li et al., FedProx, MLSys 2020, §5.1; also
q-FFL, ICLR 2020, and LEAF).

Per device k: u_k ~ N(0, α), B_k ~ N(0, β); W_k ~ N(u_k, 1) (dimension × classes) and
b_k ~ N(u_k, 1); v_k ~ N(B_k, 1) per feature; x ~ N(v_k, Σ) with Σ diagonal,
Σ_jj = j^-1.2; y = argmax softmax(W_kᵀx + b_k). Device sizes are lognormal(4, 2) + 50
(whole samples). ``iid``: one global W and b for every device and v_k = 0
(Synthetic_IID). α and β scale the spread of the device-level draws as standard
deviations (the papers write N(0, α); their released generator passes α to numpy's
``normal`` as the scale), so Synthetic(0, 0) has every device share u = B = 0.

Each device is drawn from its own random stream (``data_seed``, device), so that a
device's data can be built alone, without the others (a simulation of 10,000 devices
builds only the sampled ones); every device's samples split 90/10 into its own training
and test set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.format import open_memmap

from fedimb.core.data.cache import disk_stored
from fedimb.core.errors import at_least, one_of
from fedimb.core.settings import read_declared

TEST_SHARE = 0.1  # each device keeps 10% of its samples as its own test set
_STREAM = 0x5917  # tells this generator's random streams from the other users of a seed


@dataclass(frozen=True)
class SyntheticSpec:
    """What defines one draw of Synthetic(α, β)."""

    alpha: float
    beta: float
    iid: bool
    dimension: int
    num_classes: int
    num_devices: int
    data_seed: int


@dataclass(frozen=True)
class DeviceData:
    x_train: np.ndarray  # (n_train, dimension) float32
    y_train: np.ndarray  # (n_train,) int64
    x_test: np.ndarray
    y_test: np.ndarray


def feature_scales(dimension: int) -> np.ndarray:
    """Standard deviations of the features: Σ_jj = j^-1.2, j = 1..dimension."""
    return np.power(np.arange(1, dimension + 1, dtype=np.float64), -1.2 / 2)


def device_size(spec: SyntheticSpec, device: int) -> int:
    """Samples of ``device``: lognormal(4, 2) + 50, its own draw."""
    rng = np.random.default_rng([spec.data_seed, _STREAM, 0, device])
    return int(rng.lognormal(4.0, 2.0)) + 50


def device_sizes(spec: SyntheticSpec) -> np.ndarray:
    return np.array([device_size(spec, k) for k in range(spec.num_devices)], dtype=np.int64)


def _global_model(spec: SyntheticSpec) -> tuple[np.ndarray, np.ndarray]:
    """The W and b every device shares in Synthetic_IID."""
    rng = np.random.default_rng([spec.data_seed, _STREAM, 1])
    return rng.normal(0.0, 1.0, (spec.dimension, spec.num_classes)), rng.normal(
        0.0, 1.0, spec.num_classes
    )


def train_count(size: int) -> int:
    """Training samples of a device with ``size`` samples (the rest, ≥ 1, are its test set)."""
    return size - max(1, int(round(TEST_SHARE * size)))


def device_data(spec: SyntheticSpec, device: int) -> DeviceData:
    """Device ``device``'s samples, split 90/10 into its training and test set."""
    rng = np.random.default_rng([spec.data_seed, _STREAM, 2, device])
    u, b_mean = rng.normal(0.0, spec.alpha), rng.normal(0.0, spec.beta)
    if spec.iid:
        weights, bias = _global_model(spec)
        centre = np.zeros(spec.dimension)
    else:
        weights = rng.normal(u, 1.0, (spec.dimension, spec.num_classes))
        bias = rng.normal(u, 1.0, spec.num_classes)
        centre = rng.normal(b_mean, 1.0, spec.dimension)
    size = device_size(spec, device)
    x = centre + rng.standard_normal((size, spec.dimension)) * feature_scales(spec.dimension)
    y = np.argmax(x @ weights + bias, axis=1)  # softmax is monotone: its argmax is the logits'
    cut = train_count(size)
    x = x.astype(np.float32)
    return DeviceData(x[:cut], y[:cut].astype(np.int64), x[cut:], y[cut:].astype(np.int64))


#: the arrays of a stored draw (see :func:`write_devices`)
ARRAYS = ("x_train", "y_train", "groups_train", "x_test", "y_test", "groups_test")


def write_devices(spec: SyntheticSpec, folder: Path) -> None:
    """Every device's data as one data set, written device by device into ``.npy`` files
    in ``folder`` (peak memory: one device, so 10,000 devices draw in a few hundred MB):
    the training parts with the device of each sample (``groups_train``, for the natural
    partition), and as the global test set the union of the devices' test parts, with
    their devices (``groups_test``). Devices are stored in order, so each device's rows
    are one contiguous block that a memory map reads alone."""
    sizes = device_sizes(spec)
    counts = {"train": np.array([train_count(int(s)) for s in sizes], dtype=np.int64)}
    counts["test"] = sizes - counts["train"]
    arrays, offsets = {}, {}
    for part, per_device in counts.items():
        total = int(per_device.sum())
        arrays[f"x_{part}"] = open_memmap(
            folder / f"x_{part}.npy", "w+", np.float32, (total, spec.dimension)
        )
        arrays[f"y_{part}"] = open_memmap(folder / f"y_{part}.npy", "w+", np.int64, (total,))
        arrays[f"groups_{part}"] = open_memmap(
            folder / f"groups_{part}.npy", "w+", np.int64, (total,)
        )
        arrays[f"groups_{part}"][:] = np.repeat(np.arange(spec.num_devices), per_device)
        offsets[part] = np.concatenate([[0], np.cumsum(per_device)])
    for k in range(spec.num_devices):
        device = device_data(spec, k)
        for part, x, y in (
            ("train", device.x_train, device.y_train),
            ("test", device.x_test, device.y_test),
        ):
            rows = slice(int(offsets[part][k]), int(offsets[part][k + 1]))
            arrays[f"x_{part}"][rows] = x
            arrays[f"y_{part}"][rows] = y
    for array in arrays.values():
        array.flush()


def synthetic_spec(spec: Mapping[str, Any]) -> SyntheticSpec:
    """The :class:`SyntheticSpec` of a ``dataset`` config node."""
    return read_declared(SyntheticSpec, spec)


def load_synthetic(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Synthetic(alpha, beta), generated once per machine and memory-mapped: a process
    reads only the devices it trains or tests."""
    draw = synthetic_spec(spec)
    key = "synthetic-v2-" + "-".join(f"{v!r}" for v in dataclasses.astuple(draw))
    return disk_stored(key, lambda folder: write_devices(draw, folder), ARRAYS)


def configured_shape(spec: Mapping[str, Any]) -> tuple[int, tuple[int, ...]]:
    """(number of classes, input shape) that a ``dataset`` config node chooses."""
    return int(spec["num_classes"]), (int(spec["dimension"]),)


#: Synthetic(alpha, beta)'s settings: what a draw needs to be defined
SETTING_RULES = {
    "alpha": at_least(0),
    "beta": at_least(0),
    "iid": one_of(True, False),
    "dimension": at_least(1, integer=True),
    "num_classes": at_least(2, integer=True),
    "num_devices": at_least(1, integer=True),
    "data_seed": at_least(0, integer=True),
}
