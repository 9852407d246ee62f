"""A local TLS federation in which some SuperNodes run from the edge image (under QEMU
when the image's architecture is not the host's) beside native ones: the SuperLink and
the native nodes are :class:`fedimb.cli.federation.local.LocalFederation`'s; an image's
node is started with the same ``flower-supernode`` arguments and the host's network, as
on a device: in a container, or where no engine runs, in a chroot of the image's
contents (:mod:`edge.chroot`).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from edge import chroot
from edge.host import Engine
from fedimb.cli.federation.local import LocalFederation
from fedimb.cli.federation.processes import (
    ManagedProcess,
    flower_env,
    free_port,
    supernode_arguments,
)


class _ImageNode:
    """What :meth:`LocalFederation.wait_connected` asks of every node while it waits for
    it to connect (is it running, its log, the log's last line), from the process that
    runs the image's node."""

    process: ManagedProcess

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def alive(self) -> bool:
        return self.process.alive()

    def last_line(self) -> str:
        return self.process.last_line()


class ContainerNode(_ImageNode):
    """``fedimb supernode`` (the image's entry point) in a container; stopped with
    ``rm -f`` by name, so nothing survives a failed test."""

    def __init__(
        self, spec: ContainerSpec, superlink: str, node_config, log_path: Path, node_args: list[str]
    ):
        self.engine = spec.engine
        self.name = f"fedimb-edge-{uuid.uuid4().hex[:8]}"
        self.port = free_port()  # the node's Runtime API, on the host's network
        mounts = [a for host, inside in spec.mounts.items() for a in ("-v", f"{host}:{inside}:ro")]
        args = spec.engine(
            "run",
            "--rm",
            "--name",
            self.name,
            "--network",
            "host",
            "--platform",
            f"linux/{spec.arch}",
            *mounts,
            spec.image,
            *supernode_arguments(superlink, self.port, node_config, node_args),
        )
        self.process = ManagedProcess(args, log_path, flower_env())

    def peak_memory_mb(self) -> float | None:
        """The container's peak memory (all its processes; cgroup v1 or v2), while it runs."""
        full_id = subprocess.run(
            self.engine("inspect", "--format", "{{.Id}}", self.name), capture_output=True, text=True
        ).stdout.strip()
        for path in (
            f"/sys/fs/cgroup/memory/docker/{full_id}/memory.max_usage_in_bytes",
            f"/sys/fs/cgroup/system.slice/docker-{full_id}.scope/memory.peak",
        ):
            try:
                return int(Path(path).read_text()) / 2**20
            except (OSError, ValueError):
                continue
        return None

    def stop(self, grace: float = 10.0) -> None:
        subprocess.run(self.engine("rm", "-f", self.name), capture_output=True)
        self.process.stop(grace)


class ChrootNode(_ImageNode):
    """The image's entry point in a chroot of its contents, as the image's user."""

    def __init__(
        self, spec: ChrootSpec, superlink: str, node_config, log_path: Path, node_args: list[str]
    ):
        self.root = spec.root
        for host, inside in spec.mounts.items():
            target = self.root / inside.lstrip("/")
            if host.is_dir():
                shutil.copytree(host, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(host, target)
        for path in (self.root / "certs").rglob("*"):
            shutil.chown(path, chroot.IMAGE_UID, chroot.IMAGE_UID)
        chroot.mount_proc(self.root)
        self.port = free_port()
        arguments = supernode_arguments(superlink, self.port, node_config, node_args)
        self.process = ManagedProcess(
            chroot.node_command(self.root, arguments), log_path, flower_env()
        )

    def peak_memory_mb(self) -> float | None:
        return None  # no cgroup of its own

    def stop(self, grace: float = 10.0) -> None:
        self.process.stop(grace)
        chroot.unmount_proc(self.root)


class _NodeSpec:
    """How one node runs from an image; :meth:`node` starts it (a ``node_type``)."""

    node_type: ClassVar[type[ContainerNode] | type[ChrootNode]]

    def node(self, superlink: str, node_config, log_path: Path, node_args: list[str]):
        return self.node_type(self, superlink, node_config, log_path, node_args)


@dataclass(frozen=True)
class ContainerSpec(_NodeSpec):
    """A node in a container: which image and architecture, and host paths mounted
    read-only at paths inside (e.g. a device's data at /data/device.npz)."""

    node_type = ContainerNode
    engine: Engine
    image: str
    arch: str
    mounts: dict[Path, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChrootSpec(_NodeSpec):
    """The same node from the image's contents in ``root`` (:func:`edge.chroot.node_root`);
    ``mounts`` are copied in."""

    node_type = ChrootNode
    root: Path
    arch: str
    mounts: dict[Path, str] = field(default_factory=dict)


@dataclass
class EdgeFederation(LocalFederation):
    """:class:`LocalFederation` (always secure here) whose nodes listed in ``images`` run
    from the edge image; each gets its own copy of its key, readable by the image's user."""

    images: dict[int, ContainerSpec | ChrootSpec] = field(default_factory=dict)

    def node_args(self, i: int) -> list[str]:
        if i not in self.images:
            return super().node_args(i)
        return [
            "--root-certificates",
            "/certs/ca.crt",
            "--auth-supernode-private-key",
            f"/certs/node-{i}",
        ]

    def start_node(self, i: int):
        spec = self.images.get(i)
        if spec is None:
            return super().start_node(i)
        certs = self.workdir / f"node{i}-certs"
        certs.mkdir(exist_ok=True)
        for name in ("ca.crt", f"node-{i}"):
            shutil.copy2(self.certs / name, certs / name)
            shutil.chown(certs / name, chroot.IMAGE_UID, chroot.IMAGE_UID)
        spec = dataclasses.replace(spec, mounts={**spec.mounts, certs: "/certs"})
        node = spec.node(
            self.address, self.node_config(i), self.workdir / f"node{i}.log", self.node_args(i)
        )
        if i < len(self.nodes):
            self.nodes[i] = node
        else:
            self.nodes.append(node)
        return node
