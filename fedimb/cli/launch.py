"""Run one experiment end to end: config -> ``flwr run`` -> run folder.

Simulation starts its own SuperLink (simulation mode) on a free port and stops it by
process group when the run ends; deployment connects to the SuperLink the config
names. In both runtimes the configuration travels inside the run and the results
come back through ``flwr run --stream``. ``in_process`` runs the same server loop and
clients in this process (:mod:`fedimb.app.in_process`) and feeds its lines to the same
recorder.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app import checkpoint, config, transport
from fedimb.app.build import experiment_data
from fedimb.app.in_process import run_in_process
from fedimb.cli.node_worker import APP_PACKAGES
from fedimb.cli.preflight import preflight
from fedimb.cli.processes import (
    FederationError,
    Interrupted,
    SuperLink,
    flower_env,
    flwr_home,
    ray_cluster_configured,
    write_connection,
)
from fedimb.cli.run_folder import (
    EVENTS_FILE,
    Echo,
    RunFolderError,
    RunRecorder,
    _echo,
    hold_run_folder,
    read_events,
    release_run_folder,
    unwritable,
)
from fedimb.cli.run_follower import FlwrCli, RunFollower, RunLost
from fedimb.cli.tracking import check_tracking, open_tracking
from fedimb.core.data import partition_summary
from fedimb.core.errors import ConfigError

APP_DIR = Path(__file__).resolve().parents[2]
FLWR_BASE = APP_DIR / ".flwr"


APP_PARTS = ("pyproject.toml", "README.md", *APP_PACKAGES, "conf")


def stage_app(dest: Path) -> Path:
    """A copy of just the Flower App's files (code, configs, pyproject).

    ``flwr run`` walks the whole app directory to build the FAB; next to a multi-GB
    ``.venv`` and run folders that walk takes seconds, on a clean copy milliseconds.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir(parents=True, exist_ok=True)
    for part in APP_PARTS:
        source = APP_DIR / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=ignore)
        else:
            shutil.copy2(source, dest / part)
    return dest


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
    line (``"clients"``, the format ``partition=file`` reads back)."""
    head = json.dumps(summary, indent=1)[:-2]  # without the closing "\n}"
    clients = ",\n  ".join(json.dumps([int(i) for i in ix]) for ix in indices)
    return f'{head},\n "clients": [\n  {clients}\n ]\n}}\n'


def federation_config(cfg: DictConfig) -> dict[str, Any]:
    """The simulation's ``--federation-config``: Flower turns it into its Ray backend's
    ``client_resources`` (one actor per ``num_cpus``/``num_gpus`` share). The GPU share
    is a float (fractions put several actors on one GPU) and is left out at 0, Flower's
    default."""
    federation = {
        "num-supernodes": int(cfg.num_clients),
        "client-resources-num-cpus": int(cfg.runtime.num_cpus_per_client),
    }
    gpus = float(cfg.runtime.get("num_gpus_per_client", 0.0) or 0.0)
    if gpus > 0:
        federation["client-resources-num-gpus"] = gpus
    return federation


def simulation_env(cfg: DictConfig, home: Path) -> dict[str, str]:
    """The Flower processes' environment; ``runtime.ray_address`` reaches the simulation's
    ``ray.init`` as ``RAY_ADDRESS`` (Flower's backend config has no address)."""
    env = flower_env(home)
    if cfg.runtime.get("ray_address"):
        env["RAY_ADDRESS"] = str(cfg.runtime.ray_address)
    elif not ray_cluster_configured(env):
        env["RAY_ADDRESS"] = "local"  # a private Ray, never a cluster a stale record names
    return env


LinkGone = Callable[[], "str | None"]  # why the SuperLink is known to be gone, else None

SUPERLINK_RUN = (
    "superlink_run.json"  # the deployed run's Flower run id and SuperLink, for fedimb attach
)


def follower_for(
    cfg: DictConfig,
    run_dir: Path,
    recorder: RunRecorder,
    cli: FlwrCli,
    link_gone: LinkGone = lambda: None,
) -> RunFollower:
    """A follower that feeds ``recorder``; a deployed run's id goes to the run folder
    as soon as Flower names it (``fedimb attach`` reads it)."""

    def remember(run_id: int) -> None:
        if cfg.runtime.name == "deployment":
            record = {"run_id": run_id, "address": str(cfg.runtime.address)}
            (run_dir / SUPERLINK_RUN).write_text(json.dumps(record) + "\n")

    return RunFollower(
        cli,
        recorder.feed,
        complete=lambda: recorder.end is not None,
        notice=recorder.echo,
        on_started=remember,
        link_gone=link_gone,
        patience=float(cfg.runtime.get("reattach_seconds") or RunFollower.patience),
    )


@contextlib.contextmanager
def deployment_cli(cfg: DictConfig) -> Iterator[tuple[FlwrCli, LinkGone]]:
    """The ``flwr`` commands for the SuperLink a deployment names, in a private
    FLWR_HOME; that SuperLink is never known to be gone (it may come back)."""
    runtime = cfg.runtime
    with flwr_home(
        str(runtime.address),
        insecure=bool(runtime.insecure),
        root_certificates=runtime.get("root_certificates"),
        base=FLWR_BASE,
    ) as (home, connection):
        yield FlwrCli(connection, home), lambda: None


@contextlib.contextmanager
def simulation_cli(cfg: DictConfig, run_dir: Path) -> Iterator[tuple[FlwrCli, LinkGone]]:
    """The ``flwr`` commands for a simulation SuperLink of this front end's own, which
    stops (with the run's processes) when the block ends; once its process has exited
    there is nothing to wait for."""
    with flwr_home(None, base=FLWR_BASE) as (home, connection):
        env = simulation_env(cfg, home)
        with SuperLink(run_dir / "superlink.log", simulation=True, env=env) as superlink:
            superlink.wait_ready()
            write_connection(home, connection, superlink.address)

            def gone() -> str | None:
                return (
                    None
                    if superlink.alive()
                    else f"the simulation's SuperLink exited; see {superlink.log_path}"
                )

            yield FlwrCli(connection, home), gone


def leave_or_stop(cfg: DictConfig, run_dir: Path, follower: RunFollower, echo: Echo) -> None:
    """What a front end that gives up on a deployed run (interrupted, lost, failed)
    does with it, in one line: stop it on the SuperLink (``flwr stop``), or with
    ``runtime.detach=true`` leave it running."""
    if cfg.runtime.name != "deployment" or follower.run_id is None or follower.complete():
        return
    where = f"the SuperLink at {cfg.runtime.address}"
    if cfg.runtime.get("detach"):
        follower.close()
        echo(
            f"[fedimb] run {follower.run_id} goes on at {where} (runtime.detach=true); "
            f"follow it with: fedimb attach {run_dir}"
        )
    else:
        echo(f"[fedimb] {follower.stop_run()} at {where}")


def run_flower(cfg: DictConfig, run_dir: Path, recorder: RunRecorder, strategy) -> int:
    """The run through the configured runtime, each line of its stream to ``recorder``;
    the exit code of ``flwr run`` (or of the in-process loop). A deployed run that the
    front end gives up on is stopped on its SuperLink, unless ``runtime.detach``."""
    if cfg.runtime.name == "in_process":
        return run_in_process(cfg, recorder.feed, strategy)
    simulation = cfg.runtime.name == "simulation"
    with simulation_cli(cfg, run_dir) if simulation else deployment_cli(cfg) as (cli, gone):
        follower = follower_for(cfg, run_dir, recorder, cli, gone)
        run_args = cli.run_args(
            stage_app(cli.home / "app"),
            {"config": transport.encode(cfg)},
            federation_config(cfg) if simulation else None,
        )
        try:
            return follower.start(run_args)
        except RunLost as lost:  # a failed run like any other: its summary, the hint to resume
            recorder.errors.append(str(lost))
            leave_or_stop(cfg, run_dir, follower, recorder.echo)
            return 1
        except BaseException:
            leave_or_stop(cfg, run_dir, follower, recorder.echo)
            raise
        finally:
            recorder.flower_status = follower.final_status


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
                f"[fedimb] the run ended; writing the rest of its run folder from {run_dir / EVENTS_FILE}"
            )
            return record_run(cfg, run_dir, recorder, lambda: 0, tracking)
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
            f"the run failed ({reason or f'flwr exited with code {code}'}); see {run_dir / 'flwr.log'}{hint}"
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
        json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return True
    return False


