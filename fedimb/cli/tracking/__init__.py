"""Experiment tracking: ``tracking=none|mlflow|tensorboard|wandb``.

The front end's :class:`~fedimb.cli.rundir.folder.RunRecorder` hands each accepted event of
the stream to a :class:`TrackedRun`, whatever the runtime (simulation, deployment,
in_process), so one code path logs every run: the resolved configuration as parameters,
each round's metrics at ``step=round``, the summary, and the run folder's files. Each
tracker's package is an optional extra, imported only when chosen; a missing one is a
one-line error before the run starts. A tracker that fails during a run is switched off
with one warning: the run and its folder go on.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fedimb.cli.rundir.files import metric_rows
from fedimb.cli.tracking.common import RunInfo, Tracker, TrackingError, run_info
from fedimb.core.metrics import DISTRIBUTION_STATS

# name -> (module, class, the package it needs)
TRACKERS = {
    "mlflow": ("fedimb.cli.tracking.mlflow_tracker", "MlflowTracker", "mlflow"),
    "tensorboard": ("fedimb.cli.tracking.tensorboard_tracker", "TensorBoardTracker", "tensorboard"),
    "wandb": ("fedimb.cli.tracking.wandb_tracker", "WandbTracker", "wandb"),
}
STATE_FILE = "tracking.json"  # in the run folder: which tracker run a resumed run continues

__all__ = [
    "RunInfo",
    "Tracker",
    "TrackingError",
    "TrackedRun",
    "check_tracking",
    "open_tracking",
    "round_metrics",
]


def _name(cfg: DictConfig) -> str:
    return str(cfg.tracking.name)


def check_tracking(cfg: DictConfig) -> None:
    """A one-line error for an unknown tracker or one whose package is not installed."""
    name = _name(cfg)
    if name == "none":
        return
    if name not in TRACKERS:
        raise TrackingError(f"unknown tracking '{name}' (choose from: none, {', '.join(TRACKERS)})")
    package = TRACKERS[name][2]
    if importlib.util.find_spec(package) is None:
        raise TrackingError(
            f"tracking={name} needs the {package} package, which is not installed: "
            f"make install EXTRAS=dev,{name}"
        )


def round_metrics(event: dict[str, Any]) -> dict[str, float]:
    """A round event's values as ``split/metric`` keys (the rows of metrics.csv), but of
    the local evaluation only the distribution: each client's accuracy (up to one per
    client of 10,000) stays in metrics.csv, which the tracker keeps as an artifact."""
    return {
        f"{split}/{metric}": value
        for split, metric, value in metric_rows(event)
        if not (split == "local" and "accuracy_client_" in metric)
    }


SUMMARY_METRICS = (
    "final_accuracy",
    "final_macro_f1",
    "final_loss",
    "best_accuracy",
    "best_round",
    "final_validation_accuracy",
    "validation_best_accuracy",
    "validation_best_round",
    "selected_test_accuracy",
    "validation_objective",
    "rounds",
    "bytes_up",
    "bytes_down",
    "round_to_target",
    "bytes_to_target",
    "wall_seconds",
    "server_seconds",
    "first_round_seconds",
    "mean_round_seconds_after_first",
    "privacy_epsilon",
    *(f"local_accuracy_{stat}" for stat in DISTRIBUTION_STATS),
)


def summary_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """summary.json's results (not its settings) as ``summary/*``; absent ones left out."""
    return {
        f"summary/{key}": float(summary[key])
        for key in SUMMARY_METRICS
        if summary.get(key) is not None
    }


class TrackedRun:
    """One run's tracker between the event stream and the tracker's store."""

    def __init__(self, tracker: Tracker | None, run_dir: Path, echo: Callable[[str], None]):
        self.tracker = tracker
        self.run_dir = run_dir
        self.echo = echo

    def _guard(self, action: str, call: Callable[[Tracker], Any]) -> Any:
        """``call(tracker)``; a failure switches the tracker off with one warning."""
        if self.tracker is None:
            return None
        try:
            return call(self.tracker)
        except Exception as err:  # noqa: BLE001 - a tracker must not end the run it logs
            self.echo(
                f"[fedimb] warning: {self.tracker.name} tracking stopped ({action}): "
                f"{type(err).__name__}: {err}"
            )
            self.tracker = None
            return None

    def log_round(self, event: dict[str, Any]) -> None:
        """The recorder's callback for each round it accepts (a round repeated by a
        restarted attempt is logged again at the same step)."""
        metrics = round_metrics(event)
        self._guard(
            f"round {event['round']}",
            lambda tracker: tracker.log_metrics(metrics, int(event["round"])),
        )

    def end(self, summary: dict[str, Any] | None) -> None:
        """The summary, the run folder's files as artifacts, and the run's status."""
        completed = bool(summary and summary.get("completed"))
        self._guard(
            "end",
            lambda tracker: tracker.end(summary_metrics(summary or {}), self.run_dir, completed),
        )
        self.tracker = None


def open_tracking(cfg: DictConfig, run_dir: Path, echo: Callable[[str], None]) -> TrackedRun:
    """Start the configured tracker's run (continuing the one in the run folder's
    ``tracking.json`` on resume); ``tracking=none`` gives a run that logs nothing.
    A store that cannot be reached here is a one-line :class:`TrackingError`."""
    check_tracking(cfg)
    name = _name(cfg)
    if name == "none":
        return TrackedRun(None, run_dir, echo)
    module, cls, _ = TRACKERS[name]
    tracker_class = getattr(importlib.import_module(module), cls)
    state_file = run_dir / STATE_FILE
    state = json.loads(state_file.read_text()) if cfg.get("resume") and state_file.is_file() else {}
    tracker = tracker_class(cfg.tracking, run_info(cfg, run_dir))
    try:
        state = tracker.begin(state.get(name) or {})
    except Exception as err:
        raise TrackingError(
            f"tracking={name}: cannot start the run: {type(err).__name__}: {err}"
        ) from err
    state_file.write_text(json.dumps({name: state}, indent=1) + "\n")
    echo(f"[fedimb] tracking: {tracker.where()}")
    return TrackedRun(tracker, run_dir, echo)
