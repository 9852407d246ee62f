"""Where no container engine runs: the edge image's contents as a chroot. The cached
Debian root gets the image's venv (installed by pip inside the chroot, under QEMU for
arm64, from the same wheels) and the node runs the image's entry point there as the
image's user, on the host's network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from edge.host import ensure_binfmt, run
from edge.rootfs import debian_root
from edge.wheels import REQUIREMENTS, TORCH, wheelhouse

#: the image's user (docker/Dockerfile.edge)
IMAGE_UID = 49999
#: what docker/Dockerfile.edge's ENTRYPOINT and ENV say
ENTRYPOINT = ["fedimb", "supernode", "--port", "9094"]
ENV = ["PATH=/opt/fedimb/bin:/usr/bin:/bin", "HOME=/state", "FEDIMB_CACHE=/state/cache"]


def in_root(root: Path, command: str, what: str) -> None:
    run(["chroot", str(root), "/bin/sh", "-c", command], what)


def node_root(cache: Path, arch: str) -> Path:
    """The root with /opt/fedimb as the image has it: the dependencies installed once,
    fedimb itself reinstalled from this checkout at every call (seconds)."""
    from fedimb.cli.launch.flower_run import (
        stage_app,  # the files a FAB holds, as the image copies them
    )

    ensure_binfmt(arch)
    root = cache / f"chroot-{arch}"
    pip = "/opt/fedimb/bin/pip install --no-cache-dir --no-index --find-links /tmp/edge"
    stamp = root / "opt" / "fedimb" / "dependencies.txt"  # what the venv was installed from
    wanted = "\n".join([*TORCH[arch], REQUIREMENTS.read_text()])
    if not stamp.exists() or stamp.read_text() != wanted:
        shutil.rmtree(root, ignore_errors=True)
        partial = cache / f"chroot-{arch}.part"
        shutil.rmtree(partial, ignore_errors=True)
        print(
            f"edge: installing the node's venv into a copy of the {arch} root (minutes)", flush=True
        )
        run(
            ["cp", "-a", str(debian_root(cache, arch)), str(partial)], "copying the root"
        )  # /dev's nodes too
        shutil.copytree(wheelhouse(cache, arch), partial / "tmp" / "edge", copy_function=os.link)
        shutil.copy2(REQUIREMENTS, partial / "tmp" / "edge" / REQUIREMENTS.name)
        in_root(
            partial,
            f"python3.11 -m venv /opt/fedimb && {pip} {' '.join(TORCH[arch])} "
            f"-r /tmp/edge/{REQUIREMENTS.name}",
            "installing the node's dependencies in the chroot",
        )
        (partial / "opt" / "fedimb" / "dependencies.txt").write_text(wanted)
        partial.rename(root)
    shutil.rmtree(root / "app", ignore_errors=True)
    stage_app(root / "app")
    in_root(root, f"{pip} --no-deps --force-reinstall /app", "installing fedimb in the chroot")
    for folder in ("state", "certs", "data"):
        (root / folder).mkdir(exist_ok=True)
    os.chown(root / "state", IMAGE_UID, IMAGE_UID)
    return root


def node_command(root: Path, arguments: list[str]) -> list[str]:
    """The image's entry point with ``arguments``, as its user, inside ``root``."""
    return [
        "chroot",
        f"--userspec={IMAGE_UID}:{IMAGE_UID}",
        str(root),
        "/usr/bin/env",
        "-i",
        *ENV,
        *ENTRYPOINT,
        *arguments,
    ]


def mount_proc(root: Path) -> None:
    """/proc inside the root (psutil and torch read it); left mounted for the next node."""
    if subprocess.run(["mountpoint", "-q", str(root / "proc")]).returncode != 0:
        run(["mount", "-t", "proc", "proc", str(root / "proc")], "mounting /proc in the chroot")


def unmount_proc(root: Path) -> None:
    subprocess.run(["umount", "-l", str(root / "proc")], capture_output=True)
