"""Flower processes fedimb starts and stops itself: the SuperLink, the SuperNodes and
their environment.

Every process is started in its own session so that stopping it stops its children
(the simulation engine, Ray, ServerApp and ClientApp processes) by process group —
never by name. The ``flwr`` command's own calls are in :mod:`fedimb.cli.federation.flwr_cli`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import psutil

from fedimb.cli.federation.node_worker import worker_arguments
from fedimb.core.errors import FedimbError


class FederationError(FedimbError, RuntimeError):
    """A Flower process could not be started or the run failed."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (exit code 130) or SIGTERM (143). A KeyboardInterrupt, so that it passes
    every ``except Exception`` (Hydra's included) while each ``with`` block on the way
    out stops its Flower processes; the message is the one line the front end prints."""

    def __init__(self, message: str = "interrupted", exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code


def executable(name: str) -> str:
    """A console script of this environment (the venv's ``bin``), else from PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise FederationError(f"'{name}' not found; install fedimb's dependencies (make install)")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flower_env(flwr_home: Path | None = None) -> dict[str, str]:
    """Environment for Flower processes: no runtime `uv sync`, no update check."""
    env = os.environ.copy()
    # Flower starts helper executables (flower-superexec, flwr-simulation) by name.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] = "1"
    env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    env.setdefault("RAY_DEDUP_LOGS", "0")
    # Flower's launcher of ServerApp, simulation and cold ClientApp processes checks for
    # work every second by default; a tenth of that takes little CPU and starts them sooner
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
    if flwr_home is not None:
        env["FLWR_HOME"] = str(flwr_home)
    return env


def stop_process_tree(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``) and every
    descendant, then SIGKILL what is left after ``grace`` seconds. Descendants are found
    by walking the process tree, because Flower starts some in sessions of their own
    (SuperExec, the simulation, Ray)."""
    descendants = _descendants(proc.pid)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    descendants += [p for p in _descendants(proc.pid) if p not in descendants]
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(descendants, timeout=min(grace, 5.0))
    # Children may outlive the leader: clear the whole group and the tree.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


class ManagedProcess:
    """A child process in its own process group, stopped as a group."""

    def __init__(self, args: Sequence[str], log_path: Path, env: Mapping[str, str]):
        self.args = list(args)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """Stop the process and its descendants (:func:`stop_process_tree`)."""
        stop_process_tree(self.proc, grace)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def last_line(self) -> str:
        """The last non-empty line of the process log (for one-line errors)."""
        try:
            lines = [
                ln.strip()
                for ln in self.log_path.read_text(errors="replace").splitlines()
                if ln.strip()
            ]
        except OSError:
            return ""
        return lines[-1][-300:] if lines else ""


def superlink_arguments(
    host: str, port: int, simulation: bool, extra_args: Sequence[str]
) -> list[str]:
    """``flower-superlink`` arguments (also the entry point of docker/Dockerfile.server)."""
    args = [
        *extra_args,
        "--host",
        host,
        "--port",
        str(port),
        "--disable-runtime-dependency-installation",
    ]
    if simulation:
        args += ["--simulation", "--isolation", "subprocess"]
    return args


def supernode_arguments(
    superlink: str, port: int, node_config: Mapping[str, object], extra_args: Sequence[str]
) -> list[str]:
    """``flower-supernode`` arguments (also the entry point of docker/Dockerfile.edge)."""
    node = " ".join(f"{k}={toml_value(v)}" for k, v in node_config.items())
    return [*extra_args, "--superlink", superlink, "--port", str(port), "--node-config", node]


def gated_superlink(public_keys: Sequence[Path]) -> list[str]:
    """``fedimb superlink`` admitting ``public_keys`` only
    (:mod:`fedimb.cli.federation.superlink`)."""
    return [sys.executable, "-m", "fedimb", "superlink", "--supernode-keys", *map(str, public_keys)]


class SuperLink(ManagedProcess):
    """A ``flower-superlink`` (or the ``program`` given, e.g. :func:`gated_superlink`)
    bound to ``bind``, 127.0.0.1 by default, in simulation or deployment mode."""

    def __init__(
        self,
        log_path: Path,
        *,
        simulation: bool,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = ("--insecure",),
        program: Sequence[str] = (),
        bind: str = "127.0.0.1",
    ):
        self.port = port or free_port()
        args = [
            *(program or [executable("flower-superlink")]),
            *superlink_arguments(bind, self.port, simulation, extra_args),
        ]
        super().__init__(args, log_path, env or flower_env())

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(
        self, timeout: float = 60.0, scheme: str = "http", verify: str | bool = False
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise FederationError(
                    f"flower-superlink exited ({self.last_line()}); see {self.log_path}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(
                    f"{scheme}://{self.address}/health", timeout=1.0, verify=verify
                ).is_success:
                    return
            time.sleep(0.2)
        raise FederationError(
            f"flower-superlink did not become ready within {timeout:.0f}s; see {self.log_path}"
        )


def ray_cluster_configured(env: Mapping[str, str]) -> bool:
    """Whether a simulation's ``ray.init`` would join a cluster already: ``RAY_ADDRESS``,
    or a live cluster that a ``ray start`` on this machine recorded (Ray's default
    look-up; a record left by a cluster that is gone does not count)."""
    if env.get("RAY_ADDRESS"):
        return True
    record = Path(env.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        host, port = record.read_text().strip().rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


class SuperNode(ManagedProcess):
    """A ``flower-supernode`` serving one partition; ``warm`` (the default where the system
    can fork) launches its ClientApps from :mod:`fedimb.cli.federation.node_worker` instead of a
    fresh process each."""

    def __init__(
        self,
        superlink: str,
        node_config: Mapping[str, object],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = ("--insecure",),
        warm: bool = hasattr(os, "fork"),
    ):
        self.port = free_port()
        env = env or flower_env()
        isolation = ["--isolation", "process"] if warm else []
        args = [
            executable("flower-supernode"),
            *supernode_arguments(superlink, self.port, node_config, [*extra_args, *isolation]),
        ]
        super().__init__(args, log_path, env)
        self.worker: ManagedProcess | None = None
        if warm:
            self.worker = ManagedProcess(
                worker_arguments(f"127.0.0.1:{self.port}", self.pid),
                log_path.with_name(log_path.stem + "-worker.log"),
                env,
            )

    def stop(self, grace: float = 10.0) -> None:
        if self.worker is not None:
            self.worker.stop(grace)
        super().stop(grace)


def toml_value(value: object) -> str:
    """``value`` as Flower's ``--run-config``/``--node-config`` parse it (TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
