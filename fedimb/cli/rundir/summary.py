"""A run's ``summary.json``: what ran, whether it completed, its scores (each named by its
split: test or validation), its traffic and time, written last and whole so that its
presence marks a complete run folder.

Apart from the recorder that collects the rounds, because the summary is a function of the
rounds and the configuration alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fedimb.app.configuration import holdout
from fedimb.app.configuration.seeds import data_seed, train_seed
from fedimb.cli.rundir.files import selection_scores, traffic_to_target
from fedimb.core.metrics import DISTRIBUTION_STATS

#: the configuration groups whose chosen name says what a run ran, on what and where
NAMED_GROUPS = ("method", "dataset", "model", "partition", "dropout", "runtime")


def group_names(cfg: DictConfig) -> dict[str, str]:
    """The name chosen in each of :data:`NAMED_GROUPS`, e.g. ``{"method": "fedavg", ...}``."""
    return {group: str(cfg[group].name) for group in NAMED_GROUPS}


def trained_nothing(rounds: list[dict[str, Any]]) -> bool:
    """Whether the run had rounds to train and no client's update was accepted in any
    of them: its model is the initial one, whatever its accuracy says."""
    trained = [r for r in rounds if r["round"] > 0]
    return bool(trained) and not any(
        (r.get("clients") or {}).get("succeeded", 0) > 0 for r in trained
    )


def run_summary(
    cfg: DictConfig,
    start: dict[str, Any],
    rounds: list[dict[str, Any]],
    end: dict[str, Any] | None,
    lost: dict[str, Any],
    wall_seconds: float,
    run_dir: Path,
) -> dict[str, Any]:
    """The summary of a run from its configuration, its ``start`` and ``end`` events, its
    rounds, the clients it went on without (``lost``) and its time on this machine."""
    tested = [r for r in rounds if (r.get("test") or {}).get("accuracy") is not None]
    trained = [r for r in rounds if r["round"] > 0]
    best = max(tested, key=lambda r: r["test"]["accuracy"], default=None)
    final = tested[-1] if tested else None
    seconds = [r.get("seconds", 0.0) for r in trained]
    target = cfg.evaluation.get("target_accuracy")
    selection = selection_scores(rounds, holdout.objective_last(cfg))
    to_target = traffic_to_target(rounds, target) if target is not None else None
    return {
        **group_names(cfg),
        "num_clients": int(cfg.num_clients),
        "seed": int(cfg.seed),
        "seed_data": data_seed(cfg),
        "seed_train": train_seed(cfg),
        # rounds and rounds_planned count Flower rounds; num_rounds is the configuration's
        # value in the method's own unit (Astraea: synchronization rounds)
        "rounds": len(trained),
        "rounds_planned": int(start.get("num_rounds") or cfg.num_rounds),
        "num_rounds": int(cfg.num_rounds),
        "num_rounds_unit": str(start.get("round_unit", "Flower round")),
        "completed": end is not None and not trained_nothing(rounds),
        # why the run ended before rounds_planned on purpose (a spent privacy budget)
        "stopped": (end or {}).get("stopped"),
        "clients_lost": int(lost.get("clients_lost", 0)),
        "clients_lost_reasons": lost.get("clients_lost_reasons") or {},
        "final_accuracy": final["test"]["accuracy"] if final else None,
        "final_macro_f1": final["test"].get("macro_f1") if final else None,
        "final_loss": final["test"].get("loss") if final else None,
        # the maximum over rounds of the test accuracy: a paper's protocol, never a selection
        "best_accuracy": best["test"]["accuracy"] if best else None,
        "best_round": best["round"] if best else None,
        "validation_fraction": holdout.validation_fraction(cfg),
        "validation_chance": start.get("validation_chance"),
        **{k: v for k, v in selection.items() if k not in ("final_accuracy", "final_round")},
        "num_parameters": start.get("num_parameters"),
        "bytes_up": sum((r.get("bytes") or {}).get("up", 0) for r in trained),
        "bytes_down": sum((r.get("bytes") or {}).get("down", 0) for r in trained),
        "target_accuracy": target,
        "round_to_target": to_target[0] if to_target else None,
        "bytes_to_target": to_target[1] if to_target else None,
        "wall_seconds": round(wall_seconds, 3),
        "server_seconds": round(end["seconds"], 3) if end else None,
        "first_round_seconds": round(seconds[0], 3) if seconds else None,
        "mean_round_seconds_after_first": round(sum(seconds[1:]) / len(seconds[1:]), 3)
        if len(seconds) > 1
        else None,
        "sim_seconds": simulated_seconds(trained),
        **privacy_summary(cfg, trained),
        **local_summary(rounds),
        **personal_selection(rounds, holdout.objective_last(cfg)),
        "run_dir": str(run_dir),
    }


def simulated_seconds(trained: list[dict[str, Any]]) -> float | None:
    """The simulated clock at the last round under a device-speed model (``speed``), or
    the real one of an asynchronous deployment; null without a clock."""
    times = [(r.get("extra") or {}).get("clock.time") for r in trained]
    times = [t for t in times if t is not None]
    return times[-1] if times else None


def privacy_summary(cfg: DictConfig, trained: list[dict[str, Any]]) -> dict[str, Any]:
    """Under ``privacy=dp_*``: ε spent at ``privacy_delta`` after the last round (null
    without noise, which gives no guarantee); nothing without differential privacy."""
    if str(cfg.privacy.name) == "none":
        return {}
    from fedimb.app.privacy.account import delta_of

    spent = [(r.get("extra") or {}).get("privacy.epsilon") for r in trained]
    spent = [e for e in spent if e is not None]
    return {"privacy_epsilon": spent[-1] if spent else None, "privacy_delta": delta_of(cfg)}


def local_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The last local evaluation's accuracy distribution over clients, per model
    (``local_accuracy_average``, ``..._worst_10``, ``..._best_10``, ``..._variance`` in
    %²; ``personal_`` after ``local_`` for personal models); nothing without one."""
    last: dict[str, Any] = next((r["local"] for r in reversed(rounds) if r.get("local")), {})
    return {
        f"local_{'' if model == 'global' else model + '_'}accuracy_{stat}": stats.get(stat)
        for model, stats in last.items()
        for stat in DISTRIBUTION_STATS
    }


