"""A deployed run whose rounds are far slower than any interval of Flower's own: one of
two SuperNodes answers each fit only after ``fault.hang_seconds`` (a Raspberry Pi-class
device), well inside ``runtime.round_timeout``. The run completes and counts the slow
client as succeeded in every round; nothing between front end, SuperLink and nodes gives
up on a round that is slow but within its timeout (the log stream has no read timeout;
were it cut, the front end would re-attach).

Part of ``make test-faults`` (about four minutes on 2 cores), not of ``make test``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedimb.cli.federation.local import LocalFederation
from tests.conftest import run_fedimb

pytestmark = [pytest.mark.slow, pytest.mark.fault_matrix]

SLOW_SECONDS = 90  # the slow client's extra time in fit, every round
ROUNDS = 2


def test_a_slow_node_within_the_round_timeout_completes_every_round(tmp_path, no_leaked_processes):
    with LocalFederation(tmp_path / "fed", 2) as fed:
        result = run_fedimb(
            *fed.runtime_overrides(),
            "dataset=digits",
            "num_clients=2",
            f"num_rounds={ROUNDS}",
            "train.local_epochs=1",
            "dropout=none",
            "runtime.round_timeout=300",
            "fault.kind=hang",
            "fault.clients=[1]",
            f"fault.hang_seconds={SLOW_SECONDS}",
            f"output.root={tmp_path / 'out'}",
            timeout=900,
        )
        superlink_log = (tmp_path / "fed" / "superlink.log").read_text()
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] and summary["rounds"] == ROUNDS, summary
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    rounds = [r for r in records if r["event"] == "round" and r["round"] > 0]
    assert [r["round"] for r in rounds] == list(range(1, ROUNDS + 1))
    for record in rounds:  # the slow client is waited for, not dropped
        assert record["clients"]["succeeded"] == 2 and not record["clients"]["failures"], record[
            "clients"
        ]
        assert record["seconds"] >= SLOW_SECONDS, record["seconds"]
    streams = superlink_log.count(
        "ControlServicer.StreamLogs"
    )  # 1 unless a stream was cut and re-attached
    print("round seconds:", [round(r["seconds"], 1) for r in rounds], "log streams:", streams)
