"""Run one experiment end to end: config -> ``flwr run`` -> run folder.

Simulation starts its own SuperLink (simulation mode) on a free port and stops it by
process group when the run ends; deployment connects to the SuperLink the config
names. In both runtimes the configuration travels inside the run and the results
come back through ``flwr run --stream``. ``in_process`` runs the same server loop and
clients in this process (:mod:`fedimb.app.in_process`) and feeds its lines to the same
recorder.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app import config, transport
from fedimb.app.build import experiment_data
from fedimb.app.in_process import run_in_process
from fedimb.cli.processes import (
    FederationError,
    Interrupted,
    SuperLink,
    flower_env,
    flwr_home,
    flwr_run,
    ray_cluster_configured,
    write_connection,
)
from fedimb.cli.node_worker import APP_PACKAGES
from fedimb.cli.preflight import preflight
from fedimb.cli.run_folder import Echo, RunFolderError, RunRecorder, _echo, unwritable
from fedimb.cli.tracking import check_tracking, open_tracking
from fedimb.core.data import partition_summary

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


def run_flower(cfg: DictConfig, run_dir: Path, on_line: Echo, strategy) -> int:
    """The run through the configured runtime, each line of its stream to ``on_line``;
    the exit code of ``flwr run`` (or of the in-process loop)."""
    run_config = {"config": transport.encode(cfg)}
    runtime = cfg.runtime
    if runtime.name == "simulation":
        with flwr_home(None, base=FLWR_BASE) as (home, connection):
            env = simulation_env(cfg, home)
            with SuperLink(run_dir / "superlink.log", simulation=True, env=env) as superlink:
                superlink.wait_ready()
                write_connection(home, connection, superlink.address)
                return flwr_run(
                    stage_app(home / "app"), connection, home, run_config=run_config,
                    federation_config=federation_config(cfg), on_line=on_line,
                )
    if runtime.name == "in_process":
        return run_in_process(cfg, on_line, strategy)
    with flwr_home(
        str(runtime.address), insecure=bool(runtime.insecure),
        root_certificates=runtime.get("root_certificates"), base=FLWR_BASE,
    ) as (home, connection):
        return flwr_run(stage_app(home / "app"), connection, home, run_config=run_config, on_line=on_line)


def interrupted_message(cfg: DictConfig, run_dir: Path, recorder: RunRecorder) -> str:
    """The one line an interrupted run ends with: how far it got and how to continue.
    The ServerApp checkpoints a round before it reports it, so a reported round can be resumed."""
    done = max((int(r["round"]) for r in recorder.rounds), default=0)
    total = int(recorder.start.get("num_rounds") or cfg.num_rounds)
    where = f"after round {done} of {total}" if done > 0 else "before its first round ended"
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
    strategy = prepare_run_dir(cfg, run_dir)
    tracking = open_tracking(cfg, run_dir, echo)
    recorder = RunRecorder(run_dir, cfg, echo, resume=bool(cfg.get("resume")), on_round=tracking.log_round)
    recorder.announce()
    summary = None
    try:
        try:
            code = run_flower(cfg, run_dir, recorder.feed, strategy)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM; run_flower's with-blocks stopped Flower
            raise Interrupted(interrupted_message(cfg, run_dir, recorder), getattr(stop, "exit_code", 130)) from None
        finally:
            recorder.close()
        try:
            summary = recorder.finish()
        except RunFolderError as err:
            unwritten: RunFolderError | None = err
        else:
            unwritten = None
    finally:  # also when the run is interrupted: the tracker's run ends as failed
        tracking.end(summary)
    reason = recorder.failure_reason()
    if reason is not None or code != 0:  # the run's own failure first: a full disk may be its cause
        hint = ""
        # a run that ended (even with no client trained) removed its checkpoint: nothing to resume
        if cfg.checkpoint.enabled and recorder.end is None and any(r["round"] > 0 for r in recorder.rounds):
            hint = f"; continue it with: fedimb resume {run_dir}"
        raise FederationError(
            f"the run failed ({reason or f'flwr exited with code {code}'}); see {run_dir / 'flwr.log'}{hint}"
        )
    if unwritten is not None:
        raise unwritten
    echo(recorder.done_line())
    return run_dir
