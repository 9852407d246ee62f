"""A client's state between rounds: on disk or in Flower's ``Context.state``, the same
arrays come back to the last bit, each client reads only its own, and a run's folder goes
with the run."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from fedimb.core.client_state import (
    ContextState,
    DiskState,
    client_state,
    remove_state_folder,
    state_folder,
)

ARRAYS = {
    "c0": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
    "c1": np.arange(5, dtype=np.int64),
    "c2": np.array([1e-45, np.finfo(np.float32).max, -0.0], dtype=np.float32),
}


def context(run_id: int = 7) -> Context:
    return Context(run_id=run_id, node_id=0, node_config={}, state=RecordDict(), run_config={})


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_saved_arrays_come_back_bit_for_bit(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path))
    store = client_state(kind, context(), 3)
    assert isinstance(store, DiskState if kind == "disk" else ContextState)
    assert store.load("scaffold") is None
    store.save("scaffold", ARRAYS)
    back = client_state(kind, store.context if kind == "memory" else context(), 3).load("scaffold")
    assert back is not None and back.keys() == ARRAYS.keys()
    for key, array in ARRAYS.items():
        assert back[key].dtype == array.dtype and back[key].tobytes() == array.tobytes()


def test_each_client_and_run_reads_its_own_and_the_run_removes_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path))
    client_state("disk", context(7), 1).save("s", {"a": np.ones(2)})
    assert client_state("disk", context(7), 2).load("s") is None  # another client
    assert client_state("disk", context(8), 1).load("s") is None  # another run (a resume)
    memory = Context(run_id=7, node_id=0, node_config={}, state=RecordDict(), run_config={})
    client_state("disk", memory, 1).save("t", {"a": np.ones(2)})
    assert len(memory.state) == 0  # nothing held in the node's memory
    remove_state_folder(7)
    assert not state_folder(7).exists()


def test_the_simulation_keeps_state_on_disk_unless_a_ray_cluster_may_spread_its_actors():
    from fedimb.app.configuration.compose import compose
    from fedimb.app.configuration.runtime_rules import client_state_kind
    from fedimb.core.errors import ConfigError

    assert client_state_kind(compose([])) == "disk"
    assert client_state_kind(compose(["runtime=in_process"])) == "disk"
    assert client_state_kind(compose(["runtime.ray_address=10.0.0.5:6379"])) == "memory"
    assert client_state_kind(compose(["runtime.client_state=memory"])) == "memory"
    with pytest.raises(ConfigError, match="runtime.client_state=disk keeps"):
        compose(["runtime.ray_address=10.0.0.5:6379", "runtime.client_state=disk"])
    with pytest.raises(ConfigError, match="a SuperNode keeps its one client's state"):
        compose(["runtime=deployment", "runtime.client_state=disk"])
