"""What a run prints while it runs: its header, one line per round, the ETA and the last
line, each written whole so that side-by-side sweep jobs never break into each other.

Apart from :mod:`fedimb.cli.rundir.folder` (which records the run's events and files) because
the preflight and the launcher print through the same :func:`_echo` before any event
arrives.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from fedimb.app.configuration.runtime_rules import gpus_per_client
from fedimb.cli.rundir.files import CLIENT_OUTCOMES, selection_scores

Echo = Callable[[str], None]


def _echo(text: str) -> None:
    """One line to stdout in one write, so that the lines of sweep jobs running side by
    side (``hydra/launcher=joblib``) never break into each other; such lines start with
    their job's number."""
    sys.stdout.write(f"{side_by_side_job_tag()}{text}\n")
    sys.stdout.flush()


def side_by_side_job_tag() -> str:
    """``[job 3] `` in a sweep job that runs beside others (any launcher but Hydra's
    basic one, which runs one job at a time); empty otherwise."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return ""
    hydra_cfg = HydraConfig.get()
    launcher = str(hydra_cfg.launcher.get("_target_", ""))
    if hydra_cfg.mode != RunMode.MULTIRUN or launcher.endswith(".BasicLauncher"):
        return ""
    return f"[job {hydra_cfg.job.num}] "


def _fmt(value: Any, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def format_duration(seconds: float) -> str:
    """``48s``, ``1m02s``, ``2h05m``: a span as a person reads it."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def eta_seconds(round_seconds: list[float], remaining: int) -> float | None:
    """The time the ``remaining`` rounds should take: the mean of the rounds so far, the
    first left out where there are more (it includes the clients' start-up: Ray actors,
    imports, data); None before any round."""
    if remaining <= 0:
        return 0.0
    if not round_seconds:
        return None
    steady = round_seconds[1:] or round_seconds
    return sum(steady) / len(steady) * remaining


#: what may have happened to accepted clients, by the round record's key
ACCEPTED_BUT = {"bounded": "bounded", "set_aside": "set aside"}


def clients_outcome(clients: dict[str, int]) -> str:
    """``9 ok, 11 dropped, 1 failed`` (:data:`CLIENT_OUTCOMES`; none dropped or failed: not
    named)."""
    counts = {label: count(clients) for label, count in CLIENT_OUTCOMES.items()}
    # of the accepted: clients with a reported number cut to its bound, and clients the
    # robust rule set aside (left out or down-weighted)
    counts.update({label: clients.get(key, 0) for key, label in ACCEPTED_BUT.items()})
    return ", ".join(f"{n} {label}" for label, n in counts.items() if n or label == "ok")


def _device_label(cfg: DictConfig) -> str:
    """Where the clients compute: ``device=auto`` resolved as the simulation and in-process
    clients on this machine resolve it (a simulation's Ray actor sees a GPU only with
    ``runtime.num_gpus_per_client`` > 0); a deployment's nodes each decide for themselves."""
    device = str(cfg.device)
    if device != "auto":
        return device
    if cfg.runtime.name == "deployment":
        return "device auto on each node"
    import torch

    gpus = gpus_per_client(cfg)
    in_reach = cfg.runtime.name == "in_process" or gpus > 0
    return "cuda" if in_reach and torch.cuda.is_available() else "cpu"


def _partition_label(cfg: DictConfig) -> str:
    alpha = cfg.partition.get("alpha")
    return f"{cfg.partition.name} alpha={alpha:g}" if alpha is not None else str(cfg.partition.name)


def _dropout_label(cfg: DictConfig) -> str:
    dropout = cfg.dropout
    if dropout.name == "none":
        return "no dropout"
    if dropout.get("p_per_client") is not None:
        p = "p per client"
    elif dropout.get("p_per_group") is not None:
        p = "p per group"
    else:
        p = f"p={dropout.get('p')}"
    redrawn = dropout.name != "none" and int(dropout.period) > 1
    period = f", period {dropout.period}" if redrawn else ""
    return f"dropout {dropout.name} {p}{period}"


def _mode_label(cfg: DictConfig) -> str:
    """`` | fedbuff K=5, 10 at once | speed lognormal``; nothing for synchronous rounds
    without a speed model."""
    mode, label = cfg.mode, ""
    if mode.name != "sync":
        size = f" K={mode.buffer_size}" if mode.name == "fedbuff" else ""
        label += f" | {mode.name}{size}, {mode.concurrency} at once"
    elif mode.get("deadline") is not None:
        label += f" | deadline {mode.deadline:g}s"
    if cfg.speed.name != "none":
        label += f" | speed {cfg.speed.name}"
    return label


