"""A run in which every client fails trains nothing: it exits non-zero in every runtime,
names a client's failure, and its summary does not count it as completed."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_below

DIGITS = ["dataset=digits", "num_clients=2", "num_rounds=1", "dropout=none", "train.local_epochs=1"]


@pytest.mark.parametrize(
    "runtime", ["in_process", pytest.param("simulation", marks=pytest.mark.slow)]
)
def test_a_run_in_which_every_client_fails_is_a_failed_run(runtime, tmp_path):
    result = run_below(
        tmp_path, *DIGITS, f"runtime={runtime}", "fault.kind=raise", "fault.clients=[0,1]"
    )
    assert result.returncode == 2, result.stdout[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fedimb: error:")]
    assert "the run failed (no client trained in any round: client " in line, line
    assert "RuntimeError: injected fault" in line and "fedimb resume" not in line, line
    summary = json.loads(next(tmp_path.rglob("summary.json")).read_text())
    assert summary["completed"] is False and summary["rounds"] == 1 and summary["clients_lost"] == 0
