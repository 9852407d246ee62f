"""``fedimb attach``: follow a deployed run that went on without its front end.

A deployed run lives on its SuperLink; the run folder names it (``superlink_run.json``).
Attaching follows its log to the end, skips the events the run folder holds already,
and writes the rest of the run folder as :func:`fedimb.cli.launch.experiment.record_run` does.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from fedimb.cli.federation.processes import FederationError
from fedimb.cli.launch.experiment import record_run
from fedimb.cli.launch.flower_run import SUPERLINK_RUN, deployment_cli, follower_for
from fedimb.cli.rundir.access import hold_run_folder, release_run_folder
from fedimb.cli.rundir.events import EVENTS_FILE, read_events
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.cli.rundir.progress import Echo, _echo
from fedimb.cli.rundir.reader import read_json, run_folder_config
from fedimb.core.errors import ConfigError


def attach_experiment(run_dir: Path, overrides: list[str], echo: Echo = _echo) -> Path:
    """Follow a deployed run that an earlier front end started (detached, interrupted
    or lost) to its end and fill in its run folder: the events it holds are not
    repeated. ``overrides`` may change ``runtime.*`` (a new address, certificates)."""
    run_dir = run_dir.resolve()
    cfg = run_folder_config(run_dir, overrides)  # checked before any class it names is imported
    if cfg.runtime.name != "deployment":
        raise ConfigError(
            f"{run_dir} ran with runtime={cfg.runtime.name}: only a deployed run goes on without "
            f"its front end (continue it with: fedimb resume {run_dir})"
        )
    try:
        run_id = int(read_json(run_dir / SUPERLINK_RUN)["run_id"])
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{run_dir} names no Flower run ({SUPERLINK_RUN} is missing or unreadable): its run "
            f"never started on a SuperLink; start it again or continue it with: fedimb resume "
            f"{run_dir}"
        ) from None
    from fedimb.cli.results.run_records import completed_config  # numpy: only when attaching

    if completed_config(run_dir) is not None:
        raise ConfigError(f"{run_dir} is complete already (summary.json): nothing to attach to")
    hold_run_folder(run_dir)
    try:
        return _attach(cfg, run_dir, run_id, echo)
    finally:
        release_run_folder(run_dir)


def _attach(cfg: DictConfig, run_dir: Path, run_id: int, echo: Echo) -> Path:
    """:func:`attach_experiment` once this process holds the run folder."""
    known = events_of_last_attempt(run_dir)
    recorder = RunRecorder(run_dir, cfg, echo, resume=True)
    with deployment_cli(cfg) as (cli, _):
        if cli.status(run_id) is None:
            raise FederationError(
                f"the SuperLink at {cfg.runtime.address} does not know run {run_id} (it "
                "restarted, or runtime.address names another one); continue the run with: "
                f"fedimb resume {run_dir}"
            )
        echo(
            f"[fedimb] attaching to run {run_id} at {cfg.runtime.address} "
            f"({len(recorder.rounds)} round records in {run_dir.name})"
        )
        follower = follower_for(cfg, run_dir, recorder, cli)
        return record_run(cfg, run_dir, recorder, lambda: follower.attach(run_id, known))


def events_of_last_attempt(run_dir: Path) -> int:
    """How many events of the run folder's newest attempt (from its last ``start``)
    events.jsonl holds: the ones a re-attached stream of that attempt repeats."""
    try:
        # every event line counts, mistyped or not: the stream repeats them all
        events = [event["event"] for event in read_events(run_dir / EVENTS_FILE, typed=False)]
    except OSError:
        return 0
    starts = [i for i, event in enumerate(events) if event == "start"]
    return len(events) - starts[-1] if starts else 0
