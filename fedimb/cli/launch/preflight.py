"""Checks the front end makes before any Flower process starts.

Each failure is a one-line :class:`ConfigError` (exit code 2) that names the numbers
that make the run impossible, instead of an error minutes later inside a Ray worker or
a SuperNode, or a run that "succeeds" while rejecting most of its updates.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from fedimb.app.configuration import components
from fedimb.app.configuration.build import ExperimentData, new_model
from fedimb.app.configuration.runtime_rules import gpus_per_client
from fedimb.app.server.checkpoint import checkpoint_path
from fedimb.app.server.run_context import ServerRun
from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home, online_count
from fedimb.cli.federation.processes import ray_cluster_configured
from fedimb.cli.rundir.progress import _echo
from fedimb.core.data.partition import PARTITIONERS
from fedimb.core.errors import ConfigError, FedimbError

#: seconds a deployment's SuperLink gets to accept a connection
SUPERLINK_PROBE = 10.0

#: seconds between two counts of a deployment's SuperNodes while the preflight waits
NODE_POLL = 1.0

#: seconds between two progress lines while the count of connected SuperNodes stays the same
WAIT_LINE_EVERY = 10.0


def _torch_sees_no_cuda() -> str:
    """Why torch here has no CUDA device, for the messages below."""
    built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "built without CUDA"
    return (
        f"torch {torch.__version__} ({built}) sees no CUDA device on this machine "
        f"(torch.cuda.is_available() is False)"
    )


def check_device(cfg: DictConfig) -> None:
    """``device=cuda`` needs a CUDA device torch can see on this machine (the
    simulation's and in_process's clients run here; a deployment's run on their nodes)."""
    if str(cfg.device) != "cuda" or cfg.runtime.name == "deployment" or torch.cuda.is_available():
        return
    raise ConfigError(f"device=cuda, but {_torch_sees_no_cuda()}; use device=cpu or device=auto")


def check_gpus_per_client(cfg: DictConfig) -> None:
    """``runtime.num_gpus_per_client > 0`` needs a CUDA device here: Ray offers only the
    GPUs it finds on its nodes, and where there is none Flower's simulation sizes its
    actor pool to zero and stops before the first round ("ActorPool is empty"); a GPU
    that torch cannot use would only be reserved. A run that joins a Ray cluster
    (``runtime.ray_address``, ``RAY_ADDRESS`` or a ``ray start`` here) may have its GPUs
    on other nodes; Flower checks that one."""
    gpus = gpus_per_client(cfg)
    if cfg.runtime.name != "simulation" or gpus <= 0 or torch.cuda.is_available():
        return
    if cfg.runtime.get("ray_address") or ray_cluster_configured(os.environ):
        return
    raise ConfigError(
        f"runtime.num_gpus_per_client={gpus:g}, but {_torch_sees_no_cuda()}: Ray would have no "
        f"GPU to give the clients and Flower's simulation would stop with 'ActorPool is empty'; "
        f"set runtime.num_gpus_per_client=0 or run on a machine with a GPU"
    )


def check_writable(path: Path, setting: str) -> None:
    """``path`` (a folder fedimb will create or write into) can be written: its nearest
    existing folder is one, accessible, and a folder can really be created in it."""
    existing = path.expanduser().absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{setting}={path} cannot be created: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{setting} {path} is not writable: {existing} is not writable by this user"
        )
    try:  # a real write: root passes os.access on /proc, /sys and read-only mounts
        tempfile.TemporaryDirectory(dir=existing, prefix=".fedimb-write-check-").cleanup()
    except OSError as err:
        reason = err.strerror or str(err)
        raise ConfigError(
            f"{setting} {path} is not writable: cannot create a folder in {existing} ({reason})"
        ) from None


def check_checkpoint_dir(cfg: DictConfig) -> None:
    """The checkpoint folder of a ServerApp that runs on this machine can be written."""
    if cfg.checkpoint.enabled and cfg.runtime.name != "deployment":
        check_writable(checkpoint_path(cfg).parent, "checkpoint.dir")


def check_partition(cfg: DictConfig, data: ExperimentData) -> None:
    """Every client gets training samples, unless ``partition.allow_empty_clients``
    (those clients are then never sampled, see :meth:`ServerRun.empty_clients`)."""
    empty = data.partition.empty_clients
    if not empty or cfg.partition.get("allow_empty_clients"):
        return
    n, name = int(cfg.num_clients), str(cfg.partition.name)
    shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
    hint = PARTITIONERS[name].spread_hint if name in PARTITIONERS else "change the partition"
    raise ConfigError(
        f"partition={name} leaves {len(empty)} of {n} clients without training samples "
        f"(clients {shown}; {cfg.dataset.name} has {len(data.dataset.y_train)} training "
        f"samples): lower num_clients, {hint}, or set partition.allow_empty_clients=true to "
        f"run without them"
    )


