"""The full leaderboard's plan is valid before it runs: every (set-up, method) cell
composes, and a cell that does not stops the script at once with every bad cell named."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.accuracy import leaderboard


def test_every_cell_of_the_full_suite_composes():
    leaderboard.check_cells(leaderboard.full_suite())


def test_a_cell_that_does_not_compose_is_named_before_anything_runs():
    suite = leaderboard.full_suite()
    # Synthetic without the linear encoder that FedBABU, FedConcat and others train apart
    without_encoder = [o for o in suite.setups["synthetic"] if not o.startswith("model")]
    bad = dataclasses.replace(
        suite, setups={"synthetic": without_encoder}, methods=["fedavg", "fedbabu"]
    )
    with pytest.raises(SystemExit) as info:
        leaderboard.check_cells(bad)
    message = str(info.value)
    assert message.startswith("1 cells of the plan are not valid:")
    assert "synthetic fedbabu: " in message and "synthetic fedavg" not in message
