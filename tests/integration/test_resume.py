"""Crash recovery: the server side killed mid-run, then ``fedimb resume``."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml
from omegaconf import OmegaConf

from fedimb.app.server.checkpoint import experiment_key
from fedimb.cli.rundir.events import read_events
from tests.conftest import finish_fedimb, run_fedimb, start_fedimb

pytestmark = pytest.mark.slow

# FedAvgM keeps server momentum: resuming must restore strategy state, not only weights
EXPERIMENT = [
    "method=fedavgm",
    "dataset=mnist5k",
    "num_clients=3",
    "num_rounds=4",
    "train.local_epochs=1",
    "dropout=none",
    "seed=3",
]


def kill_server_side(fedimb: subprocess.Popen) -> None:
    """SIGKILL the SuperLink the front end started and everything below it (SuperExec,
    ServerApp, simulation engine): the server machine dies."""
    superlink = next(
        c
        for c in psutil.Process(fedimb.pid).children()
        if "flower-superlink" in " ".join(c.cmdline())
    )
    for proc in [superlink, *superlink.children(recursive=True)]:
        proc.kill()


def test_server_killed_mid_run_resumes_with_identical_results(
    tmp_path, monkeypatch, no_leaked_processes
):
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path / "cache"))
    reference = start_fedimb(*EXPERIMENT, f"output.root={tmp_path / 'reference'}")
    # the crashed run lends 2 nodes to its 3 clients (runtime.nodes): which node serves a
    # client plays no part, before the crash or after the resume
    crashed = start_fedimb(*EXPERIMENT, "runtime.nodes=2", f"output.root={tmp_path / 'crashed'}")
    assert crashed.stdout is not None
    for line in crashed.stdout:
        if line.startswith("round 2/4"):
            kill_server_side(crashed)
            break
    result = finish_fedimb(crashed, timeout=300)
    assert result.returncode != 0
    assert "continue it with: fedimb resume" in result.stderr
    run_dir = Path(result.stderr.strip().split("fedimb resume ")[-1])
    assert not json.loads((run_dir / "summary.json").read_text())["completed"]
    nodes = [e for e in read_events(run_dir / "events.jsonl") if e["event"] == "nodes"]
    assert [(e["connected"], e["clients"]) for e in nodes] == [(2, 3)]

    # as a run folder from before config_version and the influence bounds had it, with the
    # checkpoint named by that configuration as such a run named it: resume brings it up to
    # date (today's defaults, which this run had), finds the checkpoint and finishes alike
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    del saved["config_version"], saved["influence"], saved["checkpoint"]["experiment"]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    run_id = saved["checkpoint"]["run_id"]
    (written,) = (tmp_path / "cache" / "checkpoints").glob(f"*-{run_id}.npz")
    older_name = f"{experiment_key(OmegaConf.create(saved))}-{run_id}.npz"
    written.rename(written.with_name(older_name))

    resumed = run_fedimb("resume", str(run_dir), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # the kill lands after round 2's line, or later where the line waited in the pipe on a
    # busy machine (round 2's checkpoint is on disk before its line is printed)
    resumed_after = re.search(r"\[fedimb\] resuming after round (\d)", resumed.stdout)
    assert resumed_after is not None, resumed.stdout[-3000:]
    last_done = int(resumed_after.group(1))
    assert 2 <= last_done < 4
    assert [
        ln.split("|")[0].strip() for ln in resumed.stdout.splitlines() if ln.startswith("round")
    ] == [f"round {r}/4" for r in range(last_done + 1, 5)]

    reference = finish_fedimb(reference, timeout=600)
    assert reference.returncode == 0, reference.stderr[-3000:]
    ref_dir = Path(reference.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] and summary["rounds"] == 4
    nodes = [e for e in read_events(run_dir / "events.jsonl") if e["event"] == "nodes"]
    assert [e["connected"] for e in nodes] == [2, 2]  # and resumed

    def test_metrics(folder: Path) -> dict[tuple[str, str], float]:
        with open(folder / "metrics.csv") as fh:
            return {
                (r["round"], r["metric"]): float(r["value"])
                for r in csv.DictReader(fh)
                if r["split"] == "test"
            }

    expected, got = test_metrics(ref_dir), test_metrics(run_dir)
    assert sorted(got) == sorted(expected) and {k[0] for k in got} == {"0", "1", "2", "3", "4"}
    for key, value in expected.items():  # float32 sums may differ in order across processes
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    # the finished run leaves no checkpoint behind
    assert not list((tmp_path / "cache" / "checkpoints").glob("*.npz"))