def check_labels(cfg: DictConfig, data: ExperimentData) -> None:
    """Every label of the data set has an output of the model's head."""
    model = new_model(cfg, data.dataset)
    with torch.no_grad():
        outputs = int(model(torch.from_numpy(data.dataset.x_test[:1])).shape[-1])
    labels = np.concatenate([data.dataset.y_train, data.dataset.y_test])
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= outputs:
        raise ConfigError(
            f"dataset={cfg.dataset.name} has labels {low} to {high}, but model={cfg.model.name}'s "
            f"head has {outputs} outputs (labels 0 to {outputs - 1}): the data set's num_classes "
            f"must cover every label"
        )


def check_superlink_reachable(cfg: DictConfig, timeout: float = SUPERLINK_PROBE) -> None:
    """A deployment's SuperLink accepts connections at ``runtime.address``; otherwise
    ``flwr run`` would fail after its retries with a message that names neither the
    address nor the setting."""
    address = str(cfg.runtime.address)
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except (OSError, ValueError) as err:
        reason = (
            "no answer"
            if isinstance(err, TimeoutError)
            else (getattr(err, "strerror", None) or str(err))
        )
    raise ConfigError(
        f"cannot reach the SuperLink at {address} (runtime.address): {reason}; "
        f"start one or set runtime.address=HOST:PORT"
    )


def check_supernodes(
    cfg: DictConfig, *, poll: float = NODE_POLL, echo: Callable[[str], None] = _echo
) -> None:
    """A deployment federation has at least ``num_clients`` connected SuperNodes. Nodes
    that are still starting (an emulated or slow edge device, a loaded SuperLink that
    lists nodes offline for a while) get up to ``runtime.wait_for_nodes`` seconds, with
    a progress line so that the wait is not mistaken for a hang. A SuperLink that does
    not answer is left to ``flwr run``, which names that failure."""
    runtime = cfg.runtime
    wanted = int(cfg.num_clients)
    patience = float(runtime.wait_for_nodes)
    progress = _NodeWaitProgress(wanted, str(runtime.address), patience, echo)
    started = time.monotonic()
    with flwr_home(
        str(runtime.address),
        insecure=bool(runtime.insecure),
        root_certificates=runtime.get("root_certificates"),
    ) as (home, connection):
        while True:
            nodes = FlwrCli(connection, home).list_supernodes()
            if nodes is None:
                return
            online, waited = online_count(nodes), time.monotonic() - started
            if online >= wanted:
                progress.connected(waited)
                return
            if waited >= patience:
                break
            progress.waiting(online, waited)
            time.sleep(min(poll, patience - waited))
    raise ConfigError(
        f"num_clients={wanted}, but the federation at {runtime.address} has {online} connected "
        f"SuperNode(s) ({len(nodes)} known to it) after {patience:g}s: start {wanted - online} "
        f"more, set num_clients={online}, or wait longer with runtime.wait_for_nodes=SECONDS"
    )


class _NodeWaitProgress:
    """The preflight's lines while it waits for SuperNodes: one when the count of
    connected nodes changes, otherwise one every :data:`WAIT_LINE_EVERY` seconds (not
    one per poll), and one when the last node has connected."""

    def __init__(self, wanted: int, address: str, patience: float, echo: Callable[[str], None]):
        self.wanted, self.address, self.patience, self.echo = wanted, address, patience, echo
        self.shown: tuple[int, float] | None = (
            None  # (online count, seconds waited) of the last line
        )

    def waiting(self, online: int, waited: float) -> None:
        if (
            self.shown is not None
            and online == self.shown[0]
            and waited - self.shown[1] < WAIT_LINE_EVERY
        ):
            return
        self.shown = (online, waited)
        self.echo(
            f"[fedimb] waiting for {self.wanted - online} of {self.wanted} SuperNodes to connect "
            f"to {self.address} ({waited:.0f}s of {self.patience:g}s) ..."
        )

    def connected(self, waited: float) -> None:
        if self.shown is not None:
            self.echo(
                f"[fedimb] {self.wanted} SuperNodes connected to {self.address} after {waited:.0f}s"
            )


def build_strategy(cfg: DictConfig):
    """The run's strategy, built here so that a bad method setting fails before Flower
    starts (``runtime=in_process`` then runs with it)."""
    try:
        return components.build_strategy(cfg.method.strategy, ServerRun.build(cfg))
    except FedimbError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"method '{cfg.method.name}': {err}") from None


def preflight(cfg: DictConfig, data: ExperimentData):
    """Every check that needs no Flower process; returns the strategy it built."""
    check_device(cfg)
    check_gpus_per_client(cfg)
    check_checkpoint_dir(cfg)
    check_partition(cfg, data)
    check_labels(cfg, data)
    if cfg.runtime.name == "deployment":
        check_superlink_reachable(cfg)
        check_supernodes(cfg)
    return build_strategy(cfg)
