"""The classes a configuration names (``_target_``), resolved and built without Hydra."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from fedimb.core.errors import ConfigError, require


def build_strategy(node: DictConfig, run: Any) -> Any:
    """The strategy ``node._target_`` names, for ``run``: it reads its settings (the
    node's other keys) from the run's configuration, as it declares them (``Settings``).
    (Hydra's ``instantiate`` would try to merge live objects such as the run into the
    config, so we resolve the class and call it directly.)"""
    return import_class(str(node._target_))(run=run)


#: classes that a run folder saved before every method had modules of its own name may
#: name (``fedimb resume`` of such a run), with the class that now does the same
MOVED = {
    "strategies.personal.LGFedAvgStrategy": "strategies.lg_fedavg.LGFedAvgStrategy",
    "strategies.personal.LocalStrategy": "strategies.local.LocalStrategy",
    "strategies.personal.PFedMeStrategy": "strategies.pfedme.PFedMeStrategy",
    "clients.qffl.InitialLossClient": "clients.qffl.QFFLClient",
}


def import_class(target: str) -> type:
    """The class named by a dotted ``_target_`` path (or where it moved, :data:`MOVED`).
    Plain importlib rather than Hydra: a deployed ClientApp starts a process per message,
    and importing Hydra would be a noticeable share of that process's start-up."""
    module_name, _, name = MOVED.get(target, target).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name) if module_name else None
    except Exception as err:
        raise ConfigError(f"cannot import '{target}': {err}") from None
    if not isinstance(cls, type):
        raise ConfigError(f"cannot import '{target}': not a class")
    return cls


def robust_support(strategy_cls: type, settings: Mapping[str, Any]) -> str:
    """The robust aggregation a strategy's server step can take, as its
    ``robust_aggregation`` declares it (a value, or a function of its method.strategy
    ``settings``): ``any`` (undeclared), ``clip`` or ``none``. One reading, so that the
    aggregation, DP and SecAgg+ checks cannot disagree on a method."""
    support = getattr(strategy_cls, "robust_aggregation", "any")
    return str(support(settings) if callable(support) else support)


def method_classes(cfg: DictConfig) -> tuple[type, type]:
    """The method's (client class, strategy class), which declare its rules."""
    for key in ("strategy", "client"):
        require(
            key in cfg.method and "_target_" in cfg.method[key],
            f"method '{cfg.method.get('name')}' must name method.{key}._target_",
        )
    client_cls = import_class(str(cfg.method.client._target_))
    return client_cls, import_class(str(cfg.method.strategy._target_))
