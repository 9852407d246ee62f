"""This machine's cache of data arrays (``$FEDIMB_CACHE``, default ``~/.cache/fedimb``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

import numpy as np


def cache_dir() -> Path:
    """Where raw arrays are cached on this machine."""
    return Path(os.environ.get("FEDIMB_CACHE", Path.home() / ".cache" / "fedimb"))


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically (another process never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def disk_cached(key: str, load: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``load()``'s arrays, from ``<cache>/<key>.npz`` when it is there (written on a miss)."""
    path = cache_dir() / f"{key}.npz"
    if path.is_file():
        try:
            with np.load(path) as npz:
                return {k: npz[k] for k in npz.files}
        except (OSError, ValueError):
            pass  # a corrupt cache file is rebuilt below
    arrays = load()
    try:
        save_npz(path, arrays)
    except OSError:
        pass  # a read-only home only costs speed
    return arrays
