"""The rules of the run's two seeds (:mod:`fedimb.app.configuration.seeds`), of the
validation share the server holds out (``validation``) and of ``evaluation.test``: a part
of the one table of :mod:`fedimb.app.configuration.validation`."""

from __future__ import annotations

from omegaconf import DictConfig

from fedimb.app.configuration import holdout
from fedimb.app.configuration.components import import_class
from fedimb.core.errors import is_int, is_number, require


def check_seeds_and_holdout(cfg: DictConfig) -> None:
    """``seed_data``/``seed_train`` null or integers >= 0; ``validation.fraction`` in [0, 1)
    and ``validation.objective_last`` >= 1; a run that does not read the test set
    (``evaluation.test=false``) has a validation share to score instead."""
    for key in ("seed_data", "seed_train"):
        value = cfg.get(key)
        require(
            value is None or (is_int(value) and value >= 0),
            f"{key} must be an integer >= 0 or null, got {value!r}",
        )
    fraction = holdout.raw(cfg, "validation.fraction")
    require(
        is_number(fraction) and 0 <= fraction < 1,
        f"validation.fraction must be in [0, 1), got {fraction!r}",
    )
    last = holdout.raw(cfg, "validation.objective_last")
    require(
        is_int(last) and last >= 1,
        f"validation.objective_last must be an integer >= 1, got {last!r}",
    )
    require(
        not (fraction > 0 and str(cfg.partition.name) == "file"),
        "partition=file gives indices into the whole training split: it cannot be combined "
        "with validation.fraction > 0 (set validation.fraction=0)",
    )
    reads_test = holdout.raw(cfg, "evaluation.test")
    require(
        isinstance(reads_test, bool),
        f"evaluation.test must be true or false, got {reads_test!r}",
    )
    require(
        reads_test or fraction > 0,
        "evaluation.test=false leaves nothing to score: set validation.fraction > 0 "
        "(e.g. validation.fraction=0.1)",
    )
    if not reads_test:
        check_no_client_reads_test(cfg)


def check_no_client_reads_test(cfg: DictConfig) -> None:
    """Without the test set, no client may test on it either: the personal evaluation
    (``evaluation.personal``) and an ensemble's global score (``ensemble_global_test``:
    LG-FedAvg, local-only) are the clients' answers on the test set. With the clients' own
    validation shares (``evaluation.local_validation_fraction``) both score those alone."""
    if float(cfg.evaluation.local_validation_fraction) > 0:
        return
    require(
        not cfg.evaluation.get("personal"),
        "evaluation.personal tests on the test set: with evaluation.test=false set "
        "evaluation.local_validation_fraction > 0 to score the clients' validation shares",
    )
    strategy = import_class(str(cfg.method.strategy._target_))
    require(
        not getattr(strategy, "ensemble_global_test", False),
        f"method '{cfg.method.name}' scores an ensemble of its clients on the test set and "
        "has no validation score: with evaluation.test=false set "
        "evaluation.local_validation_fraction > 0 to score its clients' validation shares",
    )
