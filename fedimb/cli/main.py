"""``fedimb``: the Hydra front end.

``fedimb key=value ...`` runs one experiment, ``fedimb -m key=a,b ...`` a sweep (one
run folder per job). The last line printed is the run folder's absolute path.
``fedimb certs|local-federation|resume|report|export|diagnose ...`` are the subcommands of
:mod:`fedimb.cli.commands`.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from fedimb.app.config import CONF_DIR, check_overrides, compose, sweep_variants
from fedimb.core.errors import FedimbError


def _fail(err: Exception) -> None:
    print(f"fedimb: error: {err}", file=sys.stderr, flush=True)
    sys.exit(2)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)
def experiment(cfg: DictConfig) -> None:
    from fedimb.cli.launch import run_experiment

    logging.getLogger("httpx").setLevel(logging.WARNING)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        path = run_experiment(cfg, run_dir)
    except FedimbError as err:
        if {p.name for p in run_dir.iterdir()} <= {".hydra"}:  # failed before the run started
            shutil.rmtree(run_dir, ignore_errors=True)
        _fail(err)
    print(path, flush=True)


def _terminate(signum, frame) -> None:
    """SIGTERM ends the run like Ctrl-C: cleanup handlers stop every Flower process."""
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    from fedimb.cli.commands import SUBCOMMANDS

    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        try:
            sys.exit(SUBCOMMANDS[sys.argv[1]](sys.argv[2:]))
        except FedimbError as err:
            _fail(err)
    from fedimb.cli.preflight import check_writable

    overrides = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    try:
        check_overrides(overrides)
        if not any(arg.startswith("--") for arg in sys.argv[1:]):  # not --help, --cfg, ...
            for variant in sweep_variants(overrides):  # every value of a sweep, before any run
                check_writable(Path(str(compose(variant).output.root)), "output.root")
    except FedimbError as err:
        _fail(err)
    experiment()


if __name__ == "__main__":
    main()
