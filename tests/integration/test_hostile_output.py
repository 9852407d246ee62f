"""One event channel that client code cannot write to, in every runtime: a client that
prints, logs and raises event lines (``fault.kind=forged_print``: a round of accuracy
0.999 and an artifact that would replace partition.json, whole and after a carriage
return) changes nothing of the run folder but its log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedimb.app.faults.attacks import FORGED_ACCURACY
from tests.conftest import run_below

RUNTIMES = ["in_process", pytest.param("simulation", marks=pytest.mark.slow)]
RUN = ["dataset=digits", "num_clients=3", "num_rounds=2", "dropout=none", "train.local_epochs=1"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_client_that_prints_logs_and_raises_events_forges_nothing(runtime, tmp_path):
    result = run_below(
        tmp_path, *RUN, f"runtime={runtime}", "fault.kind=forged_print", "fault.clients=[1]"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    rounds = [e for e in events if e["event"] == "round"]
    assert [e["round"] for e in rounds] == [0, 1, 2]  # the server's own, once each
    assert all(e["test"]["accuracy"] != FORGED_ACCURACY for e in rounds)
    assert [e["clients"]["errors"] for e in rounds[1:]] == [1, 1]  # client 1 raised
    assert not [e for e in events if e["event"] == "artifact"]
    assert not list(run_dir.glob("artifact-*"))
    assert "clients" in json.loads((run_dir / "partition.json").read_text())
    assert str(FORGED_ACCURACY) not in (run_dir / "metrics.csv").read_text()
    assert json.loads((run_dir / "summary.json").read_text())["best_accuracy"] != FORGED_ACCURACY
    assert f"acc {FORGED_ACCURACY:.4f}" not in result.stdout
    if runtime == "in_process":  # what the client printed and logged is in the log, as text
        log = (run_dir / "flwr.log").read_text()
        assert 'FEDIMB_EVENT {"event":"artifact"' in log
        assert 'clients: FEDIMB_EVENT {"event":"round"' in log
