"""What the host needs before it can build and run foreign-architecture images: Debian
packages, QEMU registered with binfmt_misc, and a running container engine.

Each step is done here when it can be (root, Debian's archive reachable) and otherwise
fails with one line naming what is missing: :class:`EdgeSetupError`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fedimb.core.errors import FedimbError

#: Debian/Docker architecture names, and QEMU's, by the names fedimb uses
ARCHES = {"arm64": "aarch64", "amd64": "x86_64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")


class EdgeSetupError(FedimbError):
    """The host cannot build or run an edge image; the message says what is missing."""


def native_arch() -> str:
    machine = platform.machine()
    return next((arch for arch, name in ARCHES.items() if name == machine), machine)


def check_arch(arch: str) -> str:
    if arch not in ARCHES:
        raise EdgeSetupError(f"unknown architecture '{arch}' (choose from: {', '.join(ARCHES)})")
    return arch


def run(args: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    """Run a set-up command; a failure is one line with the command's last output line."""
    try:
        result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    except FileNotFoundError:
        raise EdgeSetupError(f"{what}: '{args[0]}' is not installed") from None
    if result.returncode != 0:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise EdgeSetupError(f"{what} failed ({' '.join(args[:3])} ...): {tail[0]}")
    return result


def installed(package: str) -> bool:
    """Whether the Debian package is installed (a removed one may still be known to dpkg
    with its configuration files: not installed)."""
    status = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return status.returncode == 0 and status.stdout.strip() == "install ok installed"


def apt_install(packages: list[str]) -> None:
    """Install the Debian packages that are missing (as root, from Debian's archive)."""
    missing = [p for p in packages if not installed(p)]
    if not missing:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise EdgeSetupError(f"install {' '.join(missing)} (needs root and apt-get)")
    print(f"edge: installing {' '.join(missing)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if (
        subprocess.run(install, capture_output=True, env=env).returncode != 0
    ):  # package lists may be stale
        run(["apt-get", "update"], "apt-get update", env=env)
        run(install, "apt-get install", env=env)


def ensure_binfmt(arch: str) -> None:
    """Register QEMU user emulation for ``arch`` unless it runs natively."""
    if arch == native_arch():
        return
    qemu = f"qemu-{ARCHES[arch]}"
    if (BINFMT / qemu).exists() and (BINFMT / qemu).read_text().startswith("enabled"):
        return
    apt_install(["qemu-user-static", "binfmt-support"])
    if not (BINFMT / "register").exists():
        run(
            ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)],
            "mounting binfmt_misc (needs root)",
        )
    run(["update-binfmts", "--enable", qemu], f"registering {qemu} with binfmt_misc")
    if not (BINFMT / qemu).exists():
        raise EdgeSetupError(
            f"{qemu} is not registered with binfmt_misc ({BINFMT}); "
            f"{arch} programs cannot run on this {native_arch()} host"
        )


@dataclass(frozen=True)
class Engine:
    """A container engine's command line: docker and podman share theirs."""

    name: str

    def __call__(self, *args: str) -> list[str]:
        return [self.name, *args]


def _answers(name: str) -> bool:
    return (
        shutil.which(name) is not None
        and subprocess.run([name, "info"], capture_output=True, timeout=60).returncode == 0
    )


@contextlib.contextmanager
def container_engine(log_dir: Path) -> Iterator[Engine]:
    """A container engine that answers: docker or podman as found (only docker has been
    tried; podman may need ``runtime="runc"`` in its containers.conf), else Debian's docker.io
    daemon started for the ``with`` block and stopped after it (``--iptables=false
    --bridge=none``: containers use the host's network, as a SuperNode on a device does)."""
    for name in ("docker", "podman"):
        if _answers(name):
            yield Engine(name)
            return
    apt_install(["docker.io"])
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"edge: starting dockerd (log: {log_dir / 'dockerd.log'})", flush=True)
    with open(log_dir / "dockerd.log", "ab") as log:
        daemon = subprocess.Popen(
            ["dockerd", "--iptables=false", "--ip6tables=false", "--bridge=none"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not _answers("docker"):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise EdgeSetupError(f"dockerd did not start; see {log_dir / 'dockerd.log'}")
            time.sleep(1)
        yield Engine("docker")
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
