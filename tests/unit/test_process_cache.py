"""The one per-process cache: a value is built once however many threads ask for it, the
oldest entry goes first when the cache is full, and keys compare configurations and arrays
by content."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from fedimb.core.process_cache import ProcessCache, cache_key


def test_a_value_is_built_once_when_threads_ask_together():
    cache: ProcessCache[object] = ProcessCache()
    builds = []
    asked = threading.Barrier(8)

    def build():  # slow enough that, without the lock, the other threads would build too
        builds.append(threading.get_ident())
        time.sleep(0.05)
        return object()

    got = []

    def ask():
        asked.wait()
        got.append(cache.get(cache_key("model"), build))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert len(got) == 8 and all(value is got[0] for value in got)


def test_a_build_may_read_another_cache():
    outer: ProcessCache[int] = ProcessCache()
    inner: ProcessCache[int] = ProcessCache()
    assert outer.get("a", lambda: inner.get("b", lambda: 2) + 1) == 3
    assert "b" in inner and "a" in outer


def test_a_failed_build_leaves_nothing_behind():
    cache: ProcessCache[int] = ProcessCache()

    def fail():
        raise ValueError("no data")

    with pytest.raises(ValueError):
        cache.get("a", fail)
    assert "a" not in cache and cache.get("a", lambda: 1) == 1


def test_max_entries_evicts_the_oldest():
    cache: ProcessCache[str] = ProcessCache(max_entries=2)
    for key in ("a", "b", "c"):
        cache.get(key, lambda key=key: key.upper())
    assert len(cache) == 2 and "a" not in cache and "b" in cache and "c" in cache
    assert cache.get("a", lambda: "again") == "again"
    assert "b" not in cache
    cache.clear()
    assert len(cache) == 0


def test_equal_configurations_have_equal_keys_and_different_ones_different_keys():
    one = OmegaConf.create({"name": "digits", "options": {"size": 8, "flip": False}})
    same = OmegaConf.create({"options": {"flip": False, "size": 8}, "name": "digits"})
    other = OmegaConf.create({"name": "digits", "options": {"size": 16, "flip": False}})
    assert cache_key(one, 3) == cache_key(same, 3) == cache_key(OmegaConf.to_container(one), 3)
    assert cache_key(one, 3) != cache_key(other, 3)
    assert cache_key(one, 3) != cache_key(one, 4)
    assert hash(cache_key(one, [1, 2], None))


def test_arrays_are_keyed_by_dtype_shape_and_content():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert cache_key(array) == cache_key(array.copy()) == cache_key(torch.from_numpy(array))
    assert cache_key(array) != cache_key(array.reshape(3, 2))
    assert cache_key(array) != cache_key(array.astype(np.float64))
    changed = array.copy()
    changed[1, 2] += 1
    assert cache_key(array) != cache_key(changed)
