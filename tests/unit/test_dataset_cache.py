"""The embedded mnist5k split is cached on disk, so later processes load it without
scikit-learn and get exactly the arrays a fresh split gives."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from fedimb.core.data import datasets
from fedimb.core.data.cache import disk_cached

SPEC = {"name": "mnist5k", "test_fraction": 0.2, "split_seed": 0}


def test_cached_split_equals_a_fresh_split(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path))
    first = datasets._raw_mnist5k(SPEC)
    assert (tmp_path / "mnist5k-v1-split-0.2-0.npz").is_file()
    cached = datasets._raw_mnist5k(SPEC)
    raw = disk_cached("mnist5k-v1", lambda: None)
    fresh = datasets._stratified_split(raw["x"], raw["y"], 0.2, 0)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(cached[key], fresh[key])
        np.testing.assert_array_equal(first[key], fresh[key])
    assert len(fresh["y_test"]) == 1000 and np.all(np.bincount(fresh["y_test"]) == 100)


def test_a_process_with_the_cache_does_not_import_scikit_learn(tmp_path):
    env = {**os.environ, "FEDIMB_CACHE": str(tmp_path)}
    load = (
        "import sys; from fedimb.core.data.datasets import _raw_mnist5k; "
        f"_raw_mnist5k({SPEC!r}); print('sklearn' in sys.modules)"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", load], env=env, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    assert [r.stdout.strip() for r in runs] == ["True", "False"]
