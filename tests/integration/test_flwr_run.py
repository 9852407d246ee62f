"""Flower's own CLI: ``flwr run <app> <connection> --run-config ...`` with the packaged config."""

from __future__ import annotations

import pytest

from tests.flwr_runs import flwr_run, simulation_superlink

pytestmark = pytest.mark.slow


def test_flwr_run_with_run_config_overrides(tmp_path, no_leaked_processes):
    with simulation_superlink(tmp_path) as (home, connection):
        events = flwr_run(
            home,
            connection,
            'num-rounds=2 num-clients=3 dropout="none" overrides="train.local_epochs=1"',
        )
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    rounds = [e for e in events if e["event"] == "round"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert rounds[-1]["clients"]["succeeded"] == 3 and rounds[-1]["clients"]["dropped"] == 0
    assert events[0]["num_clients"] == 3
    # default partition: 2 classes x 400 samples per client; one epoch of B = 50 is 16 steps
    assert rounds[-1]["train"]["local_steps"] == 16
