"""``make edge-image ARCH=arm64|amd64``: build ``fedimb-edge:<arch>`` from what this machine
reaches (a Debian root made here, PyPI wheels) with whichever engine is present.

The build context is staged in the cache: the app's files (as a FAB has them),
docker/Dockerfile.edge and docker/edge-requirements.txt, and the architecture's wheels
(hard links). The root, the wheels and the engine's layer cache survive between builds,
so a rebuild after a code change reinstalls fedimb only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from edge.host import EdgeSetupError, Engine, check_arch, ensure_binfmt
from edge.rootfs import debian_root, import_base
from edge.wheels import TORCH, wheelhouse

REPO = Path(__file__).resolve().parents[1]
DOCKER_FILES = ("docker/Dockerfile.edge", "docker/edge-requirements.txt")


def default_cache() -> Path:
    return Path(os.environ.get("FEDIMB_EDGE_CACHE") or Path.home() / ".cache" / "fedimb-edge")


def image_tag(arch: str) -> str:
    return f"fedimb-edge:{arch}"


def stage_context(dest: Path, wheels: Path) -> Path:
    from fedimb.cli.launch.flower_run import stage_app  # the files a FAB holds

    shutil.rmtree(dest, ignore_errors=True)
    stage_app(dest)
    (dest / "docker").mkdir()
    for name in DOCKER_FILES:
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(
        wheels, dest / "wheels", copy_function=os.link, ignore=shutil.ignore_patterns(".complete")
    )
    return dest


def build_image(engine: Engine, arch: str, cache: Path) -> str:
    """Build (or refresh) ``fedimb-edge:<arch>``; returns its tag."""
    check_arch(arch)
    ensure_binfmt(arch)
    base = import_base(engine, debian_root(cache, arch), arch)
    context = stage_context(cache / f"context-{arch}", wheelhouse(cache, arch))
    tag = image_tag(arch)
    log = cache / f"build-{arch}.log"
    print(f"edge: building {tag} with {engine.name} (log: {log})", flush=True)
    started = time.monotonic()
    args = engine(
        "build",
        "--platform",
        f"linux/{arch}",
        "-f",
        "docker/Dockerfile.edge",
        "-t",
        tag,
        "--build-arg",
        f"BASE_IMAGE={base}",
        "--build-arg",
        "PIP_SOURCE=--no-index --find-links /tmp/edge",
        "--build-arg",
        f"TORCH={' '.join(TORCH[arch])}",
        str(context),
    )
    with open(log, "w") as out:
        code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise EdgeSetupError(f"building {tag} failed: {tail[0]}; see {log}")
    print(
        f"edge: {tag} built in {time.monotonic() - started:.0f} s, "
        f"{image_size_mb(engine, tag):.0f} MB",
        flush=True,
    )
    return tag


def image_size_mb(engine: Engine, tag: str) -> float:
    size = subprocess.run(
        engine("image", "inspect", "--format", "{{.Size}}", tag), capture_output=True, text=True
    ).stdout.strip()
    return int(size) / 1e6 if size.isdigit() else float("nan")
