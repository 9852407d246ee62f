"""``fedimb tune``: every method tuned with the same budget by Hydra's Optuna sweeper.

For each method, one Hydra multirun with ``hydra/sweeper=optuna`` (TPE with a fixed seed,
``direction: maximize``, one trial at a time) over the shared knobs (``tune.search``) and
the method's own (its YAML's ``search``), each trial a run on each tuning seed
(``tune.seeds``) with ``validation.fraction=<tune.validation_fraction>`` and
``evaluation.test=false``: the objective (:mod:`fedimb.cli.tune.trial`) is the seeds' mean
validation score, or a failure where any seed diverged, and the test set is never read.
Its trials go to ``OUT/trials/<method>/``; the best configuration to an experiment file
(:mod:`fedimb.cli.tune.files`) that ``fedimb --config-dir OUT/conf +experiment=<method>_tuned
seed=S`` runs. A rerun of the
same command resumes: the recorded trials are replayed without training.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, TextIO

from fedimb.app.configuration.compose import compose
from fedimb.app.configuration.search_space import search_space
from fedimb.cli.tune import files as tune_files
from fedimb.cli.tune.divergence import Divergence, seeds_text, tuning_objective, tuning_seeds
from fedimb.cli.tune.trial import read_records
from fedimb.core.absl_handler import keep_absl_on_process_stderr
from fedimb.core.errors import ConfigError, is_int, is_number, require

#: what every trial runs with besides the search (the seed and the validation share
#: come from the ``tune`` section)
TRIAL_SETTINGS = ("evaluation.test=false", "checkpoint.enabled=false")
#: settings that fedimb tune fixes itself: a tuning command may not set them
_FIXED_KEYS = {
    "seed",
    "seed_data",
    "seed_train",
    "method",
    "validation.fraction",
    "evaluation.test",
}


def tune_main(argv: list[str]) -> int:
    """Tune each method with the same budget (Hydra's Optuna sweeper), on validation data."""
    parser = argparse.ArgumentParser(
        prog="fedimb tune",
        description=tune_main.__doc__,
        epilog="The arguments are fedimb overrides, e.g. fedimb tune method=fedavg,fedprox "
        "dataset=mnist5k partition=dirichlet partition.alpha=0.1 --trials 12 --out tuned. "
        "Run the same command again to resume it.",
    )
    parser.add_argument("--trials", type=int, default=None, help="trials per method (tune.trials)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("outputs/tune"),
        help="output folder (default: outputs/tune)",
    )
    args, overrides = parser.parse_known_args(argv)
    methods = [o.partition("=")[2] for o in overrides if o.partition("=")[0] == "method"]
    if len(methods) != 1 or not all(m.strip() for m in methods[0].split(",")):
        parser.error("name the methods to tune once: method=NAME[,NAME...]")
    if args.trials is not None and args.trials < 1:
        parser.error("--trials must be >= 1")
    if any(o.startswith("-") for o in overrides):
        parser.error(f"unknown option {next(o for o in overrides if o.startswith('-'))}")
    rest = [o for o in overrides if o.partition("=")[0] != "method"]
    names = list(dict.fromkeys(m.strip() for m in methods[0].split(",")))
    results = tune_methods(names, rest, args.trials or 0, args.out)
    return 0 if len(results) == len(names) else 1


def tune_methods(
    methods: list[str], overrides: list[str], trials: int, out: Path
) -> dict[str, Path]:
    """Tune each method (``trials`` per method; 0: ``tune.trials``) on the same ``overrides``;
    the experiment file of each method whose tuning completed. Every method's configuration
    and search space is checked before any trains; one method's failure leaves the others."""
    from fedimb.cli.launch.preflight import check_writable

    out = out.expanduser().absolute()
    check_writable(out, "--out")
    plans = [plan_sweep(method, overrides, trials, out) for method in dict.fromkeys(methods)]
    found: dict[str, Path] = {}
    for plan in plans:
        experiment = run_plan(plan)
        if experiment is not None:
            found[plan["method"]] = experiment
    return found


def plan_sweep(method: str, overrides: list[str], trials: int, out: Path) -> dict[str, Any]:
    """One method's sweep: its trial overrides, search space and Hydra arguments, after
    checking that its configuration composes with every value its search space names."""
    fixed = [o for o in overrides if _key(o) in _FIXED_KEYS or _key(o).startswith("hydra")]
    if fixed:
        raise ConfigError(f"fedimb tune sets {fixed[0].partition('=')[0]} itself; drop {fixed[0]}")
    try:
        settings = compose([f"method={method}", *overrides]).tune
        check_tune_settings(settings)
        seeds = tuning_seeds(settings)
        Divergence.from_config(settings)
        tuning_objective(settings)
        base = [
            f"method={method}",
            f"seed={seeds[0]}",  # each trial runs on every seed of tune.seeds
            f"validation.fraction={settings.validation_fraction}",
            *TRIAL_SETTINGS,
            *overrides,
        ]
        dimensions = search_space(compose(base))
        for dimension in dimensions:
            for value in dimension.extremes():
                compose([*base, f"{dimension.key}={value}"])
    except ConfigError as err:
        raise ConfigError(f"method={method}: {err}") from None
    n_trials = trials or int(settings.trials)
    sweep_dir = out / "trials" / method
    hydra = [
        "-m",
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=tpe",
        f"hydra.sweeper.sampler.seed={int(settings.sampler_seed)}",
        f"hydra.sweeper.sampler.n_startup_trials={int(settings.random_trials)}",
        "hydra.sweeper.direction=maximize",
        f"hydra.sweeper.n_trials={n_trials}",
        "hydra.sweeper.n_jobs=1",
        "hydra.sweeper.params=null",  # the search is this command's, not an experiment's sweep
        f"hydra.sweeper.study_name={method}",
        f"hydra.sweep.dir={sweep_dir}",
        # one folder per trial number: a rerun, even of another command, rewrites its trials
        "hydra.sweep.subdir=${hydra.job.num}",
    ]
    return {
        "method": method,
        "overrides": overrides,
        "validation_fraction": float(settings.validation_fraction),
        "seeds": seeds,
        "trials": n_trials,
        "dimensions": dimensions,
        "sweep_dir": sweep_dir,
        "out": out,
        "argv": [*hydra, *base, *(d.sweep_override() for d in dimensions)],
    }


def check_tune_settings(settings: Any) -> None:
    """The ``tune`` section's numbers (its ``search`` is checked with every run)."""
    for key, least in (("trials", 1), ("sampler_seed", 0), ("random_trials", 1)):
        value = settings.get(key)
        require(
            is_int(value) and value >= least,
            f"tune.{key} must be an integer >= {least}, got {value!r}",
        )
    fraction = settings.get("validation_fraction")
    require(
        is_number(fraction) and 0 < fraction < 1,
        f"tune.validation_fraction must be in (0, 1), got {fraction!r}",
    )


def run_plan(plan: dict[str, Any]) -> Path | None:
    """Run one method's sweep, then write its experiment file; None if it failed."""
    method, sweep_dir = plan["method"], plan["sweep_dir"]
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log = sweep_dir / "tune.log"
    print(
        f"[tune {method}] {plan['trials']} trial{'s' if plan['trials'] != 1 else ''} of "
        f"{', '.join(d.key for d in plan['dimensions'])} ({seeds_text(plan['seeds'])}); "
        f"log: {log}",
        flush=True,
    )
    error = run_hydra_sweep(plan["argv"], log)
    # a sweep that ran to its end rewrote the records of its trials 0..n-1
    records = {int(r["trial"]): r for r in read_records(sweep_dir) if "trial" in r}
    missing = [n for n in range(plan["trials"]) if n not in records]
    if error or missing:
        why = error or f"trial {missing[0] + 1} has no record"
        print(f"[tune {method}] failed: {why}; see {log}", flush=True)
        return None
    chosen = [records[n] for n in range(plan["trials"])]
    best = max(chosen, key=lambda r: (r["objective"], -int(r["trial"])))
    experiment = tune_files.write_experiment(plan, best, chosen)
    print(tune_files.closing_line(plan, best, experiment), flush=True)
    return experiment


class _TuneLines:
    """A text stream that keeps everything in the sweep's log and shows the tune lines."""

    def __init__(self, log: TextIO, screen: TextIO) -> None:
        self.log, self.screen, self.partial = log, screen, ""

    def write(self, text: str) -> int:
        self.log.write(text)
        self.partial += text
        *lines, self.partial = self.partial.split("\n")
        for line in lines:
            if line.startswith(("[tune ", "fedimb: error")):
                self.screen.write(line + "\n")
                self.screen.flush()
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def isatty(self) -> bool:
        return False


def run_hydra_sweep(argv: list[str], log: Path) -> str | None:
    """``fedimb ARGV`` through Hydra in this process, its output to ``log`` (the tune lines
    also to the screen); the reason it stopped early, or None."""
    from hydra.core.global_hydra import GlobalHydra

    from fedimb.cli.launch.hydra_task import experiment

    saved = sys.argv
    with open(log, "a") as stream, contextlib.ExitStack() as stack:
        lines = _TuneLines(stream, sys.stdout)
        stack.enter_context(contextlib.redirect_stdout(lines))  # type: ignore[type-var]
        stack.enter_context(contextlib.redirect_stderr(lines))  # type: ignore[type-var]
        GlobalHydra.instance().clear()
        sys.argv = ["fedimb", *argv]
        keep_absl_on_process_stderr()  # Hydra is about to reconfigure logging
        try:
            experiment()
        except SystemExit as stop:
            return None if stop.code in (0, None) else f"the sweep stopped (exit {stop.code})"
        except Exception as err:  # noqa: BLE001 - one method's failure leaves the others
            return f"{type(err).__name__}: {err}"
        finally:
            sys.argv = saved
            GlobalHydra.instance().clear()
            _drop_log_handlers(lines)
            keep_absl_on_process_stderr()  # not on this sweep's log, loaded during it
    return None


def _drop_log_handlers(stream: object) -> None:
    """Hydra's logging writes to the stream it found: not to the closed log afterwards."""
    import logging

    names = [None, *logging.root.manager.loggerDict]
    for logger in (logging.getLogger(name) for name in names):
        for handler in list(logger.handlers):
            if getattr(handler, "stream", None) is stream:
                logger.removeHandler(handler)


def _key(override: str) -> str:
    return override.lstrip("+~").partition("=")[0]
