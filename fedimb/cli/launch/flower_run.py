"""An experiment's run through its runtime, each line of its log to the run folder.

The Flower App is staged for ``flwr run``; a follower feeds each line of the run's log to
the run folder's recorder. Simulation starts its own SuperLink (simulation mode) on a free
port and stops it by process group when the run ends; deployment connects to the
SuperLink the config names. In both runtimes the configuration travels inside the run and
the results come back through ``flwr run --stream``. ``in_process`` runs the same server
loop and clients in this process (:mod:`fedimb.app.runtimes.in_process`) and feeds its lines to the
same recorder.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fedimb.app.configuration import transport
from fedimb.app.configuration.runtime_rules import gpus_per_client, node_count
from fedimb.app.runtimes.in_process import run_in_process
from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home, write_connection
from fedimb.cli.federation.node_worker import APP_PACKAGES
from fedimb.cli.federation.processes import SuperLink, flower_env, ray_cluster_configured
from fedimb.cli.launch.follower import RunFollower, RunLost
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.cli.rundir.progress import Echo

APP_DIR = Path(__file__).resolve().parents[3]
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


def federation_config(cfg: DictConfig) -> dict[str, Any]:
    """The simulation's ``--federation-config``: Flower turns it into its Ray backend's
    ``client_resources`` (one actor per ``num_cpus``/``num_gpus`` share). The GPU share
    is a float (fractions put several actors on one GPU) and is left out at 0, Flower's
    default."""
    federation: dict[str, int | float] = {
        "num-supernodes": node_count(cfg),
        "client-resources-num-cpus": int(cfg.runtime.num_cpus_per_client),
    }
    gpus = gpus_per_client(cfg)
    if gpus > 0:
        federation["client-resources-num-gpus"] = gpus
    return federation


#: the simulation's Ray leaves its actors' output in its own session logs
#: (``/tmp/ray/session_latest/logs/worker-*``), out of the ServerApp's log stream, the
#: events' channel: Ray would otherwise print a client's lines there, and text a client
#: shapes (a carriage return, Ray's progress-bar lines) could start one with the event tag
QUIET_ACTORS = {"init-args-log-to-driver": False}


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
            {**federation_config(cfg), **QUIET_ACTORS} if simulation else None,
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
