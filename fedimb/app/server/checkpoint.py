"""Crash-recovery checkpoints of the server: global model and strategy state.

A checkpoint is one ``.npz`` file: every numpy array of the (nested) state under its own
key, plus a JSON skeleton that rebuilds dicts (any key type), lists, tuples, sets,
numbers, strings and None around them. No pickle, so a checkpoint cannot execute code.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from fedimb.core.data.cache import cache_dir


def _encode(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"@": "array", "key": key}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {
            "@": "dict",
            "items": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()],
        }
    if isinstance(obj, (list, tuple, set)):
        kind = {list: "list", tuple: "tuple", set: "set"}[type(obj)]
        items = sorted(obj) if isinstance(obj, set) else obj
        return {"@": kind, "items": [_encode(v, arrays) for v in items]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint a {type(obj).__name__}")


def _decode(node: Any, arrays) -> Any:
    if not isinstance(node, dict):
        return node
    kind = node["@"]
    if kind == "array":
        return arrays[node["key"]]
    if kind == "dict":
        return {_decode(k, arrays): _decode(v, arrays) for k, v in node["items"]}
    items = [_decode(v, arrays) for v in node["items"]]
    return {"list": list, "tuple": tuple, "set": set}[kind](items)


def save(path: Path, state: Any) -> None:
    """Write ``state`` atomically (a crash mid-write leaves the previous checkpoint)."""
    arrays: dict[str, np.ndarray] = {}
    skeleton = _encode(state, arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    try:
        with open(tmp, "wb") as handle:
            # numpy's stubs read **arrays as its allow_pickle flag
            np.savez(
                handle,
                __skeleton__=np.frombuffer(json.dumps(skeleton).encode(), dtype=np.uint8),
                **arrays,  # type: ignore[arg-type]
            )
            handle.flush()
            os.fsync(handle.fileno())  # on disk before it replaces the previous one
        os.replace(tmp, path)
    except BaseException:  # e.g. the disk full: the previous checkpoint stays, no partial file
        tmp.unlink(missing_ok=True)
        raise


def load(path: Path) -> Any:
    with np.load(path, allow_pickle=False) as npz:
        skeleton = json.loads(npz["__skeleton__"].tobytes().decode())
        arrays = {k: npz[k] for k in npz.files if k != "__skeleton__"}
    return _decode(skeleton, arrays)


def experiment_key(cfg: DictConfig) -> str:
    """Identity of an experiment for resuming: the configuration without the keys that
    do not change its results (where it runs, where outputs go, resume itself, an
    injected fault that a resume may switch off). ``fedimb resume`` computes it from the
    run folder's configuration as saved (``checkpoint.experiment``), so that bringing an
    older configuration up to date does not make another experiment of it."""
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    for key in ("runtime", "output", "resume", "checkpoint", "fault"):
        data.pop(key, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def checkpoint_path(cfg: DictConfig) -> Path:
    """Where the ServerApp keeps this run's checkpoint (on its own machine): named by the
    experiment (a changed configuration never resumes from it) and the run's id."""
    root = cfg.checkpoint.dir or (cache_dir() / "checkpoints")
    run_id = cfg.checkpoint.run_id or "run"
    key = cfg.checkpoint.experiment or experiment_key(cfg)
    return Path(str(root)).expanduser() / f"{key}-{run_id}.npz"
