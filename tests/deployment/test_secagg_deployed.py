"""``secagg=secaggplus`` deployed: a SuperLink and three SuperNodes on this machine
(``fedimb local-federation``), FedAvg through Flower's SecAgg+ for a round in which one node
fails after it shared its keys (above the reconstruction threshold: the round completes with
the other two); the same run in process gives the same model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_fedimb

pytestmark = pytest.mark.slow

RUN = [
    "secagg=secaggplus",
    "dataset=digits",
    "num_clients=3",
    "num_rounds=1",
    "train.local_epochs=1",
    "dropout=none",
    "fault.kind=raise",
    "fault.clients=[1]",
    "fault.rounds=[1]",
]


def rounds_of(result) -> dict[int, dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    folder = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    return {e["round"]: e for e in events if e["event"] == "round"}


def test_three_deployed_nodes_aggregate_securely_through_a_dropout(tmp_path, no_leaked_processes):
    deployed = rounds_of(
        run_fedimb(
            "local-federation",
            "--nodes",
            "3",
            *RUN,
            f"output.root={tmp_path / 'deployed'}",
            timeout=400,
        )
    )
    round1 = deployed[1]
    assert round1["clients"]["succeeded"] == 2 and round1["clients"]["errors"] == 1
    assert round1["extra"]["secagg.summed"] == 2
    assert any("client 1 on node" in m and "left SecAgg+" in m for m in round1["messages"])
    assert {"secagg.setup", "secagg.unmask"} <= set(round1["extra"])
    local = rounds_of(
        run_fedimb(*RUN, "runtime=in_process", f"output.root={tmp_path / 'local'}", timeout=300)
    )
    # the rounding is seeded per client: the runtimes agree
    assert round1["test"]["loss"] == pytest.approx(local[1]["test"]["loss"], abs=1e-4)
