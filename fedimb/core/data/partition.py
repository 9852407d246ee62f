"""A partition of the training set over clients, made by the partitioner the
``partition`` configuration names (:data:`PARTITIONERS`, each with its rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedimb.core.data.flwr_partitioners import FLWR
from fedimb.core.data.longtail import LONGTAIL
from fedimb.core.data.partition_file import FILE
from fedimb.core.data.partitioners import (
    CLUSTERED,
    DIRICHLET,
    IID,
    NATURAL,
    PATHOLOGICAL,
    QUANTITY,
)
from fedimb.core.data.scheme import Scheme
from fedimb.core.data.stats import label_counts
from fedimb.core.errors import ConfigError


@dataclass(frozen=True)
class Partition:
    """Per-client training indices, their label histograms and optional client groups."""

    indices: tuple[np.ndarray, ...]
    counts: np.ndarray  # (num_clients, num_classes)
    groups: np.ndarray | None = None  # group id per client (``clustered``), else None

    @property
    def num_clients(self) -> int:
        return len(self.indices)

    @property
    def empty_clients(self) -> list[int]:
        """Clients without a single training sample."""
        return [k for k, ix in enumerate(self.indices) if len(ix) == 0]


def make_partition(
    labels: np.ndarray,
    num_classes: int,
    num_clients: int,
    spec: Mapping[str, Any],
    seed: int,
    groups: np.ndarray | None = None,
) -> Partition:
    """Partition ``labels`` over ``num_clients`` clients as the ``partition`` config says.

    ``groups`` is the data set's natural client of each sample (e.g. the patient), used
    by the ``natural`` partitioner."""
    labels = np.asarray(labels, dtype=np.int64)
    name = str(spec["name"])
    scheme = check_partition(spec, num_classes, num_clients)
    params = {k: v for k, v in spec.items() if k not in ("name", "allow_empty_clients")}
    if name in ("natural", "flwr"):
        params["groups"] = groups
    if name == "file":
        params["allow_empty"] = bool(spec.get("allow_empty_clients"))
    rng = np.random.default_rng([int(seed), 0x9A27])
    try:
        indices, groups = scheme.split(labels, num_classes, num_clients, rng, seed, **params)
    except TypeError as err:  # unknown or missing parameter
        raise ConfigError(f"partition '{name}': {err}") from None
    indices = [np.sort(np.asarray(ix, dtype=np.int64)) for ix in indices]
    counts = np.stack([label_counts(labels[ix], num_classes) for ix in indices])
    return Partition(tuple(indices), counts, groups)


def check_partition(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> Scheme:
    """The scheme of the ``partition`` settings ``spec``, after its rules: a one-line
    :class:`ConfigError` for an unknown partitioner, a key it does not read or a value
    out of range (for ``num_classes`` classes and ``num_clients`` clients)."""
    name = str(spec["name"])
    if name not in PARTITIONERS:
        raise ConfigError(
            f"unknown partition '{name}' (choose from: {', '.join(sorted(PARTITIONERS))})"
        )
    PARTITIONERS[name].check(name, spec, num_classes, num_clients)
    return PARTITIONERS[name]


PARTITIONERS: dict[str, Scheme] = {
    "file": FILE,
    "natural": NATURAL,
    "iid": IID,
    "dirichlet": DIRICHLET,
    "pathological": PATHOLOGICAL,
    "clustered": CLUSTERED,
    "longtail": LONGTAIL,
    "quantity": QUANTITY,
    "flwr": FLWR,
}
