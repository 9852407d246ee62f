"""What ``fedimb tune`` leaves besides its trials: for each method an experiment file with
its best configuration (``OUT/conf/experiment/<method>_tuned.yaml``: the method, the
tuning command's overrides, ``validation.fraction`` and the best parameters, without the
tuning seeds), and ``OUT/summary.json`` (per method: the best value and parameters, every
trial's objective, the experiment file and the command that runs it)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from fedimb.app.configuration.compose import GROUPS
from fedimb.cli.tune.divergence import seeds_text
from fedimb.cli.tune.trial import format_value
from fedimb.core.errors import ConfigError

SUMMARY = "summary.json"


def experiment_name(method: str) -> str:
    return f"{method}_tuned"


def experiment_path(out: Path, method: str) -> Path:
    """Where a method's experiment file goes (``OUT/conf/experiment/<method>_tuned.yaml``)."""
    return out / "conf" / "experiment" / f"{experiment_name(method)}.yaml"


def run_command(out: Path, method: str, seed: int | str = 0) -> list[str]:
    """The command that runs a method's tuned configuration on ``seed`` (``0,1,2,3,4``
    with ``-m`` in front: the report seeds)."""
    return [
        "fedimb",
        "--config-dir",
        str(out / "conf"),
        f"+experiment={experiment_name(method)}",
        f"seed={seed}",
    ]


def experiment_yaml(method: str, overrides: list[str], values: dict[str, Any], note: str) -> str:
    """An experiment file (``# @package _global_``) choosing ``method`` and the groups of
    ``overrides`` in its defaults list and setting their other keys and ``values``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    includes, choices = [], [f"override /method: {method}"]
    settings: dict[str, Any] = {}
    for override in OverridesParser.create().parse_overrides(overrides):
        key, value = override.key_or_group, override.value()
        if override.is_sweep_override() or override.is_delete():
            raise ConfigError(f"fedimb tune needs single values, got {override.input_line}")
        if key in GROUPS or "/" in key:
            if override.is_add():
                includes.append(f"/{key}/{value}")
            else:
                choices.append(f"override /{key}: {value}")
        else:
            settings[key] = value
    settings.update(values)
    # the sweep an included experiment declares is not part of the tuned configuration
    settings["hydra.sweeper.params"] = None
    tree = OmegaConf.create({})
    for key, value in settings.items():
        OmegaConf.update(tree, key, value, force_add=True)
    defaults = "".join(f"  - {entry}\n" for entry in [*includes, *choices, "_self_"])
    return f"# @package _global_\n{note}defaults:\n{defaults}{OmegaConf.to_yaml(tree)}"


def write_experiment(plan: dict[str, Any], best: dict[str, Any], trials: list[dict]) -> Path:
    """The method's experiment file and its entry in ``OUT/summary.json``."""
    method, out = plan["method"], plan["out"]
    path = experiment_path(out, method)
    command = shlex.join(run_command(out, method))
    note = (
        f"# {method} tuned by fedimb tune: best validation objective {best['objective']:.4f} "
        f"(trial {int(best['trial']) + 1} of {len(trials)}, {seeds_text(plan['seeds'])}). "
        "Run it with\n"
        f"#   {command}\n"
    )
    values = {"validation.fraction": plan["validation_fraction"], **best["params"]}
    text = experiment_yaml(method, plan["overrides"], values, note)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_whole(path, text)
    entry = {
        "best_value": best["objective"],
        "best_trial": int(best["trial"]) + 1,
        "best_params": best["params"],
        "trials": len(trials),
        "values": [t["objective"] for t in trials],
        "diverged_trials": sum(bool(t.get("failed")) for t in trials),
        "seeds": plan["seeds"],
        "overrides": plan["overrides"],
        "experiment": str(path),
        "command": command,
        "trials_dir": str(plan["sweep_dir"]),
    }
    summary = read_summary(out)
    summary[method] = entry
    _write_whole(out / SUMMARY, json.dumps(summary, indent=2) + "\n")
    return path


def read_summary(out: Path) -> dict[str, Any]:
    """``OUT/summary.json``: one entry per method tuned into ``out`` so far."""
    try:
        data = json.loads((out / SUMMARY).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_whole(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def closing_line(plan: dict[str, Any], best: dict[str, Any], experiment: Path) -> str:
    """``[tune fedprox] done: best validation 0.9301 (trial 2 of 12) train.lr=0.0312 ...``."""
    params = " ".join(f"{k}={format_value(v)}" for k, v in best["params"].items())
    if best.get("failed"):
        return (
            f"[tune {plan['method']}] done, but every trial failed (trial 1: {best['failed']}); "
            f"{experiment} holds trial 1's parameters"
        )
    return (
        f"[tune {plan['method']}] done: best validation {best['objective']:.4f} "
        f"(trial {int(best['trial']) + 1} of {plan['trials']}) {params}; {experiment}; "
        f"run it: {shlex.join(run_command(plan['out'], plan['method']))}"
    )
