"""A sweep whose jobs run side by side (``hydra/launcher=joblib``, loky worker processes)
through the front end: every job's run folder, its lines told apart, the sweep's end."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_small

#: a sweep's jobs two at a time, each in a worker process of its own
SIDE_BY_SIDE = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")


def test_two_jobs_side_by_side_write_their_run_folders_and_the_sweep_ends_with_its_folder(
    tmp_path, no_leaked_processes
):
    result = run_small(tmp_path, "-m", *SIDE_BY_SIDE, "method=fedavg,fedprox", "num_rounds=1")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    sweep = next((tmp_path / "multirun").glob("*/*"))
    assert lines[-2:] == [
        f"[fedimb] sweep of 2 runs done (2 completed, 0 failed): {sweep}",
        f"[fedimb] compare them with: fedimb report {sweep}",
    ]
    run_dirs = sorted(Path(line) for line in lines if line.startswith("/"))
    assert run_dirs == [sweep / "0-fedavg-digits-s0", sweep / "1-fedprox-digits-s0"]
    for run_dir, method in zip(run_dirs, ["fedavg", "fedprox"]):
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["completed"] and summary["method"] == method and summary["rounds"] == 1
    # each job's progress is whole lines tagged with its job number
    for job in (0, 1):
        rounds = [ln for ln in lines if ln.startswith(f"[job {job}] round ")]
        assert [ln.split("|")[0] for ln in rounds] == [
            f"[job {job}] round 0/1 ",
            f"[job {job}] round 1/1 ",
        ]
        assert sum(ln.startswith(f"[job {job}] [fedimb] done in ") for ln in lines) == 1
    assert not [ln for ln in lines if re.search(r".round \d+/\d+ \|.*round \d+/", ln)]
