"""Every configured method runs 2 rounds against real SuperLink + SuperNode processes.

A deployed round costs a ClientApp process start per node (~10-20 s here), so this
takes about 45 minutes on 2 cores and is not part of ``make test``; run it with
``make test-deployment`` (marker ``deployment_all``). Astraea's synchronization rounds
take mediator_epochs x min(gamma, clients) Flower rounds each, so its variants run
with gamma 2 and one mediator epoch (4 Flower rounds)."""

from __future__ import annotations

import json

import pytest

from fedimb.app.configuration.compose import group_choices
from fedimb.cli.federation.local import LocalFederation
from tests.conftest import run_fedimb, smoke_groups, with_rounds

pytestmark = [pytest.mark.slow, pytest.mark.deployment_all, pytest.mark.timeout(5400)]


def test_every_method_runs_two_rounds_deployed(tmp_path, no_leaked_processes):
    methods = group_choices("method")
    common = ["dataset=digits", "num_clients=3", "train.local_epochs=1", "dropout=none", "seed=1"]
    with LocalFederation(tmp_path / "fed", 3) as fed:
        results = [
            run_fedimb(
                "-m",
                f"method={','.join(group)}",
                *fed.runtime_overrides(),
                *common,
                *with_rounds(smoke, 2),
                f"output.root={tmp_path / f'group{i}'}",
                timeout=3600,
            )
            for i, (smoke, group) in enumerate(smoke_groups(methods).items())
        ]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    summaries = [
        json.loads(p.read_text()) for p in sorted(tmp_path.glob("*/multirun/*/*/*/summary.json"))
    ]
    assert sorted(s["method"] for s in summaries) == sorted(methods)
    for summary in summaries:
        assert (
            summary["completed"] and summary["runtime"] == "deployment" and summary["rounds"] >= 2
        ), summary
        assert summary["final_accuracy"] is not None and summary["bytes_up"] > 0
