"""The table of docs/privacy.md: per method, what its clients send the server besides
their model update, and whether ``privacy=dp_*`` runs it, read from each method's
declarations (its strategy's ``payloads``, ``robust_aggregation``,
``ensemble_global_test``) by the same functions the configuration check uses
(:mod:`fedimb.app.privacy.dp`). ``benchmarks/accuracy/privacy.py --table-only`` writes it
to ``docs/tables/privacy_payloads.md``; a test holds the file to this module's output."""

from __future__ import annotations

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.keys import DEFAULT_STRATEGY, group_choices, hydra_config
from fedimb.app.privacy import dp as privacy
from fedimb.core import protocol, schema

#: the framework's own payloads, which every method's clients may send (the page says when)
FRAMEWORK_PAYLOADS = frozenset(
    spec.name for spec in protocol.PERSONAL_PAYLOADS + (protocol.LABEL_COUNTS_PAYLOAD,)
)
HEADER = [
    "| method | server averages the client models | fit results carry besides the update "
    "| answers to the server's queries carry | under `privacy=dp_*` |",
    "|---|---|---|---|---|",
]


def shown_shape(shape) -> str:
    """A declared shape in words: ``k × feature_dim``, ``one per parameter``, ``scalar``."""
    if shape == schema.MODEL:
        return "one per parameter"
    return " × ".join(str(d) for d in shape) if shape else "scalar"


def shown_payloads(specs, direction: str) -> str:
    """The method's own payloads of ``direction``, each with its kind and shape."""
    found = [
        f"`{spec.name}` ({spec.kind}, {shown_shape(spec.shape)})"
        for spec in specs
        if spec.direction == direction and spec.name not in FRAMEWORK_PAYLOADS
    ]
    return ", ".join(found) or "—"


def method_row(name: str) -> str:
    """One row of the table, for the method ``conf/method/<name>.yaml`` composes."""
    composed = hydra_config([f"method={name}"])
    method = composed.method
    node = method.get("strategy")
    strategy_cls = import_class(str(node._target_ if node else DEFAULT_STRATEGY))
    settings = {str(k): v for k, v in (node or {}).items() if k != "_target_"}
    reason = privacy.not_averaging_reason(strategy_cls, settings)
    specs = getattr(strategy_cls, "payloads", protocol.BASE_PAYLOADS)
    own = [n for n in privacy.uncovered_payloads(strategy_cls) if n not in FRAMEWORK_PAYLOADS]
    if reason is not None:
        verdict = f"refused: it {reason}"
    elif composed.shrink.name != "none":
        verdict = f"refused: its server rescales the average (`shrink={composed.shrink.name}`)"
    elif own:
        verdict = "only with `privacy.payloads=unprotected`"
    else:
        verdict = "runs"
    averages = "no" if reason is not None else "yes"
    return (
        f"| {name} | {averages} | {shown_payloads(specs, schema.UP)} "
        f"| {shown_payloads(specs, schema.ANSWER)} | {verdict} |"
    )


def payload_table() -> list[str]:
    """The table's markdown lines, one row per method option, in name order."""
    return [*HEADER, *(method_row(name) for name in group_choices("method"))]
