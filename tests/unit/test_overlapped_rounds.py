"""Round t's test, event and checkpoint in the background while round t+1 trains (FedAvg):
the same events, in order, with the same values, and the checkpoint of round t as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.app.server import checkpoint
from fedimb.core.events import TAG

SETUP = [
    "dataset=digits",
    "num_clients=3",
    "dropout=none",
    "train.local_epochs=1",
    "evaluation.every=1",
]


def round_events(text: str) -> list[dict]:
    events = [json.loads(line[len(TAG) :]) for line in text.splitlines() if line.startswith(TAG)]
    return [e for e in events if e["event"] == "round"]


def run_rounds(tmp_path, capsys, overlap: bool, method: str = "fedavg"):
    fed = InProcessFederation(
        [
            *SETUP,
            f"method={method}",
            "checkpoint.enabled=true",
            f"checkpoint.dir={tmp_path / ('on' if overlap else 'off')}",
        ]
    )
    fed.server.checkpointing = True
    capsys.readouterr()
    kept, returned = [], []
    for server_round in (1, 2, 3):
        returned.append(fed.server.run_round(server_round, overlap=overlap and server_round < 3))
        if server_round == 2:  # round 2 is over, round 3 not begun: round 2's checkpoint is written
            fed.server._finish_pending()
            kept = checkpoint.load(fed.server.checkpoint_file)
    assert (returned[:2] == [None, None]) == overlap  # None: the round went on in the background
    return round_events(capsys.readouterr().out), kept, fed


def test_overlapped_rounds_report_what_sequential_rounds_report(tmp_path, capsys):
    sequential, kept_sequential, _ = run_rounds(tmp_path, capsys, overlap=False)
    overlapped, kept_overlapped, fed = run_rounds(tmp_path, capsys, overlap=True)
    assert fed.strategy.evaluation_may_overlap()
    assert [e["round"] for e in overlapped] == [1, 2, 3]
    for seq, ovl in zip(sequential, overlapped):
        assert ovl["test"] == seq["test"] and ovl["train"] == seq["train"]
        assert ovl["timing"]["test"] > 0
    assert kept_overlapped["round"] == kept_sequential["round"] == 2
    assert kept_overlapped["event"]["test"] == sequential[1]["test"]
    for ovl, seq in zip(kept_overlapped["parameters"], kept_sequential["parameters"]):
        np.testing.assert_array_equal(ovl, seq)  # round 2's model, not round 3's


@pytest.mark.parametrize(
    "settings",
    [["method=scaffold"], ["evaluation.personal=true", "evaluation.local_test_fraction=0.2"]],
)
def test_only_strategies_that_allow_it_overlap(settings):
    fed = InProcessFederation([*SETUP, *settings])
    assert not fed.strategy.evaluation_may_overlap()
