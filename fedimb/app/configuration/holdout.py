"""How a run holds data out, read from its configuration: the validation share the server
keeps (``validation.fraction``), the tuning objective's window
(``validation.objective_last``) and whether the test set is read (``evaluation.test``).

conf/config.yaml declares them; an older run folder's configuration has them too once
brought up to date (:mod:`fedimb.app.configuration.upgrade`). Every reader asks this
module rather than reading the keys itself."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

#: the keys this module reads
KEYS = ("validation.fraction", "validation.objective_last", "evaluation.test")


def raw(cfg: Any, key: str) -> Any:
    """The value of one of :data:`KEYS` in ``cfg``, unchecked."""
    return OmegaConf.select(cfg, key)


def validation_fraction(cfg: Any) -> float:
    """The share of the training data the server holds out for validation (0: none)."""
    return float(raw(cfg, "validation.fraction"))


def objective_last(cfg: Any) -> int:
    """How many of the last validated rounds the tuning objective averages."""
    return int(raw(cfg, "validation.objective_last"))


def reads_test(cfg: Any) -> bool:
    """Whether the server scores the global model on the test set (false in tuning)."""
    return bool(raw(cfg, "evaluation.test"))
