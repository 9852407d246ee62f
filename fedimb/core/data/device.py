"""A device's own training data, for SuperNodes started with ``--node-config data-path=..``.

Two layouts are read:

- an ``.npz`` file with ``x`` (N samples, in the run's input shape, or N×H×W for
  one-channel images) and ``y`` (N integer labels);
- a directory with one sub-folder per class, named by the class index (``0/``, ``1/``
  ...), holding image files; images are converted to the run's channel count and
  resized to its height and width.

Integer inputs are taken as 0–255 pixel values and scaled to [0, 1]; the device then
standardises each channel with its own statistics (the server never sees the data, so
the common convention of per-source standardisation is used). A text data set's inputs
(``tokens``: Shakespeare's character numbers) come as an ``.npz`` of integers below
``num_classes`` and are used as they are. Labels must lie in
``[0, num_classes)``. Every problem is a one-line :class:`DataUnavailableError` or
:class:`ConfigError` naming the path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedimb.core.errors import ConfigError, DataUnavailableError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".pgm", ".ppm", ".tif", ".tiff", ".webp"}


def load_device_data(
    path: str | Path, input_shape: tuple[int, ...], num_classes: int, tokens: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the data at ``path``: float32 inputs of ``input_shape`` (uint8 token
    numbers for ``tokens``) and int64 labels."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataUnavailableError(
            f"device data {path} does not exist (check --node-config data-path)"
        )
    if path.is_dir() and tokens:
        raise ConfigError(f"device data {path}: a text data set's data is an .npz file of x, y")
    if path.is_dir():
        x, y = _read_class_folders(path, input_shape)
    elif path.suffix == ".npz":
        x, y = _read_npz(path, input_shape)
    else:
        raise ConfigError(
            f"device data {path} must be an .npz file with x/y or a directory of class sub-folders"
        )
    if len(y) == 0:
        raise ConfigError(f"device data {path} holds no samples")
    if y.min() < 0 or y.max() >= num_classes:
        raise ConfigError(
            f"device data {path} has labels in [{y.min()}, {y.max()}], "
            f"the run needs [0, {num_classes})"
        )
    return (_token_numbers(x, path, num_classes) if tokens else _standardise(x)), y


def _token_numbers(x: np.ndarray, path: Path, vocabulary: int) -> np.ndarray:
    if not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() >= vocabulary:
        raise ConfigError(
            f"device data {path}: x must hold integer token numbers in [0, {vocabulary})"
        )
    return np.ascontiguousarray(x, dtype=np.uint8)


def _read_npz(path: Path, input_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "x" not in npz.files or "y" not in npz.files:
                raise ConfigError(
                    f"device data {path} must hold arrays 'x' and 'y', it has {sorted(npz.files)}"
                )
            x, y = npz["x"], npz["y"]
    except (OSError, ValueError) as err:
        raise ConfigError(f"device data {path} is not a readable .npz file ({err})") from None
    if x.ndim == len(input_shape) and len(input_shape) == 3 and input_shape[0] == 1:
        x = x[:, None]  # N×H×W one-channel images
    if tuple(x.shape[1:]) != tuple(input_shape) or len(x) != len(y):
        raise ConfigError(
            f"device data {path} has x of shape {x.shape} and y of shape {y.shape}; "
            f"the run needs x of shape (N, {', '.join(map(str, input_shape))}) and y of shape (N,)"
        )
    if not np.issubdtype(y.dtype, np.integer):
        raise ConfigError(f"device data {path} needs integer labels, y has dtype {y.dtype}")
    return x, y.astype(np.int64)


def _read_class_folders(path: Path, input_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    if len(input_shape) != 3:
        raise ConfigError(
            f"device data {path}: image folders need an image data set, "
            f"the run's inputs are {input_shape}"
        )
    channels, height, width = input_shape
    folders = sorted(p for p in path.iterdir() if p.is_dir())
    bad = [p.name for p in folders if not p.name.isdigit()]
    if not folders or bad:
        raise ConfigError(
            f"device data {path} needs class sub-folders named by class index (0, 1, ...), "
            f"found {bad or 'none'}"
        )
    images, labels = [], []
    for folder in folders:
        for file in sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES):
            try:
                with Image.open(file) as opened:
                    image = opened.convert("L" if channels == 1 else "RGB").resize((width, height))
                    array = np.asarray(image, dtype=np.float32) / 255.0
            except OSError as err:
                raise ConfigError(f"device data: cannot read image {file} ({err})") from None
            images.append(array[None] if channels == 1 else array.transpose(2, 0, 1))
            labels.append(int(folder.name))
    if not images:
        return np.zeros((0, *input_shape), np.float32), np.zeros(0, np.int64)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _standardise(x: np.ndarray) -> np.ndarray:
    """Integer inputs scaled from 0–255 to [0, 1], then each channel standardised."""
    x = x.astype(np.float32) / 255.0 if np.issubdtype(x.dtype, np.integer) else x.astype(np.float32)
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    std = x.std(axis=axes, keepdims=True) + 1e-8
    return np.ascontiguousarray((x - mean) / std, dtype=np.float32)
