"""The rules of the aggregation mode (``mode``: sync, fedasync, fedbuff) and of the
device-speed model (``speed``), checked with the rest of the configuration: an
asynchronous mode takes only methods whose server step is a weighted average of the
clients' models, and options whose meaning is a synchronous round are refused in one line."""

from __future__ import annotations

from omegaconf import DictConfig

from fedimb.app.configuration.components import method_classes
from fedimb.core.errors import check_choice, check_number, require
from fedimb.core.speed import check_speed
from fedimb.core.staleness import check_staleness

MODES = ("sync", "fedasync", "fedbuff")
BALANCE = ("none", "participation")

#: options that need a synchronous round, and what each would need it for
_ROUND_OPTIONS = (
    ("privacy", "none", "differential privacy accounts for sampled rounds"),
    ("secagg", "none", "secure aggregation masks the sum of one round's clients"),
    ("shrink", "none", "shrinking rescales one round's aggregate"),
    ("normalize", "none", "contribution normalisation compares one round's clients"),
    ("aggregation", "mean", "a robust rule compares one round's clients"),
)


def is_asynchronous(cfg: DictConfig) -> bool:
    return str(cfg.mode.name) != "sync"


def check_mode(cfg: DictConfig) -> None:
    """``speed``, then ``mode``: its sizes, its staleness function, and what it runs."""
    check_speed(cfg.speed)
    mode = cfg.mode
    check_choice("mode", mode.get("name"), MODES)
    require(
        str(cfg.speed.name) == "none" or cfg.runtime.name != "deployment",
        "speed models the simulated runtimes' devices: a deployment's clock is the real one "
        "(use speed=none)",
    )
    if not is_asynchronous(cfg):
        deadline = mode.get("deadline")
        if deadline is not None:
            check_number("mode.deadline", deadline, 0.0, strict=True)
            require(
                str(cfg.speed.name) != "none",
                "mode.deadline is simulated seconds: choose a speed model (speed=lognormal|edge)",
            )
        return
    check_number("mode.concurrency", mode.get("concurrency"), 1, integer=True)
    require(
        mode.concurrency <= int(cfg.num_clients),
        f"mode.concurrency ({mode.concurrency}) must be at most num_clients ({cfg.num_clients})",
    )
    if mode.name == "fedbuff":
        check_number("mode.buffer_size", mode.get("buffer_size"), 1, integer=True)
        require(
            mode.buffer_size <= mode.concurrency,
            f"mode.buffer_size ({mode.buffer_size}) must be at most mode.concurrency "
            f"({mode.concurrency})",
        )
        check_number("mode.server_lr", mode.get("server_lr"), 0.0, strict=True)
    else:
        alpha = mode.get("alpha")
        check_number("mode.alpha", alpha, 0.0, strict=True)
        require(alpha <= 1, f"mode.alpha must be in (0, 1], got {alpha}")
    check_staleness(mode.staleness, "mode.staleness")
    check_choice("mode.balance", mode.get("balance"), BALANCE)
    check_asynchronous_run(cfg)


def check_asynchronous_run(cfg: DictConfig) -> None:
    """The method and the options an asynchronous mode can run."""
    method = cfg.method.get("name")
    strategy = method_classes(cfg)[1]
    require(
        bool(getattr(strategy, "asynchronous", False)),
        f"method '{method}' needs synchronous rounds (its server keeps state or stages "
        f"beyond a weighted average): use mode=sync",
    )
    for group, allowed, why in _ROUND_OPTIONS:
        require(
            str(cfg[group].name) == allowed,
            f"mode={cfg.mode.name} cannot run {group}={cfg[group].name}: {why} (use mode=sync)",
        )
    require(
        not cfg.evaluation.personal,
        f"mode={cfg.mode.name} cannot test personal models: they are tested on one round's "
        "clients (use mode=sync, or evaluation.personal=false)",
    )
