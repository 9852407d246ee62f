"""``fedimb tune``: experiment files that run, resuming by replay, and tuning that never
reads the test set (digits, three clients, two rounds, no dropout)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

from fedimb.app.configuration import build
from fedimb.app.nodes import client_app
from fedimb.cli.tune.files import run_command
from fedimb.cli.tune.trial import RECORD
from fedimb.cli.tune.tuning import tune_methods
from fedimb.core.absl_handler import keep_absl_on_process_stderr
from fedimb.core.data import datasets
from fedimb.core.process_cache import ProcessCache
from tests.conftest import run_fedimb

SMALL = [
    "dataset=digits",
    "runtime=in_process",
    "num_clients=3",
    "num_rounds=2",
    "dropout=none",
    "tune.seeds=[100]",
]


def trial_folders(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in sweep_dir.iterdir() if (p / ".hydra").is_dir())


def objectives(out: Path, method: str) -> list[float]:
    return json.loads((out / "summary.json").read_text())[method]["values"]


def test_tuning_two_methods_writes_experiment_files_that_run(tmp_path):
    out = tmp_path / "tuned"
    found = tune_methods(["fedavg", "fedprox"], SMALL, 3, out)
    assert sorted(found) == ["fedavg", "fedprox"]
    summary = json.loads((out / "summary.json").read_text())
    for method in found:
        assert len(trial_folders(out / "trials" / method)) == 3
        entry = summary[method]
        assert entry["trials"] == 3 and entry["best_value"] == max(entry["values"])
    assert sorted(summary["fedprox"]["best_params"]) == ["method.client.mu", "train.lr"]

    seed_zero = run_command(out, "fedprox")[1:]  # the command printed, without "fedimb"
    result = run_fedimb(*seed_zero, f"output.root={tmp_path / 'runs'}", timeout=300)
    assert result.returncode == 0, result.stderr
    ran = json.loads((Path(result.stdout.strip().splitlines()[-1]) / "summary.json").read_text())
    config = (Path(ran["run_dir"]) / "config.yaml").read_text()
    best = summary["fedprox"]["best_params"]
    assert ran["method"] == "fedprox" and ran["seed"] == 0 and ran["completed"]
    assert ran["validation_fraction"] == 0.1 and ran["final_accuracy"] is not None
    assert f"lr: {best['train.lr']}" in config and f"mu: {best['method.client.mu']}" in config


def test_a_sweep_never_closes_the_stream_absl_logged_to(tmp_path):
    absl_logging = pytest.importorskip("absl.logging")  # dp-accounting's (the dev extra)
    notebook = io.StringIO()  # absl imported where stderr was another stream (a notebook's)
    absl_logging.get_absl_handler().python_handler.stream = notebook
    try:
        tune_methods(["fedavg"], SMALL, 1, tmp_path)  # Hydra reconfigures logging
    finally:
        keep_absl_on_process_stderr()
    assert not notebook.closed


def test_a_rerun_with_more_trials_replays_the_recorded_ones(tmp_path):
    out = tmp_path / "tuned"
    tune_methods(["fedprox"], SMALL, 2, out)
    sweep_dir = out / "trials" / "fedprox"
    before = {p.name: (p / "summary.json").stat().st_mtime_ns for p in trial_folders(sweep_dir)}
    first = objectives(out, "fedprox")

    tune_methods(["fedprox"], SMALL, 3, out)
    after = {p.name: (p / "summary.json").stat().st_mtime_ns for p in trial_folders(sweep_dir)}
    assert len(after) == 3 and {k: after[k] for k in before} == before  # one new run only
    assert objectives(out, "fedprox")[:2] == first
    records = [json.loads((sweep_dir / name / RECORD).read_text()) for name in sorted(after)]
    assert [r["objective"] for r in records[:2]] == first


def test_a_trial_runs_on_every_tuning_seed_and_scores_their_mean(tmp_path):
    seeds = [o for o in SMALL if not o.startswith("tune.seeds")] + ["tune.seeds=[100,101]"]
    tune_methods(["fedavg"], seeds, 1, tmp_path)
    (trial,) = trial_folders(tmp_path / "trials" / "fedavg")
    ran = {s: json.loads((trial / f"s{s}" / "summary.json").read_text()) for s in (100, 101)}
    assert [ran[s]["seed"] for s in (100, 101)] == [100, 101]
    record = json.loads((trial / RECORD).read_text())
    mean = (ran[100]["validation_objective"] + ran[101]["validation_objective"]) / 2
    assert record["failed"] is None and record["objective"] == pytest.approx(mean)
    assert ran[100]["validation_chance"] == pytest.approx(0.1, abs=0.02)  # digits: 10 classes
    assert objectives(tmp_path, "fedavg") == [record["objective"]]


@pytest.fixture
def nan_test_arrays(monkeypatch):
    """Every data set loaded from here on has NaN test images (the caches start empty)."""
    prepared = datasets._prepared

    def with_nan_test(spec):
        data = prepared(spec)
        return dataclasses.replace(data, x_test=np.full_like(data.x_test, np.nan))

    monkeypatch.setattr(datasets, "_prepared", with_nan_test)
    for module, name in (
        (datasets, "_LOADED"),
        (build, "_DATA"),
        (client_app, "_INPUTS"),
        (client_app, "_TEST_ROWS"),
    ):
        monkeypatch.setattr(module, name, ProcessCache())


def test_tuning_never_reads_the_test_set(tmp_path, request):
    tune_methods(["fedavg"], SMALL, 2, tmp_path / "real")
    request.getfixturevalue("nan_test_arrays")
    tune_methods(["fedavg"], SMALL, 2, tmp_path / "nan")
    assert objectives(tmp_path / "nan", "fedavg") == objectives(tmp_path / "real", "fedavg")
    for folder in trial_folders(tmp_path / "nan" / "trials" / "fedavg"):
        ran = json.loads((folder / "summary.json").read_text())
        assert ran["completed"] and ran["final_accuracy"] is None
        assert ran["validation_objective"] > 0


PERSONAL = [
    *SMALL,
    "partition=dirichlet",
    "partition.alpha=0.3",
    "evaluation.personal=true",
    "evaluation.local_test_fraction=0.2",
    "evaluation.local_validation_fraction=0.2",
    "tune.objective=personal_validation_objective",
]


def test_personal_tuning_scores_the_clients_validation_shares_alone(tmp_path, request):
    methods = ["local", "fedavg_ft", "fedbabu"]  # FedBABU: its own fine-tuning evaluation
    tune_methods(methods, PERSONAL, 1, tmp_path / "real")
    request.getfixturevalue("nan_test_arrays")
    tune_methods(methods, PERSONAL, 1, tmp_path / "nan")
    for method in methods:
        assert objectives(tmp_path / "nan", method) == objectives(tmp_path / "real", method)
        (folder,) = trial_folders(tmp_path / "nan" / "trials" / method)
        ran = json.loads((folder / "summary.json").read_text())
        assert ran["completed"] and ran["final_accuracy"] is None
        assert ran["personal_selected_accuracy"] is None  # no client read its test split
        assert 0 < ran["personal_validation_objective"] == objectives(tmp_path / "nan", method)[0]
