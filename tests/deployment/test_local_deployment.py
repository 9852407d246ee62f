"""Deployment on 127.0.0.1: a real SuperLink and three SuperNodes, driven by the front end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from fedimb.cli.federation.processes import SuperLink, SuperNode, flower_env
from tests.conftest import run_fedimb

pytestmark = pytest.mark.slow

COMMON = ["num_clients=3", "num_rounds=2", "train.local_epochs=1", "seed=0"]


def process_group_gone(pgid: int) -> bool:
    """No live (non-zombie) process is left in the process group ``pgid``."""
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return False
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return True


def test_three_supernodes_two_rounds_match_simulation(tmp_path, no_leaked_processes):
    env = flower_env(tmp_path / "flwr-home")
    started = []
    with SuperLink(tmp_path / "superlink.log", simulation=False, env=env) as superlink:
        started.append(superlink)
        superlink.wait_ready()
        # two with the warm launcher (fedimb.cli.federation.node_worker), one with Flower's own
        nodes = [
            SuperNode(
                superlink.address,
                {"partition-id": i, "num-partitions": 3},
                tmp_path / f"node{i}.log",
                env=env,
                warm=i < 2,
            )
            for i in range(3)
        ]
        started += nodes + [node.worker for node in nodes if node.worker is not None]
        try:
            result = run_fedimb(
                "runtime=deployment",
                f"runtime.address={superlink.address}",
                *COMMON,
                f"output.root={tmp_path / 'deployment'}",
            )
        finally:
            for node in nodes:
                node.stop()
    assert all(process_group_gone(p.pid) for p in started)
    assert result.returncode == 0, result.stderr[-3000:]
    deployed = json.loads(
        (Path(result.stdout.strip().splitlines()[-1]) / "summary.json").read_text()
    )
    assert deployed["completed"] and deployed["runtime"] == "deployment" and deployed["rounds"] == 2
    for i in (0, 1):  # every message of a warm node ran in a fork of its worker, none failed
        worker_log = (tmp_path / f"node{i}-worker.log").read_text()
        assert "ClientApp process" in worker_log and "exited with code" not in worker_log, (
            worker_log
        )
    assert not (tmp_path / "node2-worker.log").exists()

    # The same experiment in simulation gives the same model: seeding does not depend
    # on the runtime (tolerance only for float summation order across thread counts).
    result = run_fedimb(*COMMON, f"output.root={tmp_path / 'simulation'}")
    assert result.returncode == 0, result.stderr[-3000:]
    simulated = json.loads(
        (Path(result.stdout.strip().splitlines()[-1]) / "summary.json").read_text()
    )
    assert simulated["final_accuracy"] == pytest.approx(deployed["final_accuracy"], abs=0.005)
    assert simulated["bytes_up"] == deployed["bytes_up"]
