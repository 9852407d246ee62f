"""``partition=file``: a split brought from another framework, as each client's indices."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedimb.core.data.partitioners import Split
from fedimb.core.data.scheme import Scheme
from fedimb.core.errors import ConfigError


def is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def range_bounds(client: dict, k: int) -> list:
    """``[start, stop]`` of a client given as ``{"range": [start, stop]}``."""
    bounds = client.get("range")
    if set(client) != {"range"} or not isinstance(bounds, list) or len(bounds) != 2:
        raise ConfigError(
            f'partition.path: client {k} must be a list of indices or {{"range": [start, stop]}}'
        )
    if all(is_index(b) for b in bounds) and bounds[0] > bounds[1]:
        raise ConfigError(f"partition.path: client {k} has a range that ends before it starts")
    return bounds


def client_indices(client: list | dict) -> np.ndarray:
    """One client's indices: a list of indices, or the indices start .. stop-1 of
    ``{"range": [start, stop]}`` (how a run folder writes a client whose training samples
    are one contiguous block, e.g. a device of Synthetic)."""
    if isinstance(client, dict):
        start, stop = client["range"]
        return np.arange(start, stop, dtype=np.int64)
    return np.asarray(client, dtype=np.int64)


def as_file_entry(indices: np.ndarray) -> list | dict:
    """How ``partition.json`` writes one client's indices: ``{"range": [start, stop]}``
    where they are one ascending block (two numbers instead of one per sample, as every
    natural Synthetic device's are), else the list."""
    ix = np.asarray(indices, dtype=np.int64)
    if len(ix) > 1 and ix[-1] - ix[0] == len(ix) - 1 and bool(np.all(np.diff(ix) == 1)):
        return {"range": [int(ix[0]), int(ix[-1]) + 1]}
    return ix.tolist()


def read_partition_file(path: str | None) -> dict[str, Any]:
    """The clients' index lists of a partition file ``{"clients": [[...], ...]}`` (a run
    folder's ``partition.json`` is one; a client may also be ``{"range": [start, stop]}``)
    and a digest of them; one-line errors for a missing, unreadable or malformed file.
    The indices travel inside the configuration (which travels inside the run: in a
    deployment the nodes run on other machines), so nodes never read the file."""
    import hashlib
    import json
    from pathlib import Path

    if not path:
        raise ConfigError(
            'partition=file needs partition.path=<file.json> ({"clients": [[indices], ...]})'
        )
    try:
        content = json.loads(Path(str(path)).expanduser().read_text())
    except FileNotFoundError:
        raise ConfigError(f"partition.path: no such file: {path}") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"partition.path: {path} is not a JSON file ({err})") from None
    clients = content.get("clients") if isinstance(content, dict) else None
    if not isinstance(clients, list) or not all(isinstance(c, list | dict) for c in clients):
        raise ConfigError(
            f'partition.path: {path} must hold {{"clients": [[indices of client 0], ...]}}'
        )
    for k, client in enumerate(clients):
        for index in range_bounds(client, k) if isinstance(client, dict) else client:
            if not is_index(index):
                raise ConfigError(f"partition.path: client {k} has a non-integer index {index!r}")
    digest = hashlib.sha256(json.dumps(clients).encode()).hexdigest()[:12]
    return {"clients": clients, "digest": digest}


def from_file(
    labels,
    num_classes,
    num_clients,
    rng,
    seed,
    path=None,
    clients=None,
    digest=None,
    allow_empty=False,
) -> Split:
    """The clients' training indices given in the configuration (``partition=file``,
    filled from ``partition.path`` by :func:`read_partition_file`): indices into the
    data set's training split as fedimb loads it. A sample may belong to several
    clients (some frameworks reuse samples); indices out of range, empty clients (unless
    ``partition.allow_empty_clients``) and a client count other than ``num_clients`` are
    errors."""
    if clients is None:
        clients = read_partition_file(path)["clients"]
    if len(clients) != num_clients:
        raise ConfigError(
            f"partition.path holds {len(clients)} clients but num_clients={num_clients}: "
            f"set num_clients={len(clients)}"
        )
    out = []
    for k, client in enumerate(clients):
        ix = client_indices(client)
        if len(ix) == 0:
            if allow_empty:
                out.append(ix)
                continue
            raise ConfigError(
                f"partition.path: client {k} has no samples (partition.allow_empty_clients=true "
                f"runs without it)"
            )
        if ix.min() < 0 or ix.max() >= len(labels):
            wrong = int(ix.min()) if ix.min() < 0 else int(ix.max())
            raise ConfigError(
                f"partition.path: client {k} has index {wrong}, outside the training split "
                f"[0, {len(labels) - 1}]"
            )
        out.append(ix)
    return out, None


FILE = Scheme(from_file, spread_hint="give every client indices in partition.path")
