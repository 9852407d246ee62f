"""The end of a sweep (``fedimb -m ...``): its folder and the command that compares its runs.

A Hydra callback (registered under ``hydra.callbacks`` in conf/config.yaml) runs once
after every job of a sweep returned, in the launching process, whichever launcher ran
the jobs; each job has printed its own run folder by then.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


def sweep_runs(sweep_dir: Path) -> tuple[int, int]:
    """(completed, failed) runs of a sweep: its job folders (each has Hydra's ``.hydra``)
    whose ``summary.json`` says completed, and the others (a missing or malformed
    summary.json counts as failed; ``fedimb report`` says why). A job that ran on several
    seeds (a ``fedimb tune`` trial: one run per seed in ``s<seed>/``) completed where every
    seed's run it holds did."""
    from fedimb.cli.rundir.reader import MalformedFile, read_summary

    def completed(job: Path) -> bool:
        own = job / "summary.json"
        summaries = [own] if own.is_file() else sorted(job.glob("s*/summary.json")) or [own]
        try:
            return all(bool(read_summary(summary).get("completed")) for summary in summaries)
        except MalformedFile:
            return False

    jobs = [p for p in sweep_dir.iterdir() if (p / ".hydra").is_dir()] if sweep_dir.is_dir() else []
    done = sum(map(completed, jobs))
    return done, len(jobs) - done


def sweep_end_lines(sweep_dir: Path) -> list[str]:
    """The sweep's last two lines: how many runs completed, its folder, and the report command."""
    sweep_dir = sweep_dir.resolve()
    completed, failed = sweep_runs(sweep_dir)
    total = completed + failed
    return [
        f"[fedimb] sweep of {total} run{'s' if total != 1 else ''} done "
        f"({completed} completed, {failed} failed): {sweep_dir}",
        f"[fedimb] compare them with: fedimb report {sweep_dir}",
    ]


#: the failed runs of the last sweep this process ran: ``fedimb -m`` then exits with 1
failed_runs = 0


class SweepEnd(Callback):
    """Prints :func:`sweep_end_lines` when a sweep ends, and keeps its failed runs' count."""

    def __init__(self) -> None:
        self.sweep_dir: Path | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.sweep_dir = Path(
            str(config.hydra.sweep.dir)
        ).resolve()  # before any job changes the cwd

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global failed_runs
        sweep_dir = self.sweep_dir or Path(str(config.hydra.sweep.dir))
        failed_runs = sweep_runs(sweep_dir.resolve())[1]
        sys.stdout.write("".join(f"{line}\n" for line in sweep_end_lines(sweep_dir)))
        sys.stdout.flush()