def attach_experiment(run_dir: Path, overrides: list[str], echo: Echo = _echo) -> Path:
    """Follow a deployed run that an earlier front end started (detached, interrupted
    or lost) to its end and fill in its run folder: the events it holds are not
    repeated. ``overrides`` may change ``runtime.*`` (a new address, certificates)."""
    run_dir = run_dir.resolve()
    cfg = OmegaConf.merge(
        OmegaConf.load(run_dir / "config.yaml"), OmegaConf.from_dotlist(overrides)
    )
    if cfg.runtime.name != "deployment":
        raise ConfigError(
            f"{run_dir} ran with runtime={cfg.runtime.name}: only a deployed run goes on without "
            f"its front end (continue it with: fedimb resume {run_dir})"
        )
    try:
        run_id = int(json.loads((run_dir / SUPERLINK_RUN).read_text())["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{run_dir} names no Flower run ({SUPERLINK_RUN} is missing or unreadable): its run "
            f"never started on a SuperLink; start it again or continue it with: fedimb resume "
            f"{run_dir}"
        ) from None
    from fedimb.cli.report import completed_config  # pandas and numpy: only when attaching

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
                f"the SuperLink at {cfg.runtime.address} does not know run {run_id} (it restarted, or "
                f"runtime.address names another one); continue the run with: fedimb resume {run_dir}"
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
        events = [event["event"] for event in read_events(run_dir / EVENTS_FILE)]
    except OSError:
        return 0
    starts = [i for i, event in enumerate(events) if event == "start"]
    return len(events) - starts[-1] if starts else 0