def run_header(cfg: DictConfig, start: dict[str, Any]) -> str:
    """The run's first progress line: what runs on what, with which dropout, where."""
    rounds = start.get("num_rounds")
    return (
        f"[fedimb] {start.get('method')} on {cfg.dataset.name} ({_partition_label(cfg)}, "
        f"{start.get('num_clients')} clients) | {_dropout_label(cfg)}{_mode_label(cfg)} | "
        f"{cfg.runtime.name}, {_device_label(cfg)} | "
        f"{rounds} round{'' if rounds == 1 else 's'}, {start.get('num_parameters'):,} parameters"
    )


def launch_line(cfg: DictConfig) -> str | None:
    """What the front end does before the run's first event, where that takes a while."""
    if cfg.runtime.name == "simulation":
        return f"[fedimb] starting the simulation (Ray, {cfg.num_clients} clients) ..."
    if cfg.runtime.name == "deployment":
        return f"[fedimb] connecting to the SuperLink at {cfg.runtime.address} ..."
    return None


def round_line(r: dict[str, Any], total: int, elapsed: float, trained: list[float]) -> str:
    """One round's progress line: its number of ``total``, stage, test scores (validation
    scores, labelled ``val``, where the test set is not read), the clients' outcome and
    :func:`timing_text` (``trained``: the seconds of the rounds so far)."""
    test, label = r.get("test") or {}, "acc"
    if not test and r.get("validation"):
        test, label = r["validation"], "val acc"
    head = f"round {r['round']:>{len(str(total))}}/{total}"
    if r.get("stage") and r["stage"] != "train":
        head += f" [{r['stage']}]"
    if (r.get("extra") or {}).get("sync_round") is not None:
        head += f" [sync round {r['extra']['sync_round']}]"
    parts = [head]
    if test:
        parts.append(
            f"{label} {_fmt(test.get('accuracy'))} f1 {_fmt(test.get('macro_f1'))} "
            f"loss {_fmt(test.get('loss'))}"
        )
    clients = r.get("clients")
    if clients and r["round"] > 0:
        parts.append(clients_outcome(clients))
    extra = r.get("extra") or {}
    if extra.get("async.updates") is not None:
        parts.append(asynchronous_text(extra))
    if extra.get("clock.time") is not None:
        sim = float(extra["clock.time"])
        parts.append(f"sim {format_duration(sim) if sim >= 60 else f'{sim:.1f}s'}")
    epsilon = extra.get("privacy.epsilon")
    if epsilon is not None:
        parts.append(f"ε {epsilon:.3g}")
    parts.append(timing_text(r, total, elapsed, trained))
    return " | ".join(parts)


def asynchronous_text(extra: dict[str, Any]) -> str:
    """``4 updates, staleness 0.8 (max 3)``: what an asynchronous server step applied."""
    text = f"{extra['async.updates']} updates"
    if extra.get("async.staleness_mean") is not None:
        text += (
            f", staleness {extra['async.staleness_mean']:.1f} (max {extra['async.staleness_max']})"
        )
    return text


def timing_text(r: dict[str, Any], total: int, elapsed: float, trained: list[float]) -> str:
    """``19.8s  elapsed 1m02s  eta 8m40s``: the round, the run so far (from launch,
    start-up included), the rest at the pace of the rounds so far."""
    timing = f"{r.get('seconds', 0.0):.1f}s  elapsed {format_duration(elapsed)}"
    eta = eta_seconds(trained, total - int(r["round"]))
    if eta:
        timing += f"  eta {format_duration(eta)}"
    return timing


def done_text(rounds: list[dict[str, Any]], elapsed: float) -> str:
    """The completed run's last line before its folder: how long, the final test accuracy
    and, with a validation share, the best validation accuracy and the test accuracy in
    that round (the model validation selects; never a best chosen on the test set)."""
    scores = selection_scores(rounds, objective_last=None)
    parts = []
    if scores["final_accuracy"] is not None:
        parts.append(
            f"final test accuracy {scores['final_accuracy']:.4f} (round {scores['final_round']})"
        )
    if scores["validation_best_accuracy"] is not None:
        best = (
            f"best validation {scores['validation_best_accuracy']:.4f} "
            f"(round {scores['validation_best_round']})"
        )
        if scores["selected_test_accuracy"] is not None:
            best += f", test there {scores['selected_test_accuracy']:.4f}"
        parts.append(best)
    if not any(r.get("test") for r in rounds) and any(r.get("validation") for r in rounds):
        parts.append("test set not read")
    return f"[fedimb] done in {format_duration(elapsed)}: " + (
        ", ".join(parts) if parts else "no test accuracy"
    )
