"""FedBuff under a speed model in the Ray simulation and in process: the same fit step
(:mod:`fedimb.app.server.async_loop`) takes the updates in the order of their simulated
arrival, so both runtimes report the same rounds, scores and simulated clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SMALL_DIGITS, run_below

pytestmark = pytest.mark.slow

FEDBUFF = (
    *SMALL_DIGITS,
    "dropout=none",
    "num_rounds=3",
    "mode=fedbuff",
    "mode.concurrency=3",
    "mode.buffer_size=2",
    "speed=lognormal",
)


def rounds_of(root: Path, runtime: str) -> tuple[dict, list[dict]]:
    result = run_below(root, f"runtime={runtime}", *FEDBUFF, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return summary, [e for e in events if e["event"] == "round" and e["round"] > 0]


def test_fedbuff_is_the_same_in_the_simulation_and_in_process(tmp_path, no_leaked_processes):
    simulated, sim_rounds = rounds_of(tmp_path / "sim", "simulation")
    in_process, ip_rounds = rounds_of(tmp_path / "ip", "in_process")
    assert [r["round"] for r in sim_rounds] == [1, 2, 3]
    for sim, ip in zip(sim_rounds, ip_rounds):
        assert sim["test"] == ip["test"]
        assert sim["extra"]["clock.time"] == ip["extra"]["clock.time"] > 0
        assert sim["extra"]["async.updates"] == 2
    assert (
        simulated["sim_seconds"]
        == in_process["sim_seconds"]
        == ip_rounds[-1]["extra"]["clock.time"]
    )
