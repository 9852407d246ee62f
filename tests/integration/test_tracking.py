"""Experiment tracking read back from each tracker's own store: MLflow's SQLite store
through MLflow's client, TensorBoard's event files through TensorBoard's reader, and an
offline W&B run's transaction log through W&B's own record schema. Each tracker's tests
skip, with the install command, only when its extra is not installed."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from fedimb.app.configuration.compose import check_overrides, compose
from fedimb.cli import tracking
from fedimb.cli.launch.experiment import run_experiment
from fedimb.cli.rundir.files import read_metrics_csv
from fedimb.core.errors import ConfigError
from tests.conftest import SMALL_DIGITS, run_below

RUN = [
    "runtime=in_process",
    *SMALL_DIGITS,
    "num_rounds=2",
    "dropout=none",
    "seed=1",
    "checkpoint.enabled=false",
]


def quiet(line: str) -> None:
    pass


def needs(package: str):
    return pytest.importorskip(
        package, reason=f"{package} is not installed: make install EXTRAS=dev,{package}"
    )


def run(tmp_path: Path, *overrides: str, echo=quiet, folder: str = "run") -> Path:
    cfg = compose([*RUN, f"output.root={tmp_path}", *overrides])
    return run_experiment(cfg, tmp_path / folder, echo)


def csv_series(run_dir: Path, split: str, metric: str) -> list[tuple[int, float]]:
    return [
        (r["round"], r["value"])
        for r in read_metrics_csv(run_dir / "metrics.csv")
        if r["split"] == split and r["metric"] == metric
    ]


def assert_same_series(logged, expected) -> None:
    """The same rounds with the same values (float32 in event files: to 1e-6)."""
    logged = sorted(logged)
    assert expected, "nothing to compare"
    assert [step for step, _ in logged] == [step for step, _ in expected]
    assert [value for _, value in logged] == pytest.approx(
        [value for _, value in expected], rel=1e-6
    )


# ---------------------------------------------------------------------------- MLflow
def test_mlflow_keeps_params_per_round_metrics_tags_and_the_run_folder(tmp_path):
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    lines: list[str] = []
    run_dir = run(tmp_path, "tracking=mlflow", echo=lines.append)
    state = json.loads((run_dir / "tracking.json").read_text())["mlflow"]
    assert state["uri"] == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert any(
        line == f"[fedimb] tracking: MLflow run {state['run_id']} in {state['uri']}"
        for line in lines
    )

    client = MlflowClient(tracking_uri=state["uri"])
    mlrun = client.get_run(state["run_id"])
    assert mlrun.info.status == "FINISHED" and mlrun.info.run_name == "run"
    assert client.get_experiment(mlrun.info.experiment_id).name == "fedimb"
    params = mlrun.data.params
    assert (
        params["method.name"] == "fedavg"
        and params["num_clients"] == "3"
        and params["train.lr"] == "0.01"
    )
    assert params["tracking.name"] == "mlflow"
    tags = mlrun.data.tags
    assert (tags["method"], tags["dataset"], tags["partition"], tags["seed"]) == (
        "fedavg",
        "digits",
        "pathological",
        "1",
    )

    for split, metric in [
        ("test", "accuracy"),
        ("test", "loss"),
        ("clients", "succeeded"),
        ("time", "client_train"),
    ]:
        history = client.get_metric_history(state["run_id"], f"{split}/{metric}")
        assert_same_series([(m.step, m.value) for m in history], csv_series(run_dir, split, metric))
    assert [m.step for m in client.get_metric_history(state["run_id"], "test/accuracy")] == [
        0,
        1,
        2,
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert mlrun.data.metrics["summary/final_accuracy"] == pytest.approx(summary["final_accuracy"])

    artifacts = {a.path for a in client.list_artifacts(state["run_id"])}
    assert {
        "config.yaml",
        "metrics.csv",
        "summary.json",
        "curves.png",
        "events.jsonl",
        "tracking.json",
    } <= artifacts
    stored = Path(
        client.download_artifacts(state["run_id"], "metrics.csv", str(tmp_path / "download"))
    )
    assert stored.read_text() == (run_dir / "metrics.csv").read_text()


def test_mlflow_nests_a_sweeps_jobs_under_one_parent_run(tmp_path):
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    result = run_below(
        tmp_path, "-m", *RUN[:-2], "seed=0,1", "checkpoint.enabled=false", "tracking=mlflow"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fedimb")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "fedimb.sweep" in r.data.tags]
    jobs = [r for r in runs if "fedimb.sweep" not in r.data.tags]
    assert len(parents) == 1 and len(jobs) == 2
    sweep = parents[0]
    assert sweep.data.tags["fedimb.sweep"].startswith("multirun/")
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {sweep.info.run_id}
    assert sorted(r.data.tags["seed"] for r in jobs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in runs)


def test_resume_continues_the_same_mlflow_run(tmp_path):
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    run_dir = run(tmp_path, "tracking=mlflow")
    first = json.loads((run_dir / "tracking.json").read_text())["mlflow"]["run_id"]
    cfg = OmegaConf.load(run_dir / "config.yaml")
    cfg.resume = True
    resumed = tracking.open_tracking(cfg, run_dir, quiet)
    assert resumed.tracker.run_id == first
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(first).info.status == "RUNNING"
    resumed.end(None)  # ended without a summary: interrupted
    assert client.get_run(first).info.status == "FAILED"
    assert len(client.search_runs([client.get_run(first).info.experiment_id])) == 1


@pytest.mark.slow
def test_a_simulation_run_is_tracked_through_the_same_stream(tmp_path):
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    settings = [o for o in RUN[1:] if not o.startswith("num_rounds=")]
    result = run_below(
        tmp_path, "runtime=simulation", *settings, "num_rounds=1", "tracking=mlflow", timeout=400
    )
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    state = json.loads((run_dir / "tracking.json").read_text())["mlflow"]
    history = MlflowClient(tracking_uri=state["uri"]).get_metric_history(
        state["run_id"], "test/accuracy"
    )
    assert_same_series(
        [(m.step, m.value) for m in history], csv_series(run_dir, "test", "accuracy")
    )


# ----------------------------------------------------------------------- TensorBoard
def test_tensorboard_event_files_hold_the_same_scalars(tmp_path):
    needs("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = run(tmp_path, "tracking=tensorboard")
    log_dir = Path(json.loads((run_dir / "tracking.json").read_text())["tensorboard"]["log_dir"])
    assert log_dir == tmp_path / "tensorboard" / "run"
    events = EventAccumulator(str(log_dir))
    events.Reload()
    for split, metric in [
        ("test", "accuracy"),
        ("test", "macro_f1"),
        ("clients", "sampled"),
        ("comm", "bytes_up"),
    ]:
        assert_same_series(
            [(e.step, e.value) for e in events.Scalars(f"{split}/{metric}")],
            csv_series(run_dir, split, metric),
        )
    summary = json.loads((run_dir / "summary.json").read_text())
    (final,) = events.Scalars("summary/final_accuracy")
    assert (final.step, final.value) == (2, pytest.approx(summary["final_accuracy"], rel=1e-6))
    assert {"config", "tags", "status"} <= {tag.split("/")[0] for tag in events.Tags()["tensors"]}


# ------------------------------------------------------------------------------- W&B
BLOCK = 32768  # the W&B transaction log is a sequence of 32 KiB blocks of framed records


def wandb_records(path: Path):
    """The protobuf records of an offline run's ``run-<id>.wandb`` file (a 7-byte file
    header, then records framed as crc32 (4), length (2), type (1): full, first, middle,
    last), decoded with W&B's own schema."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, payload = 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (kind == 0 and length == 0):  # the rest of a block is padding
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        payload = chunk if kind in (1, 2) else payload + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            yield record


