"""The wheels an edge image installs, downloaded once per architecture into the cache.

``pip download --platform`` resolves dependencies with the *host's* environment markers,
so torch (whose aarch64 and x86_64 dependencies differ) is fetched on its own with
``--no-deps`` and everything else is resolved beside it, pinned to the versions this
machine's own environment runs (``pip freeze``) so native and emulated nodes compute with
the same libraries but torch.

torch is pinned per architecture to a CPU build: on PyPI, aarch64 torch from 2.10 on is a
CUDA 13 build (GBs of CUDA wheels, and ``import torch`` fails without them); 2.9.1 is the
newest CPU-only one. PyPI's x86_64 torch is a CUDA build too, and CPU builds live on the
PyTorch index only: the amd64 pin is the CPU wheel this machine keeps in pip's
find-links (/opt/wheels); elsewhere, pin what your index offers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from edge.host import ARCHES, EdgeSetupError, run

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO / "docker" / "edge-requirements.txt"
#: torch and torchvision per architecture (CPU builds; torchvision matches its torch)
TORCH = {
    "arm64": ["torch==2.9.1", "torchvision==0.24.1"],
    "amd64": ["torch==2.13.0+cpu", "torchvision==0.28.0"],
}
#: torch's own dependencies, resolved with the rest (torch itself comes with --no-deps)
TORCH_DEPENDENCIES = [
    "filelock",
    "typing-extensions",
    "sympy",
    "networkx",
    "jinja2",
    "fsspec",
    "pillow",
]
#: what ``pip install .`` needs to build fedimb itself (pyproject.toml's build-system)
BUILD_REQUIREMENTS = ["setuptools>=68"]
#: wheels missing from PyPI (source only): built here, they are pure Python
BUILT_HERE = ["antlr4-python3-runtime==4.9.3"]


def platform_args(arch: str) -> list[str]:
    machine = ARCHES[arch]
    tags = [
        f"manylinux_2_28_{machine}",
        f"manylinux_2_17_{machine}",
        f"manylinux2014_{machine}",
        f"linux_{machine}",
    ]
    return [
        "--only-binary=:all:",
        *(a for tag in tags for a in ("--platform", tag)),
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]


def host_pins(
    exclude: tuple[str, ...] = (
        "torch",
        "torchvision",
        "nvidia",
        "triton",
        "fedimb",
        "ray",
        "cuda",
    ),
) -> str:
    """The host environment's versions (``pip freeze``), torch and the project left out."""
    frozen = run([sys.executable, "-m", "pip", "freeze"], "pip freeze").stdout.splitlines()
    keep = [line for line in frozen if "==" in line and not line.lower().startswith(exclude)]
    return "\n".join(keep) + "\n"


def wheelhouse(cache: Path, arch: str) -> Path:
    """The cached folder of wheels for ``arch`` (~0.3 GB for arm64; kept between builds)."""
    house = cache / f"wheels-{arch}"
    done = house / ".complete"
    wanted = "\n".join([*TORCH[arch], REQUIREMENTS.read_text()])
    if done.exists() and done.read_text() == wanted:
        return house
    house.mkdir(parents=True, exist_ok=True)
    print(f"edge: downloading the {arch} wheels into {house}", flush=True)
    constraints = cache / f"pins-{arch}.txt"
    constraints.write_text(host_pins())
    pip = [sys.executable, "-m", "pip"]
    run(
        [*pip, "wheel", "--no-deps", "-q", "-w", str(house), *BUILT_HERE],
        "building source-only wheels",
    )
    source = [*platform_args(arch), "--find-links", str(house)]
    try:
        run(
            [*pip, "download", "-q", "-d", str(house), *source, "--no-deps", *TORCH[arch]],
            f"downloading torch for {arch}",
        )
    except EdgeSetupError as err:
        raise EdgeSetupError(
            f"{err} (torch is pinned per architecture in edge/wheels.py)"
        ) from None
    run(
        [
            *pip,
            "download",
            "-q",
            "-d",
            str(house),
            *source,
            "-c",
            str(constraints),
            "-r",
            str(REQUIREMENTS),
            *TORCH_DEPENDENCIES,
            *BUILD_REQUIREMENTS,
        ],
        f"downloading the {arch} wheels",
    )
    done.write_text(wanted)
    return house
