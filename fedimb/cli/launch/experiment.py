"""Run one experiment end to end: config -> run folder -> its runtime -> results.

The configuration is checked and written before any process starts; the run goes
through its runtime (:mod:`fedimb.cli.launch.flower_run`); its results, or the one line that
says why it failed or how to continue it, come from the run folder's recorder.
"""

from __future__ import annotations

import errno
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration import compose as config
from fedimb.app.configuration.build import experiment_data
from fedimb.app.privacy import account as privacy_account
from fedimb.app.server import checkpoint
from fedimb.cli.federation.processes import FederationError, Interrupted
from fedimb.cli.launch.flower_run import SUPERLINK_RUN, run_flower
from fedimb.cli.launch.preflight import preflight
from fedimb.cli.rundir.access import (
    RunFolderError,
    hold_run_folder,
    release_run_folder,
    unwritable,
)
from fedimb.cli.rundir.events import EVENTS_FILE
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.cli.rundir.progress import Echo, _echo
from fedimb.cli.rundir.reader import MalformedFile, read_summary
from fedimb.cli.tracking import check_tracking, open_tracking
from fedimb.core.data import partition_summary
from fedimb.core.data.partition_file import as_file_entry


def prepare_run_dir(cfg: DictConfig, run_dir: Path):
    """Write config.yaml and partition.json; fails early (before writing anything) on bad
    data, partitions, devices or method settings. Returns the strategy :func:`preflight` built."""
    data = experiment_data(cfg)
    strategy = preflight(cfg, data)
    summary = partition_summary(data.partition.counts, data.partition.groups)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise unwritable(run_dir, err, "config.yaml, partition.json") from err
    hold_run_folder(run_dir)  # before a file is written: another run, resume or attach may write it
    try:
        OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
        (run_dir / "partition.json").write_text(partition_json(summary, data.partition.indices))
    except OSError as err:
        raise unwritable(run_dir, err, "config.yaml, partition.json") from err
    return strategy


def partition_json(summary: dict[str, Any], indices) -> str:
    """partition.json: the summary, then every client's training indices one client per
    line (``"clients"``, the format ``partition=file`` reads back; a contiguous block as
    ``{"range": [start, stop]}``)."""
    head = json.dumps(summary, indent=1)[:-2]  # without the closing "\n}"
    clients = ",\n  ".join(json.dumps(as_file_entry(ix)) for ix in indices)
    return f'{head},\n "clients": [\n  {clients}\n ]\n}}\n'


def interrupted_message(cfg: DictConfig, run_dir: Path, recorder: RunRecorder) -> str:
    """The one line an interrupted run ends with: how far it got and how to continue.
    The ServerApp checkpoints a round before it reports it, so a reported round can be resumed."""
    done = max((int(r["round"]) for r in recorder.rounds), default=0)
    total = int(recorder.start.get("num_rounds") or cfg.num_rounds)
    where = f"after round {done} of {total}" if done > 0 else "before its first round ended"
    if (
        cfg.runtime.name == "deployment"
        and cfg.runtime.get("detach")
        and (run_dir / SUPERLINK_RUN).exists()
    ):
        return f"interrupted {where}; the run goes on at its SuperLink: fedimb attach {run_dir}"
    if not cfg.checkpoint.enabled:
        return f"interrupted {where}; nothing to resume (checkpoint.enabled=false)"
    if done == 0:
        return f"interrupted {where}; nothing was checkpointed, so there is nothing to resume"
    return f"interrupted {where}; continue with: fedimb resume {run_dir}"


