"""The Hydra task function of ``fedimb``: one job of a run or a sweep (its run folder
is Hydra's output folder), or one trial of ``fedimb tune``, which returns its objective
to the Optuna sweeper (:mod:`fedimb.cli.tune.trial`). Apart from :mod:`fedimb.cli.main`
so that ``fedimb tune`` runs its sweeps through it without importing the front end."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from fedimb.app.configuration.compose import CONF_DIR
from fedimb.core.errors import FedimbError


def fail(err: Exception) -> None:
    print(f"fedimb: error: {err}", file=sys.stderr, flush=True)
    sys.exit(2)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)
def experiment(cfg: DictConfig) -> float | None:
    """Run one experiment; a trial of ``fedimb tune`` (Hydra's Optuna sweeper) returns
    its objective, :mod:`fedimb.cli.tune.trial`."""
    from fedimb.cli.launch.experiment import run_experiment
    from fedimb.cli.tune import trial as tune_trial

    logging.getLogger("httpx").setLevel(logging.WARNING)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    sweep_job = HydraConfig.get().mode == RunMode.MULTIRUN
    if sweep_job and tune_trial.is_tuning(HydraConfig.get()):
        return tune_trial.run_trial(cfg, run_dir, HydraConfig.get(), run_experiment)
    try:
        path = run_experiment(cfg, run_dir)
    except (FedimbError, KeyboardInterrupt) as err:
        if not sweep_job and {p.name for p in run_dir.iterdir()} <= {
            ".hydra"
        }:  # stopped before the run started
            shutil.rmtree(run_dir, ignore_errors=True)
        if isinstance(err, KeyboardInterrupt):
            raise
        if not sweep_job:
            fail(err)
        # one failed job does not cost the sweep its other runs: its folder stays (the
        # sweep's end counts it as failed, fedimb.cli.launch.sweep_end) and the sweep exits
        # non-zero at its end
        print(
            f"fedimb: error: [job {HydraConfig.get().job.num}] {err}", file=sys.stderr, flush=True
        )
        return None
    print(path, flush=True)
    return None