def personal_selection(rounds: list[dict[str, Any]], objective_last: int | None) -> dict:
    """The personal models chosen on the clients' own validation shares, as
    :func:`~fedimb.cli.rundir.files.selection_scores` chooses the global model on the
    server's: the round of best mean personal validation accuracy over clients (the first
    reaching it), the mean and worst-10% personal test accuracy over clients there
    (``personal_selected_accuracy``, ``personal_selected_worst_10``: their test splits never
    choose), and ``personal_validation_objective``, the mean of the last ``objective_last``
    rounds' mean personal validation accuracy (the tuning objective of personal set-ups).
    Nothing without a personal validation."""

    def stat(r: dict[str, Any], model: str, name: str) -> float | None:
        return ((r.get("local") or {}).get(model) or {}).get(name)

    validated = [r for r in rounds if stat(r, "personal_validation", "average") is not None]
    if not validated:
        return {}
    best = max(validated, key=lambda r: stat(r, "personal_validation", "average") or 0.0)
    last = [
        float(stat(r, "personal_validation", "average") or 0.0)
        for r in (validated[-objective_last:] if objective_last else [])
    ]
    return {
        "personal_validation_best_accuracy": stat(best, "personal_validation", "average"),
        "personal_validation_best_round": best["round"],
        "personal_validation_final_accuracy": stat(validated[-1], "personal_validation", "average"),
        "personal_selected_accuracy": stat(best, "personal", "average"),
        "personal_selected_worst_10": stat(best, "personal", "worst_10"),
        "personal_validation_objective": sum(last) / len(last) if last else None,
    }


def write_summary_json(run_dir: Path, summary: dict[str, Any]) -> None:
    """``summary.json``, whole or not at all (written aside, then renamed)."""
    partial = run_dir / ".summary.json.partial"
    try:
        partial.write_text(json.dumps(summary, indent=2) + "\n")
        os.replace(partial, run_dir / "summary.json")
    except OSError:
        partial.unlink(missing_ok=True)
        raise
