"""A SuperLink and N SuperNodes as native processes on this machine (each SuperNode with
its warm ClientApp launcher, :mod:`fedimb.cli.federation.node_worker`).

Used by ``fedimb local-federation`` (an experiment against real Flower processes in one
command), by the deployment tests, and by benchmarks. With ``secure=True`` the SuperLink
serves TLS with the certificates of :mod:`fedimb.cli.federation.security` and admits only the
SuperNodes whose keys it made (``fedimb superlink --supernode-keys``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home, online_count
from fedimb.cli.federation.processes import (
    FederationError,
    SuperLink,
    SuperNode,
    flower_env,
    gated_superlink,
)
from fedimb.cli.federation.security import make_certificates, make_node_keys


@dataclass
class LocalFederation:
    """Start with :meth:`start` (or ``with``), stop with :meth:`stop`."""

    workdir: Path
    num_nodes: int
    secure: bool = False
    node_configs: list[Mapping[str, object]] | None = None  # default: partition-id/num-partitions
    connect_timeout: float = 300.0  # seconds :meth:`start` waits for every SuperNode to connect
    superlink: SuperLink | None = None
    nodes: list[SuperNode] = field(default_factory=list)

    @property
    def certs(self) -> Path:
        return self.workdir / "certs"

    @property
    def address(self) -> str:
        assert self.superlink is not None
        return self.superlink.address

    @property
    def root_certificates(self) -> Path | None:
        return self.certs / "ca.crt" if self.secure else None

    def runtime_overrides(self) -> list[str]:
        """Front-end overrides that point an experiment at this federation."""
        overrides = ["runtime=deployment", f"runtime.address={self.address}"]
        if self.secure:
            overrides += [
                "runtime.insecure=false",
                f"runtime.root_certificates={self.root_certificates}",
            ]
        return overrides

    def node_config(self, i: int) -> Mapping[str, object]:
        if self.node_configs is not None:
            return self.node_configs[i]
        return {"partition-id": i, "num-partitions": self.num_nodes}

    def start(self) -> LocalFederation:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = flower_env(self.workdir / "flwr-home")
        try:
            if self.secure:
                make_certificates(self.certs)
                keys = make_node_keys(self.certs, self.num_nodes)
                self.superlink = SuperLink(
                    self.workdir / "superlink.log",
                    simulation=False,
                    env=env,
                    extra_args=[
                        "--ssl-ca-certfile",
                        str(self.certs / "ca.crt"),
                        "--ssl-certfile",
                        str(self.certs / "server.pem"),
                        "--ssl-keyfile",
                        str(self.certs / "server.key"),
                    ],
                    program=gated_superlink([public for _, public in keys]),
                )
                self.superlink.wait_ready(scheme="https", verify=str(self.certs / "ca.crt"))
            else:
                self.superlink = SuperLink(
                    self.workdir / "superlink.log", simulation=False, env=env
                )
                self.superlink.wait_ready()
            for i in range(self.num_nodes):
                self.start_node(i)
            self.wait_connected(self.connect_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_connected(self, timeout: float) -> None:
        """Wait until the SuperLink lists every node as online (as the preflight counts
        them), so that a federation that is up has its nodes: on a loaded machine a
        SuperNode takes many seconds to start. A node that exits, or a deadline that
        passes, is a :class:`FederationError` naming the nodes' logs."""
        deadline = time.monotonic() + timeout
        certificates = str(self.root_certificates) if self.secure else None
        with flwr_home(self.address, insecure=not self.secure, root_certificates=certificates) as (
            home,
            connection,
        ):
            cli = FlwrCli(connection, home)
            while True:
                online = online_count(cli.list_supernodes() or [])
                if online >= len(self.nodes):
                    return
                for node in self.nodes:
                    if not node.alive():
                        raise FederationError(
                            f"a SuperNode exited ({node.last_line()}); see {node.log_path}"
                        )
                if time.monotonic() > deadline:
                    logs = ", ".join(str(node.log_path) for node in self.nodes)
                    raise FederationError(
                        f"{online} of {len(self.nodes)} SuperNodes connected to the SuperLink "
                        f"within {timeout:.0f}s; see {logs}"
                    )
                time.sleep(0.5)

    def node_args(self, i: int) -> list[str]:
        if not self.secure:
            return ["--insecure"]
        return [
            "--root-certificates",
            str(self.certs / "ca.crt"),
            "--auth-supernode-private-key",
            str(self.certs / f"node-{i}"),
        ]

    def start_node(self, i: int) -> SuperNode:
        """Start (or restart) SuperNode ``i``."""
        node = SuperNode(
            self.address,
            self.node_config(i),
            self.workdir / f"node{i}.log",
            env=flower_env(self.workdir / "flwr-home"),
            extra_args=self.node_args(i),
        )
        if i < len(self.nodes):
            self.nodes[i] = node
        else:
            self.nodes.append(node)
        return node

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self.superlink is not None:
            self.superlink.stop()

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
