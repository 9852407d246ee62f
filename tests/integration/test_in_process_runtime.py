"""``runtime=in_process`` through the front end: the run folder and console of a simulation
without starting Flower's processes (its equality with the simulation is checked in
test_front_end.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_small


def test_in_process_run_writes_the_run_folder_and_keeps_server_logs_off_the_console(tmp_path):
    result = run_small(tmp_path, "method=scaffold", "num_rounds=2")
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] and summary["runtime"] == "in_process" and summary["rounds"] == 2
    assert [
        ln.split("|")[0].strip() for ln in result.stdout.splitlines() if ln.startswith("round")
    ] == ["round 0/2", "round 1/2", "round 2/2"]
    log = (run_dir / "flwr.log").read_text()
    assert (
        "FEDIMB-EVENT" in log and "configure_fit" in log
    )  # the server's events and Flower's log lines
    assert (
        "configure_fit" not in result.stdout + result.stderr and "FEDIMB-EVENT" not in result.stdout
    )


def test_in_process_run_rejects_and_counts_bad_updates(tmp_path):
    # a learning rate that overflows every client's update: all three are rejected and counted, the
    # global model stays as it was, and a run in which no client trained does not report success
    result = run_small(tmp_path, "num_rounds=1", "dropout=none", "train.lr=1e30")
    assert result.returncode == 2, result.stderr[-3000:]
    assert (
        "no client trained in any round: update of client 0 rejected: array 0 holds NaN or Inf"
        in result.stderr
    )
    (run_dir,) = [p.parent for p in tmp_path.rglob("events.jsonl")]
    assert json.loads((run_dir / "summary.json").read_text())["completed"] is False
    rejected = [
        json.loads(line)["clients"]["rejected"]
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if json.loads(line).get("event") == "round" and json.loads(line)["round"] == 1
    ]
    assert rejected == [3]
