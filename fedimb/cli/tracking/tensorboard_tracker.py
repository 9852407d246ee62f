"""TensorBoard: event files, one folder per run (``<log_dir>/<sweep>/<run>``).

Written with ``torch.utils.tensorboard`` (the ``tensorboard`` package provides its
protobufs), so ``tensorboard --logdir <output root>/tensorboard`` lays every run side by
side. The scalars are the tracker-wide ``split/metric`` names at ``step=round``; the resolved
configuration is one text entry (``config``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedimb.cli.tracking.common import Tracker


class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def begin(self, resumed: dict[str, Any]) -> dict[str, Any]:
        from torch.utils.tensorboard import SummaryWriter

        root = Path(
            str(self.settings.get("log_dir") or self.run.output_root / "tensorboard")
        ).resolve()
        self.log_dir = (
            Path(resumed["log_dir"])
            if resumed.get("log_dir")
            else root / (self.run.group or "") / self.run.name
        )
        self.writer = SummaryWriter(log_dir=str(self.log_dir))
        if not resumed:
            rows = "\n".join(f"| {k} | {v} |" for k, v in sorted(self.run.params.items()))
            self.writer.add_text("config", "| setting | value |\n|---|---|\n" + rows, global_step=0)
            tags = ", ".join(f"{k}={v}" for k, v in self.run.tags.items())
            self.writer.add_text("tags", tags, global_step=0)
        self.writer.flush()
        return {"log_dir": str(self.log_dir)}

    def where(self) -> str:
        return f"TensorBoard event files in {self.log_dir}"

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def end(self, summary: dict[str, float], run_dir: Path, completed: bool) -> None:
        if summary:
            self.log_metrics(summary, step=int(summary.get("summary/rounds", 0)))
        self.writer.add_text("status", "completed" if completed else "failed", global_step=0)
        self.writer.close()
