"""MLflow: one MLflow run per fedimb run, through ``MlflowClient`` (no global state).

The store defaults to a SQLite file under the output root (``mlflow ui --backend-store-uri
sqlite:///outputs/mlflow.db`` browses it) with artifacts beside it in ``mlartifacts/``;
``tracking.uri`` points at a server instead. A sweep's jobs are nested (MLflow's
``mlflow.parentRunId`` tag) under one parent run named after the sweep folder.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from fedimb.cli.tracking.common import Tracker

BATCH = 100  # MLflow accepts at most 100 parameters per log_batch call


class MlflowTracker(Tracker):
    name = "mlflow"

    def begin(self, resumed: dict[str, Any]) -> dict[str, Any]:
        from mlflow.tracking import MlflowClient

        for noisy in ("mlflow", "alembic"):  # a new store's schema migrations log at INFO
            logging.getLogger(noisy).setLevel(logging.WARNING)

        self.uri = self._uri()
        self.client = MlflowClient(tracking_uri=self.uri)
        if resumed.get("run_id"):
            self.run_id = resumed["run_id"]
            self.parent_id = resumed.get("parent_run_id")
            self.client.update_run(self.run_id, status="RUNNING")
            return resumed
        experiment_id = self._experiment_id()
        self.parent_id = self._sweep_parent(experiment_id) if self.run.group else None
        tags = dict(self.run.tags)
        if self.parent_id:
            tags["mlflow.parentRunId"] = self.parent_id
        run = self.client.create_run(experiment_id, tags=tags, run_name=self.run.name)
        self.run_id = run.info.run_id
        self._log_params()
        return {"run_id": self.run_id, "parent_run_id": self.parent_id, "uri": self.uri}

    def _uri(self) -> str:
        uri = self.settings.get("uri")
        if uri:
            return str(uri)
        self.run.output_root.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.run.output_root / 'mlflow.db'}"

    def _experiment_id(self) -> str:
        name = str(self.settings.experiment)
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        local = self.uri.startswith(("sqlite:", "file:")) or "://" not in self.uri
        location = (self.run.output_root / "mlartifacts").as_uri() if local else None
        # the UI then opens it on its runs and charts (model training), not on GenAI traces
        return self.client.create_experiment(
            name,
            artifact_location=location,
            tags={"mlflow.experimentKind": "custom_model_development"},
        )

    def _sweep_parent(self, experiment_id: str) -> str:
        """The sweep's parent run, created by its first job."""
        found = self.client.search_runs(
            [experiment_id],
            filter_string=f"tags.`fedimb.sweep` = '{self.run.group}'",
            max_results=1,
        )
        if found:
            return found[0].info.run_id
        parent = self.client.create_run(
            experiment_id,
            tags={"fedimb.sweep": self.run.group},
            run_name=f"sweep {self.run.group}",
        )
        return parent.info.run_id

    def _log_params(self) -> None:
        from mlflow.entities import Param

        params = [Param(k, v) for k, v in sorted(self.run.params.items())]
        for start in range(0, len(params), BATCH):
            self.client.log_batch(self.run_id, params=params[start : start + BATCH])

    def where(self) -> str:
        return f"MLflow run {self.run_id} in {self.uri}"

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, value, now, step) for key, value in metrics.items()]
        for start in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def end(self, summary: dict[str, float], run_dir: Path, completed: bool) -> None:
        if summary:  # at the last round, so that a chart of summary/* sits at the run's end
            self.log_metrics(summary, step=int(summary.get("summary/rounds", 0)))
        self.client.log_artifacts(self.run_id, str(run_dir))
        status = "FINISHED" if completed else "FAILED"
        self.client.set_terminated(self.run_id, status=status)
        if self.parent_id:  # the sweep's run ends with its latest job
            self.client.set_terminated(self.parent_id, status="FINISHED")
