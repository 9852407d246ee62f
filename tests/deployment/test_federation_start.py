"""A LocalFederation that says it is up has its SuperNodes connected, however slowly they
start (a loaded machine): its nodes here start only seconds after their process does."""

from __future__ import annotations

import os

import pytest

from fedimb.cli.federation import processes
from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home, online_count
from fedimb.cli.federation.local import LocalFederation
from fedimb.cli.federation.processes import FederationError

pytestmark = pytest.mark.slow


def slow_supernodes(monkeypatch, tmp_path, delay: float) -> None:
    """Every SuperNode started from now on waits ``delay`` seconds before it runs."""
    real = processes.executable("flower-supernode")
    script = tmp_path / "slow-supernode"
    script.write_text(f'#!/bin/sh\nsleep {delay}\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    original = processes.executable
    monkeypatch.setattr(
        processes,
        "executable",
        lambda name: str(script) if name == "flower-supernode" else original(name),
    )


def online_nodes(federation: LocalFederation) -> int:
    with flwr_home(federation.address) as (home, connection):
        return online_count(FlwrCli(connection, home).list_supernodes() or [])


def test_a_started_federation_has_every_node_connected(tmp_path, monkeypatch, no_leaked_processes):
    slow_supernodes(monkeypatch, tmp_path, delay=15)
    with LocalFederation(tmp_path / "fed", 2) as federation:
        assert online_nodes(federation) == 2


def test_a_node_that_never_connects_is_named(tmp_path, no_leaked_processes):
    federation = LocalFederation(tmp_path / "fed", 1, connect_timeout=20)

    def astray(i: int) -> None:  # a SuperNode pointed at an address where no SuperLink listens
        federation.nodes.append(
            processes.SuperNode(
                f"127.0.0.1:{processes.free_port()}",
                federation.node_config(i),
                tmp_path / "fed" / f"node{i}.log",
                env=processes.flower_env(tmp_path / "fed" / "flwr-home"),
            )
        )

    federation.start_node = astray
    with pytest.raises(
        FederationError,
        match=r"0 of 1 SuperNodes connected to the SuperLink within 20s; see .*node0\.log",
    ):
        federation.start()
    assert all(not node.alive() for node in federation.nodes) and not federation.superlink.alive()


@pytest.mark.skipif(
    os.geteuid() != 0, reason="an image's node gets its key as the image's user (chown)"
)
def test_an_edge_image_node_is_waited_for_like_a_native_one(tmp_path, no_leaked_processes):
    """EdgeFederation inherits LocalFederation's wait: a node from the image that exits
    before it connects is named with its log, as a native node is."""
    from edge.federation import ContainerSpec, EdgeFederation

    def failing_engine(*args: str) -> list[str]:  # every engine command fails, as without an image
        return ["sh", "-c", "echo cannot run the image; exit 1"]

    federation = EdgeFederation(
        tmp_path / "fed",
        1,
        secure=True,
        images={0: ContainerSpec(failing_engine, "fedimb-edge:arm64", "arm64")},
    )
    with pytest.raises(
        FederationError, match=r"a SuperNode exited \(cannot run the image\); see .*node0\.log"
    ):
        federation.start()
    assert not federation.superlink.alive()
