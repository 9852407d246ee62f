"""``secagg=secaggplus`` deployed: a SuperLink and three SuperNodes on this machine
(``fedimb local-federation``), FedAvg through Flower's SecAgg+ for two rounds, in the second
of which one node fails after it shared its keys (above the reconstruction threshold: the
round completes with the other two); the same run in process gives the same models."""

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
    "num_rounds=2",
    "train.local_epochs=1",
    "dropout=none",
    "fault.kind=raise",
    "fault.clients=[1]",
    "fault.rounds=[2]",
]


def rounds_of(result) -> dict[int, dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    folder = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    return {e["round"]: e for e in events if e["event"] == "round"}


def test_three_deployed_nodes_aggregate_securely_through_a_dropout(tmp_path, no_leaked_processes):
    deployed = rounds_of(
        run_fedimb(
            "local-federation", "--nodes", "3", *RUN, f"output.root={tmp_path / 'deployed'}",
            timeout=400,
        )
    )
    assert deployed[1]["clients"]["succeeded"] == 3 and deployed[1]["extra"]["secagg.summed"] == 3
    assert deployed[2]["clients"]["succeeded"] == 2 and deployed[2]["clients"]["errors"] == 1
    assert deployed[2]["extra"]["secagg.summed"] == 2
    assert any("client 1 on node" in m and "left SecAgg+" in m for m in deployed[2]["messages"])
    assert all(set(deployed[r]["extra"]) >= {"secagg.setup", "secagg.unmask"} for r in (1, 2))
    local = rounds_of(
        run_fedimb(*RUN, "runtime=in_process", f"output.root={tmp_path / 'local'}", timeout=300)
    )
    for r in (1, 2):  # the rounding is seeded per client: the runtimes agree
        assert deployed[r]["test"]["loss"] == pytest.approx(local[r]["test"]["loss"], abs=1e-4)
