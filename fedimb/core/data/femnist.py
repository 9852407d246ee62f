"""FEMNIST (LEAF; Caldas et al., 2018): EMNIST's 62 classes of digits and letters, by
writer, from the Hub's ``flwrlabs/femnist`` through flwr-datasets (3,597 writers).

The Hub data set has one ``train`` split. Its test split follows LEAF's sample split:
within each writer, a seeded random share ``test_fraction`` of the writer's samples is
held out, the writer keeping at least one training sample (LEAF keeps
``max(1, floor((1 - test_fraction) * n))`` for training). The writer of every training
sample is its natural client (``groups_train``): writer ids sorted as strings are
numbered 0, 1, ..., so ``partition=natural`` gives one client per writer, or contiguous
blocks of writers for fewer clients. The whole split, with each sample's writer, is
cached under ``$FEDIMB_CACHE``; the test split is made on every load from its settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedimb.core.data.cache import disk_cached
from fedimb.core.data.leaf import leaf_test_split
from fedimb.core.data.online import hf_arrays, hf_source, hf_splits, local_copy

NAME = "femnist"


def _download(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every sample of the Hub's ``train`` split with its writer's number."""
    ds = hf_splits(NAME, spec, ("train",))["train"]
    x, y = hf_arrays(NAME, spec, ds)
    writer_ids = np.asarray(list(ds[hf_source(NAME, spec)["group"]]), dtype=str)
    _, writers = np.unique(writer_ids, return_inverse=True)  # numbered in sorted order
    return {"x": x, "y": y, "writers": writers.astype(np.int64)}


def load_femnist(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A local ``femnist.npz`` (as for the other online data sets), else the Hub's (or a
    local mirror's) samples split per writer into training and test samples."""
    local = local_copy(NAME, spec)
    if local is not None:
        return local
    whole = disk_cached("femnist-v1", lambda: _download(spec))
    test = leaf_test_split(whole["writers"], float(spec["test_fraction"]), int(spec["split_seed"]))
    return {
        "x_train": whole["x"][~test],
        "y_train": whole["y"][~test],
        "x_test": whole["x"][test],
        "y_test": whole["y"][test],
        "groups_train": whole["writers"][~test],
    }
