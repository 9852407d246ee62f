"""Flower's own CLI: ``flwr run <app> <connection> --run-config ...`` with the packaged config."""

from __future__ import annotations

import subprocess

import pytest

from fedimb.cli.federation.flwr_cli import flwr_home, write_connection
from fedimb.cli.federation.processes import SuperLink, executable, flower_env
from fedimb.cli.launch.flower_run import APP_DIR
from fedimb.core.events import parse_event

pytestmark = pytest.mark.slow


def test_flwr_run_with_run_config_overrides(tmp_path, no_leaked_processes):
    with (
        flwr_home(None, base=tmp_path) as (home, connection),
        SuperLink(tmp_path / "superlink.log", simulation=True, env=flower_env(home)) as superlink,
    ):
        superlink.wait_ready()
        write_connection(home, connection, superlink.address)
        result = subprocess.run(
            [
                executable("flwr"),
                "run",
                str(APP_DIR),
                connection,
                "--stream",
                "--run-config",
                'num-rounds=2 num-clients=3 dropout="none" overrides="train.local_epochs=1"',
                "--federation-config",
                "num-supernodes=3 client-resources-num-cpus=1",
            ],
            capture_output=True,
            text=True,
            env=flower_env(home),
            timeout=600,
        )
    events = [e for e in map(parse_event, result.stdout.splitlines()) if e]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end", result.stdout[-3000:]
    rounds = [e for e in events if e["event"] == "round"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert rounds[-1]["clients"]["succeeded"] == 3 and rounds[-1]["clients"]["dropped"] == 0
    assert events[0]["num_clients"] == 3
    # default partition: 2 classes x 400 samples per client; one epoch of B = 50 is 16 steps
    assert rounds[-1]["train"]["local_steps"] == 16
