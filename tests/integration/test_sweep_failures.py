"""A sweep whose job fails goes on with its other jobs and ends non-zero, counting the failure."""

from __future__ import annotations

import json

from tests.conftest import run_small


def test_a_failed_job_does_not_stop_the_sweep(tmp_path):
    # job 0's learning rate overflows every update, so no client trains and that run fails;
    # job 1 must still run, and the sweep's end must count one completed and one failed run
    result = run_small(
        tmp_path, "-m", "train.lr=1e30,0.05", "num_rounds=1", "dropout=none", timeout=600
    )
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("fedimb: error:")]
    assert len(errors) == 1 and "[job 0]" in errors[0] and "no client trained" in errors[0], errors
    assert "(1 completed, 1 failed)" in result.stdout
    summaries = sorted(tmp_path.glob("multirun/*/*/*/summary.json"))
    assert [json.loads(p.read_text())["completed"] for p in summaries] == [False, True]
