"""This machine's cache of data arrays (``$FEDIMB_CACHE``, default ``~/.cache/fedimb``)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np


def cache_dir() -> Path:
    """Where raw arrays are cached on this machine."""
    return Path(os.environ.get("FEDIMB_CACHE", Path.home() / ".cache" / "fedimb"))


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically (another process never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
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


_COMPLETE = "complete"  # written last into a stored folder: its arrays are whole


def is_stored(key: str) -> bool:
    """Whether :func:`disk_stored` holds the arrays of ``key`` whole on this machine."""
    return (cache_dir() / key / _COMPLETE).is_file()


def disk_stored(
    key: str, write: Callable[[Path], None], names: Iterable[str]
) -> dict[str, np.ndarray]:
    """Arrays too large to hold in every process: ``write(folder)`` stores them as
    ``<name>.npy`` files in ``<cache>/<key>/`` (once per machine), and each process maps
    them copy-on-write, so it reads from disk only the rows it indexes (a client its own
    samples) and processes share the pages. The folder is written under a temporary name
    and renamed when complete, so a reader never maps half a data set. Where the cache is
    not writable, the arrays go to a temporary folder removed at exit."""
    folder = cache_dir() / key
    if not (folder / _COMPLETE).is_file():
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
        except OSError:
            scratch = Path(tempfile.mkdtemp(prefix="fedimb-"))
            atexit.register(shutil.rmtree, scratch, True)
            folder = scratch
        write(scratch)
        (scratch / _COMPLETE).touch()
        if scratch != folder:
            if folder.exists() and not (folder / _COMPLETE).is_file():
                shutil.rmtree(folder, ignore_errors=True)  # damaged: never written by this function
            try:
                os.replace(scratch, folder)
            except OSError:  # another process stored it first
                shutil.rmtree(scratch, ignore_errors=True)
    return {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in names}