def run_experiment(cfg: DictConfig, run_dir: Path, echo: Echo = _echo) -> Path:
    """Validate, prepare the run folder, run through Flower and write the results.

    With ``resume=true`` and an existing run folder, the results continue in it.
    Raises :class:`fedimb.core.errors.FedimbError` subclasses with one-line messages.
    """
    cfg = config.finalize(cfg)
    check_tracking(cfg)
    if cfg.checkpoint.get("run_id") is None:  # names this run's checkpoint; kept in config.yaml
        cfg.checkpoint.run_id = uuid.uuid4().hex[:12]
    run_dir = run_dir.resolve()
    try:
        if (
            cfg.get("resume") and run_dir.is_dir()
        ):  # refused before any check or load if another process writes it
            hold_run_folder(run_dir)
        strategy = prepare_run_dir(cfg, run_dir)
        tracking = open_tracking(cfg, run_dir, echo)
        recorder = RunRecorder(
            run_dir, cfg, echo, resume=bool(cfg.get("resume")), on_round=tracking.log_round
        )
        if cfg.get("resume") and ended_unwritten(recorder, run_dir):
            echo(
                "[fedimb] the run ended; writing the rest of its run folder from "
                f"{run_dir / EVENTS_FILE}"
            )
            return record_run(cfg, run_dir, recorder, lambda: 0, tracking)
        if str(cfg.privacy.name) != "none" and not cfg.get("resume"):
            echo(f"[fedimb] {privacy_account.plan_line(cfg, strategy.total_rounds())}")
        recorder.announce()
        return record_run(
            cfg, run_dir, recorder, lambda: run_flower(cfg, run_dir, recorder, strategy), tracking
        )
    finally:
        release_run_folder(run_dir)


def record_run(
    cfg: DictConfig, run_dir: Path, recorder: RunRecorder, follow: Callable[[], int], tracking=None
) -> Path:
    """Follow the run (``follow`` returns flwr's exit code), then write the run folder's
    results; a failed or interrupted run raises its one-line error."""
    summary = None
    try:
        try:
            code = follow()
        except (
            KeyboardInterrupt
        ) as stop:  # Ctrl-C or SIGTERM; run_flower's with-blocks stopped Flower
            raise Interrupted(
                interrupted_message(cfg, run_dir, recorder), getattr(stop, "exit_code", 130)
            ) from None
        finally:
            recorder.close()
        try:
            summary = recorder.finish()
        except RunFolderError as err:
            unwritten: RunFolderError | None = err
        else:
            unwritten = None
            remove_checkpoint(cfg, recorder)
    finally:  # also when the run is interrupted: the tracker's run ends as failed
        if tracking is not None:
            tracking.end(summary)
    reason = recorder.failure_reason()
    if reason is not None or code != 0:  # the run's own failure first: a full disk may be its cause
        hint = ""
        # a run that ended (even with no client trained) removed its checkpoint: nothing to resume
        if (
            cfg.checkpoint.enabled
            and recorder.end is None
            and any(r["round"] > 0 for r in recorder.rounds)
        ):
            hint = f"; continue it with: fedimb resume {run_dir}"
        raise FederationError(
            f"the run failed ({reason or f'flwr exited with code {code}'}); "
            f"see {run_dir / 'flwr.log'}{hint}"
        )
    if unwritten is not None:
        full = getattr(unwritten.__cause__, "errno", None) == errno.ENOSPC
        raise RunFolderError(
            f"{unwritten}; {'free some space' if full else 'make it writable'}, then complete "
            f"the run folder with: fedimb resume {run_dir}"
        ) from unwritten
    recorder.echo(recorder.done_line())
    return run_dir


def remove_checkpoint(cfg: DictConfig, recorder: RunRecorder) -> None:
    """Remove the checkpoint of a run that ended, now that its run folder is complete.
    Outside a deployment the ServerApp ran on this machine and left it for this: until
    the run folder's last file is written, ``fedimb resume`` can still finish it."""
    if cfg.checkpoint.enabled and recorder.end is not None and cfg.runtime.name != "deployment":
        checkpoint.checkpoint_path(cfg).unlink(missing_ok=True)


def ended_unwritten(recorder: RunRecorder, run_dir: Path) -> bool:
    """Whether the run folder's last attempt ended (its ``end`` event is in events.jsonl)
    without a summary.json: a full disk stopped the front end after the run. Resuming it
    only writes the missing files."""
    if recorder.end is None:
        return False
    try:
        read_summary(run_dir / "summary.json")
    except MalformedFile:
        return True
    return False
