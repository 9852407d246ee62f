"""Admission by the operator, over a real network interface: a SuperLink started with
``fedimb superlink`` on every interface admits the SuperNode key the operator listed,
and a rogue device that reaches it from the network holding ``ca.crt`` only can neither
register a key of its own nor list the federation, and its SuperNode is refused.

The rogue connects to this machine's own non-loopback address, so the SuperLink sees a
peer that is not loopback, as it would see another machine."""

from __future__ import annotations

import socket
import time

import psutil
import pytest

from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home, online_count, register_node
from fedimb.cli.federation.processes import (
    FederationError,
    SuperLink,
    SuperNode,
    flower_env,
    gated_superlink,
)
from fedimb.cli.federation.security import make_certificates, make_node_keys

pytestmark = pytest.mark.slow


def own_address() -> str | None:
    """An IPv4 address of this machine that is not loopback."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return str(address.address)
    return None


def wait_for(condition, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f}s"
        time.sleep(0.5)
    return result


def test_only_listed_keys_join_and_only_the_operator_registers(tmp_path, no_leaked_processes):
    address = own_address()
    if address is None:
        pytest.skip("this machine has no network interface besides loopback")
    certs = tmp_path / "certs"
    make_certificates(certs, [address])
    ((node_key, node_public),) = make_node_keys(certs, 1)
    ((rogue_key, rogue_public),) = make_node_keys(tmp_path / "rogue", 1, prefix="rogue")
    ca = str(certs / "ca.crt")
    env = flower_env(tmp_path / "flwr-home")
    superlink = SuperLink(
        tmp_path / "superlink.log",
        simulation=False,
        env=env,
        extra_args=[
            *("--ssl-ca-certfile", ca, "--ssl-certfile", str(certs / "server.pem")),
            *("--ssl-keyfile", str(certs / "server.key")),
        ],
        program=gated_superlink([node_public]),
        bind="0.0.0.0",
    )
    nodes: list[SuperNode] = []
    try:
        superlink.wait_ready(scheme="https", verify=ca)
        remote = f"{address}:{superlink.port}"
        with flwr_home(remote, insecure=False, root_certificates=ca) as (home, connection):
            rogue_cli = FlwrCli(connection, home)
            registration = rogue_cli.register_supernode(rogue_public)
            rogue_listing = rogue_cli.list_supernodes()
        with pytest.raises(FederationError, match="answers the operator's addresses only"):
            register_node(remote, rogue_public, certs / "ca.crt")
        for name, key in [("rogue", rogue_key), ("listed", node_key)]:
            nodes.append(
                SuperNode(
                    remote,
                    {"partition-id": len(nodes)},
                    tmp_path / f"{name}.log",
                    env=env,
                    extra_args=[
                        *("--root-certificates", ca),
                        *("--auth-supernode-private-key", str(key)),
                    ],
                    warm=False,
                )
            )
        rogue, listed = nodes
        with flwr_home(superlink.address, insecure=False, root_certificates=ca) as (home, conn):
            operator = FlwrCli(conn, home)
            wait_for(lambda: online_count(operator.list_supernodes() or []) == 1, "listed node up")
            wait_for(lambda: not rogue.alive(), "the rogue node refused")
            federation = operator.list_supernodes()
    finally:
        for node in nodes:
            node.stop()
        superlink.stop()
    assert registration is not None and registration.returncode != 0
    assert "403 Forbidden" in registration.stdout + registration.stderr
    assert rogue_listing is None  # the Control API did not answer the rogue
    assert "Failed to activate SuperNode" in (tmp_path / "rogue.log").read_text()
    assert rogue.proc.returncode != 0
    assert listed.proc.returncode is not None  # stopped by us, after it had served
    assert [node["status"] for node in federation or []] == ["online"]  # the listed key only
