"""Faults in a real deployment on 127.0.0.1: TLS + SuperNode authentication, an
unregistered node, a ClientApp that raises, a node killed with SIGKILL and restarted, a
straggler past the round timeout, and a node that brings its own data.

Three nodes: node 0 serves partition 0; node 1 serves partition 1 and is killed after
round 1 and restarted after round 2; node 2 trains on its own data, which breaks after
round 1 (its ClientApp raises), is repaired after round 3 while the node is stopped
(a straggler) until round 4 has passed. Each round waits for every node to be connected
(``runtime.rejoin_timeout``), so the last round has all three back: a condition, not a
race between Flower's heartbeats and the rounds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fedimb.cli.federation.local import LocalFederation
from fedimb.cli.federation.processes import SuperNode, flower_env
from fedimb.cli.federation.security import make_node_keys
from tests.conftest import REPO

pytestmark = pytest.mark.slow

ROUNDS = 6


def write_device_data(path: Path) -> None:
    """A device's own 8x8 one-channel images (the digits input shape) of classes 3 and 7."""
    rng = np.random.default_rng(0)
    np.savez(path, x=rng.integers(0, 256, size=(40, 8, 8), dtype=np.uint8), y=np.repeat([3, 7], 20))


def test_secure_federation_survives_client_faults(tmp_path, no_leaked_processes):
    device_data = tmp_path / "device.npz"
    write_device_data(device_data)
    configs = [{"partition-id": i, "num-partitions": 3} for i in range(2)] + [
        {"data-path": str(device_data)}
    ]
    events: list[str] = []
    with LocalFederation(tmp_path / "fed", 3, secure=True, node_configs=configs) as fed:
        # a node whose key was never registered is refused by the SuperLink
        ((intruder_key, _),) = make_node_keys(tmp_path / "intruder", 1, prefix="intruder")
        intruder = SuperNode(
            fed.address,
            {"partition-id": 0},
            tmp_path / "intruder.log",
            env=flower_env(tmp_path / "fed" / "flwr-home"),
            extra_args=[
                "--root-certificates",
                str(fed.root_certificates),
                "--auth-supernode-private-key",
                str(intruder_key),
            ],
        )
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fedimb",
                    *fed.runtime_overrides(),
                    "dataset=digits",
                    "num_clients=3",
                    f"num_rounds={ROUNDS}",
                    "train.local_epochs=1",
                    "dropout=none",
                    "runtime.round_timeout=60",
                    "runtime.rejoin_timeout=300",
                    f"output.root={tmp_path / 'out'}",
                ],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                events.append(line.rstrip())
                if line.startswith("round 1/"):
                    device_data.write_bytes(
                        b"the SD card failed"
                    )  # node 2's ClientApp raises from now on
                    os.killpg(fed.nodes[1].pid, signal.SIGKILL)
                    killed_at = time.monotonic()
                elif line.startswith("round 2/"):
                    fed.start_node(1)
                elif line.startswith("round 3/"):
                    write_device_data(device_data)
                    os.killpg(fed.nodes[2].pid, signal.SIGSTOP)  # a straggler
                elif line.startswith("round 4/"):
                    os.killpg(fed.nodes[2].pid, signal.SIGCONT)
                elif "client 1 on node" in line and "killed_at" in locals():
                    events.append(f"node kill detected after {time.monotonic() - killed_at:.0f}s")
            proc.wait(timeout=900)
            intruder_exited = not intruder.alive()  # refused, it gave up by itself
            stderr = proc.stderr.read() if proc.stderr else ""
        finally:
            intruder.stop()
            for node in fed.nodes:  # a stopped straggler must be able to receive SIGTERM
                if node.alive():
                    os.killpg(node.pid, signal.SIGCONT)
    output = "\n".join(events)
    assert proc.returncode == 0, stderr[-3000:] + output
    run_dir = Path(events[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] and summary["rounds"] == ROUNDS

    # every failure is named with its client and Flower node
    # node 2 had no partition id: the server gave its device the free id 2
    assert "client 2 on node" in output and "not a readable .npz file" in output
    assert "client 1 on node" in output
    rounds = {
        json.loads(ln)["round"]: json.loads(ln)
        for ln in (run_dir / "events.jsonl").read_text().splitlines()
        if json.loads(ln)["event"] == "round" and json.loads(ln)["round"] > 0
    }
    # the straggler: no reply within the round timeout, or missed heartbeats while stopped
    straggling = [
        m for r in rounds.values() if 4 <= r["round"] < ROUNDS for m in r.get("messages", [])
    ]
    assert any(m.startswith("client 2 on node") for m in straggling), straggling
    failed = [r for r in rounds.values() if r["clients"]["errors"]]
    assert failed and all(r["clients"]["succeeded"] >= 1 for r in rounds.values())
    # the restarted node, the straggler and the repaired device are all back at the end
    assert rounds[ROUNDS]["clients"]["succeeded"] == 3, rounds[ROUNDS]

    # the unregistered node never became a client
    intruder_log = (tmp_path / "intruder.log").read_text()
    assert "Failed to activate SuperNode" in intruder_log, intruder_log[-2000:]
    assert intruder_exited
    print("\n".join(e for e in events if "detected" in e))
