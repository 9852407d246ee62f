"""A deployed run whose nodes cannot start their ClientApp: a run in which no client
trained fails with the nodes' cause on the console, and is not counted as completed."""

from __future__ import annotations

import json

import pytest

from fedimb.cli.federation.local import LocalFederation
from tests.conftest import run_fedimb

pytestmark = pytest.mark.slow


def test_a_node_without_its_data_fails_the_run(tmp_path, no_leaked_processes):
    missing = tmp_path / "nope" / "device.npz"
    with LocalFederation(
        tmp_path / "fed", 1, node_configs=[{"data-path": str(missing)}]
    ) as federation:
        result = run_fedimb(
            *federation.runtime_overrides(),
            "dataset=digits",
            "num_clients=1",
            "num_rounds=1",
            "train.local_epochs=1",
            "dropout=none",
            f"output.root={tmp_path / 'out'}",
            timeout=600,
        )
    assert result.returncode != 0, result.stdout[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, result.stdout[-2000:]
    error = lines[-1]
    assert error.startswith("fedimb: error: the run failed (no client trained in any round"), error
    assert (
        "1 of 1 clients could not start" in error
        and f"device data {missing} does not exist" in error
    ), error
    summary = json.loads(next((tmp_path / "out").rglob("summary.json")).read_text())
    assert summary["completed"] is False
    assert summary["clients_lost"] == 1
    assert any(
        f"device data {missing} does not exist" in reason
        for reason in summary["clients_lost_reasons"]
    )
