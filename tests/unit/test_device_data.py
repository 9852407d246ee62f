"""A device's own data (--node-config data-path=..): readers, checks, client ids."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from fedimb.app.nodes.registry import ClientRegistry
from fedimb.core.data.device import load_device_data
from fedimb.core.errors import ConfigError, DataUnavailableError

SHAPE = (1, 8, 8)


def test_npz_with_one_channel_images_is_read_and_standardised(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(30, 8, 8), dtype=np.uint8)
    y = np.repeat([0, 3, 9], 10)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    xs, ys = load_device_data(tmp_path / "d.npz", SHAPE, 10)
    assert xs.shape == (30, 1, 8, 8) and xs.dtype == np.float32
    np.testing.assert_array_equal(ys, y)
    assert abs(xs.mean()) < 1e-5 and abs(xs.std() - 1) < 1e-3
    # standardisation keeps the order of pixel values
    flat_raw, flat = x.reshape(-1).astype(np.float64), xs.reshape(-1)
    assert np.all(np.diff(flat[np.argsort(flat_raw, kind="stable")]) >= -1e-6)


def test_class_folders_of_images(tmp_path):
    for label, value in ((2, 40), (5, 200)):
        (tmp_path / str(label)).mkdir()
        for i in range(3):
            Image.fromarray(np.full((16, 16, 3), value + i, dtype=np.uint8)).save(
                tmp_path / str(label) / f"{i}.png"
            )
    (tmp_path / "5" / "notes.txt").write_text("not an image")
    x, y = load_device_data(tmp_path, SHAPE, 10)
    assert x.shape == (6, 1, 8, 8)  # converted to one channel, resized to 8x8
    assert sorted(y.tolist()) == [2, 2, 2, 5, 5, 5]
    assert x[y == 5].mean() > x[y == 2].mean()


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda p: p / "missing.npz", DataUnavailableError, "does not exist"),
        (
            lambda p: (np.savez(p / "a.npz", x=np.zeros((3, 8, 8))), p / "a.npz")[1],
            ConfigError,
            "'x' and 'y'",
        ),
        (
            lambda p: (
                np.savez(p / "b.npz", x=np.zeros((3, 4, 4)), y=np.zeros(3, int)),
                p / "b.npz",
            )[1],
            ConfigError,
            "shape",
        ),
        (
            lambda p: (
                np.savez(p / "c.npz", x=np.zeros((3, 8, 8)), y=np.array([0, 1, 12])),
                p / "c.npz",
            )[1],
            ConfigError,
            "labels in",
        ),
        (
            lambda p: (np.savez(p / "d.npz", x=np.zeros((3, 8, 8)), y=np.zeros(3)), p / "d.npz")[1],
            ConfigError,
            "integer labels",
        ),
        (lambda p: ((p / "cats").mkdir(), p)[1], ConfigError, "named by class index"),
        (lambda p: ((p / "e.csv").write_text("1,2"), p / "e.csv")[1], ConfigError, ".npz file"),
    ],
)
def test_bad_device_data_gives_one_line_errors(tmp_path, make, error, match):
    with pytest.raises(error, match=match) as info:
        load_device_data(make(tmp_path), SHAPE, 10)
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


class _Proxy:
    def __init__(self, cid, props):
        self.cid, self.props = cid, props


class _Manager:
    def __init__(self, proxies):
        self.proxies = {p.cid: p for p in proxies}

    def num_available(self):
        return len(self.proxies)

    def all(self):
        return dict(self.proxies)


def test_nodes_with_their_own_data_get_free_client_ids_and_keep_them(monkeypatch):
    registry = ClientRegistry(capacity=3)
    monkeypatch.setattr(registry, "_ask", lambda proxies, config: [p.props for p in proxies])
    pi_a = _Proxy("n1", {"partition_id": -1, "device_key": "pi-a", "num_examples": 40})
    pinned = _Proxy("n0", {"partition_id": 1, "num_examples": 30})
    pi_b = _Proxy("n2", {"partition_id": -1, "device_key": "pi-b", "num_examples": 40})
    # devices answer before the node with a partition id: that id is still claimed first
    registry.refresh(_Manager([pi_a, pi_b, pinned]))
    assert (
        registry.partition_of(pi_a),
        registry.partition_of(pinned),
        registry.partition_of(pi_b),
    ) == (0, 1, 2)
    nodes = [pinned, pi_a, pi_b]
    # pi-a restarts (new Flower node id, same data): it gets its id back
    back = _Proxy("n9", {"partition_id": -1, "device_key": "pi-a", "num_examples": 40})
    registry.refresh(_Manager([nodes[0], nodes[2], back]))
    assert registry.partition_of(back) == 0 and registry.partition_ids() == [0, 1, 2]
    # a fourth device finds no free id and is left out
    extra = _Proxy("n10", {"partition_id": -1, "device_key": "pi-c", "num_examples": 40})
    registry.refresh(_Manager([nodes[0], nodes[2], back, extra]))
    assert registry.partition_of(extra) is None


def test_failure_reasons_are_short_and_name_the_cause():
    from fedimb.app.nodes.failure_reasons import describe_failure

    wrap = (
        "Message contains an Error (reason: {}). "
        "It originated during client-side execution of a message."
    )
    assert (
        describe_failure(
            ValueError(
                wrap.format("<class 'fedimb.core.errors.ConfigError'>:<'device data x.npz is bad'>")
            )
        )
        == "ConfigError: device data x.npz is bad"
    )
    assert (
        describe_failure(ValueError(wrap.format("Error: Node Unavailable - no heartbeat")))
        == "Error: Node Unavailable - no heartbeat"
    )
    assert "round timeout" in describe_failure(ValueError("Expected one Message but got: 0"))
    assert describe_failure(KeyError("x")) == "KeyError: 'x'"
    # a Ray actor killed under a client: one line, with Ray's reason
    died = (
        "<class 'ray.exceptions.ActorDiedError'>:"
        "<'The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: ClientAppActor\n\tpid: 29836\n"
        "The actor is dead because its worker process has died. "
        "Worker exit type: SYSTEM_ERROR'>"
    )
    assert describe_failure(ValueError(wrap.format(died))) == (
        "ActorDiedError: The actor died unexpectedly before finishing "
        "this task. The actor is dead because its worker process has died."
    )


def test_a_round_that_lost_every_client_to_dead_ray_actors_stops_the_run():
    from fedimb.app.nodes.node_proxy import ClientFailure, WorkersLost, check_workers_alive

    died = ClientFailure(
        "client 1 on node 5: ActorDiedError: "
        "The actor died unexpectedly before finishing this task."
    )
    with pytest.raises(
        WorkersLost, match="every client of round 3 failed because its Ray actor died"
    ):
        check_workers_alive(3, [died, died], succeeded=0)
    check_workers_alive(3, [died], succeeded=1)  # the other actors still serve
    check_workers_alive(
        3, [ClientFailure("client 1 on node 5: RuntimeError: bad")], succeeded=0
    )  # not the actors
