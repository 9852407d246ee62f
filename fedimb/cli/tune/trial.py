"""One trial of ``fedimb tune``, as Hydra's Optuna sweeper runs it: the run, its objective
for the sweeper, its record in its run folder and its progress line.

A trial runs once per tuning seed (``tune.seeds``; with one seed in the trial's own
folder, with several in its subfolders ``s<seed>``). Its objective is the mean of the
runs' objective ``tune.objective``: ``validation_objective`` (summary.json: the mean
validation accuracy of the last ``validation.objective_last`` tested rounds), or
``personal_validation_objective`` (the same of the personal models' mean accuracy on the
clients' own validation shares). A trial where any seed's run failed or
diverged (:mod:`fedimb.cli.tune.divergence`; the seeds after it are not run) scores
:data:`FAILED_OBJECTIVE`, below every real accuracy, so that the sweep goes on and
prefers a configuration that trains on every seed.

A rerun of the same tuning command resumes by replay: the sampler's seed is fixed, so
it proposes the same trials in the same order, and a trial whose overrides equal those
of a trial recorded in the sweep folder (:data:`RECORD`) returns that recorded
objective without training.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.search_space import search_space
from fedimb.cli.tune.divergence import Divergence, tuning_objective, tuning_seeds
from fedimb.core.errors import FedimbError

#: a trial's record in its run folder: its overrides, parameters and objective
RECORD = "tune_trial.json"
#: the objective of a failed or diverged trial: no validation accuracy is lower
FAILED_OBJECTIVE = 0.0


def is_tuning(hydra_cfg: Any) -> bool:
    """Whether this job is a trial of the Optuna sweeper (which needs its objective)."""
    return "optuna" in str(hydra_cfg.sweeper.get("_target_", "")).lower()


def run_trial(
    cfg: DictConfig, run_dir: Path, hydra_cfg: Any, run: Callable[[DictConfig, Path], Any]
) -> float:
    """The trial's objective: replayed from a recorded trial with the same overrides, or
    from ``run(cfg, folder)`` (which runs the experiment ``cfg`` into ``folder``) on each
    tuning seed; prints its progress line."""
    start = time.monotonic()
    trial = int(hydra_cfg.job.num)
    overrides = sorted(str(o) for o in hydra_cfg.overrides.task)
    record = _recorded(run_dir, overrides)
    replayed = record is not None
    if record is None:
        (run_dir / RECORD).unlink(missing_ok=True)
        record = {**run_seeds(cfg, run_dir, run), "replayed_from": None}
        record["seconds"] = round(time.monotonic() - start, 1)
    elif record["folder"] != run_dir.name:
        record["replayed_from"] = record["folder"]
    params = {d.key: _plain(OmegaConf.select(cfg, d.key)) for d in search_space(cfg)}
    record.update(trial=trial, folder=run_dir.name, overrides=overrides, params=params)
    write_record(run_dir, record)
    line = progress_line(cfg, hydra_cfg, record, _best(run_dir.parent, trial), replayed)
    print(f"{line} {time.monotonic() - start:.0f} s", flush=True)
    return float(record["objective"])


def run_seeds(
    cfg: DictConfig, run_dir: Path, run: Callable[[DictConfig, Path], Any]
) -> dict[str, Any]:
    """The trial run on each tuning seed until one diverges: its ``objective`` (the seeds'
    mean, or :data:`FAILED_OBJECTIVE`), ``failed`` (which seed diverged and why, or None)
    and ``seeds`` (each seed's objective and reason)."""
    rules = Divergence.from_config(cfg.tune)
    seeds = tuning_seeds(cfg.tune)
    key = tuning_objective(cfg.tune)
    results: list[dict[str, Any]] = []
    for seed in seeds:
        folder = run_dir if len(seeds) == 1 else run_dir / f"s{seed}"
        seeded = cfg.copy()
        seeded.seed = seed
        objective, why = FAILED_OBJECTIVE, None
        try:
            run(seeded, folder)
            objective, why = objective_of(folder / "summary.json", key)
            if why is None:
                summary = json.loads((folder / "summary.json").read_text())
                why = rules.reason(summary, int(cfg.validation.objective_last), key)
        except FedimbError as err:
            why = str(err)
        results.append({"seed": seed, "objective": objective, "diverged": why})
        if why is not None:
            break
    diverged = next((r for r in results if r["diverged"]), None)
    return {
        "objective": FAILED_OBJECTIVE
        if diverged
        else sum(r["objective"] for r in results) / len(results),
        "failed": None if diverged is None else _seed_reason(diverged, len(seeds)),
        "seeds": results,
    }


def _seed_reason(result: dict[str, Any], seeds: int) -> str:
    return result["diverged"] if seeds == 1 else f"seed {result['seed']}: {result['diverged']}"


def objective_of(summary_path: Path, key: str = "validation_objective") -> tuple[float, str | None]:
    """(objective ``key``, why it failed or None) of a finished run from its summary.json."""
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        return FAILED_OBJECTIVE, "the run wrote no summary.json"
    value = summary.get(key)
    if not summary.get("completed"):
        return FAILED_OBJECTIVE, "the run did not complete"
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return FAILED_OBJECTIVE, f"no finite validation objective ({value!r})"
    return float(value), None


def read_records(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every trial recorded below a sweep folder, each with its ``folder`` name."""
    records = []
    for path in sorted(sweep_dir.glob(f"*/{RECORD}")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "objective" in record:
            records.append({**record, "folder": path.parent.name})
    return records


def write_record(run_dir: Path, record: dict[str, Any]) -> None:
    (run_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n")


def _recorded(run_dir: Path, overrides: list[str]) -> dict[str, Any] | None:
    """A recorded trial with these overrides: this job's own folder first."""
    matches = [r for r in read_records(run_dir.parent) if r.get("overrides") == overrides]
    matches.sort(key=lambda r: r["folder"] != run_dir.name)
    return matches[0] if matches else None


def _best(sweep_dir: Path, trial: int) -> dict[str, Any] | None:
    """The best of the trials 0..``trial`` of this sweep (the earliest among equals)."""
    records = [r for r in read_records(sweep_dir) if 0 <= int(r.get("trial", -1)) <= trial]
    return max(records, key=lambda r: (r["objective"], -int(r["trial"])), default=None)


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def format_value(value: Any) -> str:
    """A parameter's value for people: floats with 4 significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def progress_line(
    cfg: DictConfig,
    hydra_cfg: Any,
    record: dict[str, Any],
    best: dict[str, Any] | None,
    replayed: bool,
) -> str:
    """``[tune fedprox] trial 3/12: train.lr=0.0312 method.client.mu=0.1 -> validation
    0.9123 (best 0.9301, trial 2)`` (the caller adds the seconds)."""
    params = " ".join(f"{k}={format_value(v)}" for k, v in record["params"].items())
    if record.get("failed"):
        outcome = f"diverged ({record['failed']}), scored {FAILED_OBJECTIVE:g}"
    else:
        outcome = f"validation {record['objective']:.4f}"
    if replayed:
        outcome += " (recorded, not rerun)"
    best_text = f" (best {best['objective']:.4f}, trial {int(best['trial']) + 1})" if best else ""
    total = hydra_cfg.sweeper.get("n_trials")
    return (
        f"[tune {cfg.method.name}] trial {int(record['trial']) + 1}/{total}: {params} -> "
        f"{outcome}{best_text}"
    )
