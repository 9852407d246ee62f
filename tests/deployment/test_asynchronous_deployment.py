"""A deployed FedBuff run beside its synchronous twin: one of three SuperNodes answers each
fit only after ``fault.hang_seconds`` (a slow device). The synchronous rounds wait for it;
FedBuff applies the other two clients' updates as they arrive, takes the slow client's
when it comes, and finishes sooner in wall time. The real clock stands in the events.

Part of ``make test-faults`` (a few minutes on 2 cores), not of ``make test``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedimb.cli.federation.local import LocalFederation
from tests.conftest import run_fedimb

pytestmark = [pytest.mark.slow, pytest.mark.fault_matrix]

SLOW_SECONDS = 30  # the slow client's extra time in fit, every time it trains
COMMON = (
    "dataset=digits",
    "num_clients=3",
    "train.local_epochs=1",
    "dropout=none",
    "runtime.round_timeout=300",
    "fault.kind=hang",
    "fault.clients=[2]",
    f"fault.hang_seconds={SLOW_SECONDS}",
)


def deployed_run(fed: LocalFederation, root: Path, *overrides: str) -> tuple[dict, list[dict]]:
    result = run_fedimb(
        *fed.runtime_overrides(), *COMMON, *overrides, f"output.root={root}", timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return summary, [e for e in events if e["event"] == "round" and e["round"] > 0]


def test_fedbuff_finishes_before_its_synchronous_twin_with_a_slow_node(
    tmp_path, no_leaked_processes
):
    with LocalFederation(tmp_path / "fed", 3) as fed:
        sync, _ = deployed_run(fed, tmp_path / "sync", "num_rounds=2")
        buffered, steps = deployed_run(
            fed,
            tmp_path / "fedbuff",
            "num_rounds=4",
            "mode=fedbuff",
            "mode.concurrency=3",
            "mode.buffer_size=2",
        )
    assert sync["completed"] and buffered["completed"]
    assert sync["server_seconds"] >= 2 * SLOW_SECONDS  # every round waited for the slow node
    assert [s["round"] for s in steps] == [1, 2, 3, 4]
    assert all(s["extra"]["async.updates"] == 2 for s in steps)
    times = [s["extra"]["clock.time"] for s in steps]
    assert times == sorted(times) and buffered["sim_seconds"] == times[-1]
    assert buffered["server_seconds"] < sync["server_seconds"], (buffered, sync)
    print(
        "server seconds: sync",
        sync["server_seconds"],
        "fedbuff",
        buffered["server_seconds"],
        "| fedbuff steps at",
        times,
    )
