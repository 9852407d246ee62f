"""Weights & Biases: one W&B run per fedimb run.

``wandb.init`` with the resolved configuration, ``wandb.log(..., step=round)``, the
summary, and the run folder as an artifact of type ``fedimb-run``. ``tracking.mode`` (or
``WANDB_MODE``) ``offline`` keeps everything on disk under ``tracking.dir`` for a later
``wandb sync``. A sweep's jobs share a W&B group named after the sweep folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedimb.cli.tracking.common import Tracker


class WandbTracker(Tracker):
    name = "wandb"

    def begin(self, resumed: dict[str, Any]) -> dict[str, Any]:
        import wandb

        tags = self.run.tags
        settings = self.settings
        directory = Path(str(settings.get("dir") or self.run.output_root)).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        self.wandb_run = wandb.init(
            project=str(settings.project),
            entity=settings.get("entity"),
            mode=settings.get("mode"),
            dir=str(directory),
            name=self.run.name,
            group=self.run.group,
            id=resumed.get("id"),
            resume="allow" if resumed.get("id") else None,
            config=self.run.params,
            tags=[tags["method"], tags["dataset"], tags["partition"], f"seed={tags['seed']}"],
            reinit="create_new",  # a sweep's jobs run one after another in one process
            settings=wandb.Settings(console="off", quiet=True),  # the front end owns stdout
        )
        return {"id": self.wandb_run.id, "dir": str(directory)}

    def where(self) -> str:
        mode = self.wandb_run.settings.mode
        return f"W&B run {self.wandb_run.id} ({mode}) in {Path(self.wandb_run.dir).parent}"

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.wandb_run.log(metrics, step=step)

    def end(self, summary: dict[str, float], run_dir: Path, completed: bool) -> None:
        import wandb

        self.wandb_run.summary.update(summary)
        artifact = wandb.Artifact(f"run-{self.wandb_run.id}", type="fedimb-run")
        artifact.add_dir(str(run_dir))
        self.wandb_run.log_artifact(artifact)
        self.wandb_run.finish(exit_code=0 if completed else 1)
