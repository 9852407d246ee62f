"""The ``flwr`` command, run as a child process: its connections and its queries.

Flower 1.41 reaches a SuperLink through a connection named in ``$FLWR_HOME/config.toml``;
:func:`flwr_home` writes one in a private folder. :class:`FlwrCli` is the one runner of
``flwr`` subcommands whose answers fedimb reads (a run's status, stopping it, the
federation's SuperNodes, registering a node's key): the run, the follower, the preflight
and the local federation all ask through it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from fedimb.cli.federation.processes import FederationError, executable, flower_env, toml_value


@contextlib.contextmanager
def flwr_home(
    address: str | None,
    *,
    insecure: bool = True,
    root_certificates: str | None = None,
    base: Path | None = None,
) -> Iterator[tuple[Path, str]]:
    """A throw-away ``FLWR_HOME`` whose config.toml names one SuperLink connection.

    Connections live in ``$FLWR_HOME/config.toml`` (Flower 1.41); a private home keeps
    the user's ``~/.flwr`` untouched and lets runs proceed side by side. With
    ``address=None`` the connection is written later by :func:`write_connection`.
    """
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="flwr-home-", dir=base))
    name = "fedimb"
    if address is not None:
        write_connection(
            home, name, address, insecure=insecure, root_certificates=root_certificates
        )
    try:
        yield home, name
    finally:
        shutil.rmtree(home, ignore_errors=True)


def write_connection(
    home: Path,
    name: str,
    address: str,
    *,
    insecure: bool = True,
    root_certificates: str | None = None,
) -> None:
    lines = [
        "[superlink]",
        f'default = "{name}"',
        "",
        f"[superlink.{name}]",
        f'address = "{address}"',
    ]
    if insecure:
        lines.append("insecure = true")
    elif root_certificates:
        lines.append(f'root-certificates = "{Path(root_certificates).expanduser().resolve()}"')
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class RunStatus:
    """A run's status as ``flwr list`` gives it: ``pending``, ``starting``, ``running``
    or ``finished:<sub-status>`` (``completed``, ``failed``, ``stopped``), with details."""

    status: str
    details: str = ""

    @property
    def finished(self) -> bool:
        return self.status.startswith("finished")

    def __str__(self) -> str:
        return f"{self.status} ({self.details})" if self.details else self.status


@dataclass
class FlwrCli:
    """The ``flwr`` commands for one SuperLink connection (in the private ``FLWR_HOME``
    ``home``): those that start and follow a run, and the queries about the run and the
    federation."""

    connection: str
    home: Path
    timeout: float | None = 60.0  # seconds one query may take (None: no limit)

    def _call(self, *args: str) -> subprocess.CompletedProcess | None:
        """``flwr ARGS <connection>``; None when it could not run or took too long."""
        try:
            return subprocess.run(
                [executable("flwr"), *args, self.connection],
                capture_output=True,
                text=True,
                env=flower_env(self.home),
                timeout=self.timeout,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    def _json(self, *args: str, key: str) -> list | None:
        """The list under ``key`` in the JSON answer of ``flwr ARGS --format json``."""
        done = self._call(*args, "--format", "json")
        try:
            found = json.loads(done.stdout).get(key) if done is not None else None
        except (ValueError, AttributeError):
            return None
        return found if isinstance(found, list) else None

    def run_args(
        self,
        app_dir: Path,
        run_config: Mapping[str, object],
        federation_config: Mapping[str, object] | None = None,
    ) -> list[str]:
        """``flwr run <app> <connection> --stream`` with the run's config."""
        args = [executable("flwr"), "run", str(app_dir), self.connection, "--stream"]
        for key, value in run_config.items():
            args += ["--run-config", f"{key}={toml_value(value)}"]
        if federation_config:
            args += [
                "--federation-config",
                " ".join(f"{k}={toml_value(v)}" for k, v in federation_config.items()),
            ]
        return args

    def log_args(self, run_id: int) -> list[str]:
        return [executable("flwr"), "log", str(run_id), self.connection, "--stream"]

    def status(self, run_id: int) -> RunStatus | None:
        """The run's status; None when the SuperLink does not answer or does not know the run."""
        runs = self._json("list", "--run-id", str(run_id), key="runs")
        try:
            run = runs[0] if runs else {}
            return RunStatus(str(run["status"]), str(run.get("status-details") or ""))
        except (AttributeError, TypeError, KeyError):
            return None

    def stop(self, run_id: int) -> bool:
        """``flwr stop``: the SuperLink stops the run's ServerApp; whether it accepted."""
        done = self._call("stop", str(run_id))
        return done is not None and done.returncode == 0

    def list_supernodes(self) -> list[dict] | None:
        """The federation's SuperNodes as ``flwr supernode list`` gives them (each with
        its ``status``: online, offline, registered, ...); None when the SuperLink does
        not answer."""
        return self._json("supernode", "list", key="nodes")

    def register_supernode(self, public_key: Path) -> subprocess.CompletedProcess | None:
        """``flwr supernode register`` of one public key; None when flwr could not run."""
        return self._call("supernode", "register", str(public_key))


def online_count(nodes: list[dict]) -> int:
    """How many of ``nodes`` (:meth:`FlwrCli.list_supernodes`) are connected now."""
    return sum(node.get("status") == "online" for node in nodes)


def register_node(
    address: str, public_key: Path, root_certificates: Path | None, timeout: float = 60
) -> None:
    """``flwr supernode register`` of one public key at the SuperLink ``address``."""
    with flwr_home(None) as (home, connection):
        write_connection(
            home,
            connection,
            address,
            insecure=root_certificates is None,
            root_certificates=str(root_certificates) if root_certificates else None,
        )
        cli = FlwrCli(connection, home, timeout=None)
        deadline = time.monotonic() + timeout
        while True:
            result = cli.register_supernode(public_key)
            if result is not None and result.returncode == 0:
                return
            if result is not None and "403 Forbidden" in result.stdout + result.stderr:
                raise FederationError(
                    f"{address} refused to register {public_key.name}: its Control API answers "
                    "the operator's addresses only (fedimb superlink --operator)"
                )
            if time.monotonic() > deadline:
                said = result.stdout.strip()[-300:] if result is not None else "flwr did not run"
                raise FederationError(f"could not register {public_key.name}: {said}")
            time.sleep(1)
