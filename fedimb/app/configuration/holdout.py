"""How a run holds data out, read from its configuration: the validation share the server
keeps (``validation.fraction``), the tuning objective's window
(``validation.objective_last``) and whether the test set is read (``evaluation.test``).

conf/config.yaml declares the defaults. A configuration that predates a key (an older run
folder's) reads the same value, stated once here (:data:`DEFAULTS`; a test keeps the two
equal), and every reader asks this module rather than repeating it."""

from __future__ import annotations

from typing import Any

#: the values conf/config.yaml gives, for configurations written before the keys existed
DEFAULTS: dict[str, Any] = {
    "validation.fraction": 0.0,
    "validation.objective_last": 3,
    "evaluation.test": True,
}


def raw(cfg: Any, key: str) -> Any:
    """The value of one of :data:`DEFAULTS`' keys in ``cfg``, unchecked, or its default."""
    section, name = key.split(".")
    value = (cfg.get(section) or {}).get(name)
    return DEFAULTS[key] if value is None else value


def validation_fraction(cfg: Any) -> float:
    """The share of the training data the server holds out for validation (0: none)."""
    return float(raw(cfg, "validation.fraction"))


def objective_last(cfg: Any) -> int:
    """How many of the last validated rounds the tuning objective averages."""
    return int(raw(cfg, "validation.objective_last"))


def reads_test(cfg: Any) -> bool:
    """Whether the server scores the global model on the test set (false in tuning)."""
    return bool(raw(cfg, "evaluation.test"))
