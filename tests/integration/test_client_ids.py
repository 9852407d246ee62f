"""How a run maps clients to nodes and keeps their state gives the results of the way it
did before, to the last bit: ``runtime.client_ids=assigned`` (no node is asked anything
before round 1) with ``runtime.client_state=disk`` (idle clients' state on disk) against
``claimed`` (every node asked which client it is first) with ``memory`` (Flower's
``Context.state``). In the simulation and in process, with dropout, for a stateful method
(SCAFFOLD's client control variates) and one that reads every client's label histogram
(Astraea); a finished run leaves no client state behind. In the simulation also with 2
nodes lent to the 4 clients instruction by instruction (``runtime.nodes=2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedimb.cli.rundir.events import read_events
from tests.conftest import finish_fedimb, start_fedimb
from tests.integration.test_front_end import round_scores

METHODS = ("scaffold", "astraea")
COMMON = (
    "-m",
    f"method={','.join(METHODS)}",
    "dataset=digits",
    "num_clients=4",
    "fraction_fit=0.75",
    "dropout=bernoulli",
    "num_rounds=3",
    "train.local_epochs=1",
    "seed=2",
)
NOW = ("runtime.client_ids=assigned", "runtime.client_state=disk")
BEFORE = ("runtime.client_ids=claimed", "runtime.client_state=memory")
POOLED = (*NOW, "runtime.nodes=2")


def run_both(tmp_path, *runtime: str, pooled: bool = False) -> None:
    cache = tmp_path / "cache"
    runs = {"now": NOW, "before": BEFORE, **({"pooled": POOLED} if pooled else {})}
    for name, settings in runs.items():
        proc = start_fedimb(
            *COMMON,
            *runtime,
            *settings,
            f"output.root={tmp_path / name}",
            env={"FEDIMB_CACHE": str(cache)},
        )
        result = finish_fedimb(proc)
        assert result.returncode == 0, result.stderr[-3000:]
    for method in METHODS:
        (now,) = (tmp_path / "now").glob(f"multirun/*/*/*-{method}-digits-s2")
        (before,) = (tmp_path / "before").glob(f"multirun/*/*/*-{method}-digits-s2")
        scores = round_scores(now)
        assert len(scores) > 3 and any(s[3] for s in scores), method  # clients trained
        assert scores == round_scores(before), (runtime, method)
        assert nodes_connected(now) == nodes_connected(before) == 4  # one node per client
        if pooled:
            (pool,) = (tmp_path / "pooled").glob(f"multirun/*/*/*-{method}-digits-s2")
            assert round_scores(pool) == scores, method
            assert nodes_connected(pool) == 2
    assert not any((cache / "client_state").glob("*")), "a finished run's client state is left"


def nodes_connected(run_dir: Path) -> int:
    """The nodes connected when the run's round 1 began (its ``nodes`` event)."""
    (event,) = [e for e in read_events(run_dir / "events.jsonl") if e["event"] == "nodes"]
    assert event["clients"] == 4
    return int(event["connected"])


def test_assigned_clients_with_state_on_disk_repeat_the_run_before_in_process(tmp_path):
    run_both(tmp_path, "runtime=in_process")


@pytest.mark.slow
def test_assigned_clients_with_state_on_disk_repeat_the_run_before_in_the_simulation(
    tmp_path, no_leaked_processes
):
    run_both(tmp_path, pooled=True)
