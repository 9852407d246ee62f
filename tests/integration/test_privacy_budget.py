"""A differentially private run through the front end: the planned ε before it starts,
ε on every progress line, in metrics.csv and summary.json, and a budget that ends the
run early as a completed run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedimb.app.configuration import compose as config
from fedimb.app.privacy import account
from tests.conftest import SMALL_DIGITS, run_small

DP = ["privacy=dp_server_fixed", "privacy.noise_multiplier=1.0", "dropout=none", "num_rounds=4"]


def test_a_budget_ends_the_run_after_the_last_round_it_covers(tmp_path):
    spent = account.planned_epsilons(config.compose([*SMALL_DIGITS, *DP]), 4)
    budget = (spent[1] + spent[2]) / 2  # rounds 1 and 2 fit, round 3 would not
    result = run_small(tmp_path, *DP, f"privacy.max_epsilon={budget}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert f"4 rounds spend ε = {spent[-1]:.3g}" in out and "stops it after round 2" in out
    rounds = [line for line in out.splitlines() if line.startswith("round")]
    assert [line.split("|")[0].strip() for line in rounds] == [
        "round 0/4",
        "round 1/4",
        "round 2/4",
    ]
    assert f"ε {spent[1]:.3g}" in rounds[-1]
    assert "privacy budget reached: round 3 would take ε above" in out

    run_dir = Path(out.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] and summary["rounds"] == 2 and summary["rounds_planned"] == 4
    assert summary["privacy_epsilon"] == pytest.approx(spent[1]) and spent[1] < budget
    assert summary["privacy_delta"] == pytest.approx(3**-1.1)
    assert "privacy budget reached" in summary["stopped"]
    with open(run_dir / "metrics.csv") as fh:
        epsilons = [
            float(r["value"]) for r in csv.DictReader(fh) if r["metric"] == "privacy.epsilon"
        ]
    assert epsilons == pytest.approx(spent[:2])