def finished_wandb_records(path: Path, deadline_s: float = 120.0) -> list:
    """The records of ``path`` once W&B's service has written the run's exit record: on a
    busy machine it may still be writing when the run returns (a condition to wait for;
    the deadline only ends a wait for a writer that hangs)."""
    give_up = time.monotonic() + deadline_s
    while True:
        records = list(wandb_records(path))
        kinds = {r.WhichOneof("record_type") for r in records}
        if {"run", "exit"} <= kinds or time.monotonic() > give_up:
            return records
        time.sleep(0.2)


def item_key(item) -> str:
    """An item's key: W&B keeps one with slashes as its parts (``nested_key``)."""
    return item.key or "/".join(item.nested_key)


def test_wandb_offline_run_holds_config_history_summary_and_the_run_folder(tmp_path, monkeypatch):
    needs("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    sweep = tmp_path / "multirun" / "sweep1"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("{}\n")  # what Hydra writes in a sweep folder
    run_dir = run(tmp_path, "tracking=wandb", folder="multirun/sweep1/0-job")
    run_id = json.loads((run_dir / "tracking.json").read_text())["wandb"]["id"]
    (log,) = (tmp_path / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    records = finished_wandb_records(log)
    kinds = [r.WhichOneof("record_type") for r in records]
    (info,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (info.run_id, info.display_name, info.run_group) == (run_id, "0-job", "multirun/sweep1")
    assert list(info.tags) == ["fedavg", "digits", "pathological", "seed=1"]
    config = {item_key(item): json.loads(item.value_json) for item in info.config.update}
    assert config["method.name"] == "fedavg" and config["num_clients"] == "3"

    history = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {item_key(item): json.loads(item.value_json) for item in r.history.item}
            history[r.history.step.num] = items
    assert sorted(history) == [0, 1, 2]
    assert_same_series(
        [(step, items["test/accuracy"]) for step, items in history.items()],
        csv_series(run_dir, "test", "accuracy"),
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    logged = {
        item_key(item): json.loads(item.value_json)
        for r in records
        if r.WhichOneof("record_type") == "summary"
        for item in r.summary.update
    }
    assert logged["summary/final_accuracy"] == pytest.approx(summary["final_accuracy"])
    (artifact,) = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
    assert artifact.type == "fedimb-run"
    assert {"metrics.csv", "summary.json", "config.yaml"} <= {
        entry.path for entry in artifact.manifest.contents
    }
    assert kinds[-1] == "exit" and records[-1].exit.exit_code == 0


# ----------------------------------------------------------------- choices and failures
def test_unknown_or_missing_tracker_is_a_one_line_error(monkeypatch):
    with pytest.raises(
        ConfigError,
        match=r"^unknown tracking 'neptune' \(choose from: mlflow, none, tensorboard, wandb\)$",
    ):
        check_overrides(["tracking=neptune"])
    real_find_spec = tracking.importlib.util.find_spec
    monkeypatch.setattr(
        tracking.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mlflow" else real_find_spec(name, *a),
    )
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(compose(["tracking=mlflow"]))
    assert str(err.value) == (
        "tracking=mlflow needs the mlflow package, which is not installed: "
        "make install EXTRAS=dev,mlflow"
    )
    tracking.check_tracking(compose(["tracking=none"]))  # nothing to import


class BrokenTracker(tracking.Tracker):
    """Opens, then fails at its first round."""

    name = "broken"
    ended = False

    def begin(self, resumed):
        return {"opened": True}

    def where(self):
        return "nowhere"

    def log_metrics(self, metrics, step):
        if step == 1:
            raise ConnectionError("store went away")

    def end(self, summary, run_dir, completed):
        BrokenTracker.ended = True


def test_a_tracker_that_fails_mid_run_is_switched_off_and_the_run_completes(tmp_path, monkeypatch):
    monkeypatch.setitem(tracking.TRACKERS, "tensorboard", (__name__, "BrokenTracker", "json"))
    lines: list[str] = []
    run_dir = run(tmp_path, "tracking=tensorboard", echo=lines.append)
    assert (
        "[fedimb] warning: broken tracking stopped (round 1): ConnectionError: store went away"
        in lines
    )
    assert json.loads((run_dir / "summary.json").read_text())["completed"] is True
    assert not BrokenTracker.ended  # switched off: nothing more is sent to it
    assert [r for r, _ in csv_series(run_dir, "test", "accuracy")] == [0, 1, 2]


def test_trackers_get_the_local_distribution_but_not_every_clients_accuracy():
    event = {
        "round": 3,
        "test": {"accuracy": 0.5},
        "local": {
            "global": {
                "average": 0.4,
                "worst_10": 0.1,
                "best_10": 0.9,
                "variance": 80.0,
                "accuracy": {"0": 0.1, "1": 0.9},
            }
        },
    }
    assert tracking.round_metrics(event) == {
        "test/accuracy": 0.5,
        "local/accuracy_average": 0.4,
        "local/accuracy_worst_10": 0.1,
        "local/accuracy_best_10": 0.9,
        "local/accuracy_variance": 80.0,
    }


def test_trackers_get_the_validation_scores_and_the_selected_test_accuracy():
    event = {"round": 2, "test": {"accuracy": 0.5}, "validation": {"accuracy": 0.6, "loss": 1.2}}
    assert tracking.round_metrics(event) == {
        "test/accuracy": 0.5,
        "validation/accuracy": 0.6,
        "validation/loss": 1.2,
    }
    summary = {"final_accuracy": 0.5, "selected_test_accuracy": 0.55, "validation_objective": 0.6}
    assert tracking.summary_metrics(summary) == {
        "summary/final_accuracy": 0.5,
        "summary/selected_test_accuracy": 0.55,
        "summary/validation_objective": 0.6,
    }
