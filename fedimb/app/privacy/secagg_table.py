"""The SecAgg+ table of docs/privacy.md: per method, whether ``secagg=secaggplus`` runs it
and, where not, why, read from each method's declarations by the function the
configuration check uses (:func:`fedimb.app.privacy.secagg.method_refusal`).
``benchmarks/perf/secagg.py --table-only`` writes it to ``docs/tables/secagg_methods.md``; a
test holds the file to this module's output."""

from __future__ import annotations

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.keys import DEFAULT_STRATEGY, group_choices, hydra_config
from fedimb.app.privacy import secagg

HEADER = ["| method | under `secagg=secaggplus` |", "|---|---|"]


def method_row(name: str) -> str:
    """One row, for the method ``conf/method/<name>.yaml`` composes (its own payloads: the
    framework's optional ones, ``normalize`` and ``evaluation.personal``, count where a
    configuration turns them on)."""
    composed = hydra_config([f"method={name}"])
    node = composed.method.get("strategy")
    strategy_cls = import_class(str(node._target_ if node else DEFAULT_STRATEGY))
    settings = {str(k): v for k, v in (node or {}).items() if k != "_target_"}
    reason = secagg.method_refusal(strategy_cls, settings, composed)
    if reason is not None:
        verdict = f"refused: it {reason}"
    elif composed.shrink.name != "none":
        shrink = composed.shrink.name
        verdict = f"refused: its server rescales the mean from every model (`shrink={shrink}`)"
    else:
        verdict = "runs"
    return f"| {name} | {verdict} |"


def secagg_table() -> list[str]:
    """The table's markdown lines, one row per method option, in name order."""
    return [*HEADER, *(method_row(name) for name in group_choices("method"))]
