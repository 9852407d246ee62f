"""A minimal Debian root for the device's architecture, made once with mmdebstrap and
kept in the cache: the base image of a local build (imported into the engine) and the
root of the chroot fallback. Debian bookworm's Python is 3.11, fedimb's."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from edge.host import EdgeSetupError, Engine, apt_install, ensure_binfmt, run

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
#: what the image needs beyond Debian's minimal base: Python with venv, and CA certificates
PACKAGES = ["python3", "python3-venv", "ca-certificates"]


def base_image(arch: str) -> str:
    return f"fedimb-root:{SUITE}-{arch}"


def debian_root(cache: Path, arch: str) -> Path:
    """The root folder, made with ``mmdebstrap --variant=minbase`` unless cached (arm64
    under emulation here: 2–3 min, 255 MB)."""
    root = cache / f"{SUITE}-{arch}"
    if (root / "usr" / "bin" / "python3").exists():
        return root
    apt_install(["mmdebstrap", "arch-test"])
    ensure_binfmt(arch)
    partial = cache / f"{SUITE}-{arch}.part"
    shutil.rmtree(partial, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    print(
        f"edge: building a Debian {SUITE} {arch} root with mmdebstrap "
        f"(minutes; log: {partial}.log)",
        flush=True,
    )
    started = time.monotonic()
    with open(f"{partial}.log", "w") as log:
        code = subprocess.run(
            [
                "mmdebstrap",
                f"--arch={arch}",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(partial),
                MIRROR,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        ).returncode
    if code != 0:
        raise EdgeSetupError(f"mmdebstrap failed for {arch}; see {partial}.log")
    partial.rename(root)
    print(f"edge: {arch} root ready in {time.monotonic() - started:.0f} s", flush=True)
    return root


def import_base(engine: Engine, root: Path, arch: str) -> str:
    """The root as the engine's base image, loaded once (the tag names suite and arch).

    Loaded as an image archive written here rather than ``docker import``: an import
    records the host's architecture whatever ``--platform`` says (Docker 20.10), and the
    build then refuses the base as the wrong platform."""
    tag = base_image(arch)
    if subprocess.run(engine("image", "inspect", tag), capture_output=True).returncode == 0:
        return tag
    print(f"edge: loading {root} as {tag}", flush=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as workdir:
        archive = image_archive(root, arch, tag, Path(workdir))
        run(engine("load", "-i", str(archive)), f"loading the {arch} root")
    return tag


def image_archive(root: Path, arch: str, tag: str, workdir: Path) -> Path:
    """A one-layer image archive (``docker save``'s format, which podman loads too) of
    ``root`` whose configuration names ``arch``."""
    layer = workdir / "layer.tar"
    run(
        ["tar", "--numeric-owner", "-C", str(root), "-cf", str(layer), "."],
        f"packing the {arch} root",
    )
    digest = hashlib.sha256()
    with open(layer, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    layer_id = digest.hexdigest()
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                "Cmd": ["/bin/sh"],
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_id}"]},
            "history": [
                {
                    "created": "1970-01-01T00:00:00Z",
                    "created_by": f"mmdebstrap {SUITE} {arch} minbase",
                }
            ],
        }
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{layer_id}/layer.tar"]}]
    ).encode()
    archive = workdir / "image.tar"
    with tarfile.open(archive, "w") as out:
        out.add(layer, arcname=f"{layer_id}/layer.tar")
        for name, data in ((config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    layer.unlink()
    return archive
