"""The report's "Accuracy over clients" table: how the final model's accuracy spreads over
the clients' local test sets (q-FFL, ICLR 2020, §5: average, worst and best 10%, variance
in %²), from each run's last local evaluation, and where a FedAvg run of the same set-up
and seed is in the report, the share of clients on which the row's model is less
accurate than FedAvg's."""

from __future__ import annotations

from typing import Any

from fedimb.cli.results.report_tables import mean_std
from fedimb.cli.results.run_records import RunRecord
from fedimb.core.metrics import DISTRIBUTION_STATS as STATS

MODELS = {"global": "", "personal": "personal_"}  # the prefix of each model's metrics


def last_local(run: RunRecord, model: str = "global") -> dict[str, Any] | None:
    """The run's last local evaluation of ``model``: its statistics and each client's
    accuracy (``clients``), or None where the run has none."""
    prefix = MODELS[model]
    rows = [
        r
        for r in run.rows
        if r["split"] == "local" and r["metric"].startswith(f"{prefix}accuracy_")
    ]
    if not prefix:
        rows = [r for r in rows if not r["metric"].startswith("personal_")]
    if not rows:
        return None
    last = max(r["round"] for r in rows)
    values = {r["metric"][len(prefix) :]: r["value"] for r in rows if r["round"] == last}
    clients = {
        int(k.rsplit("_", 1)[1]): v for k, v in values.items() if k.startswith("accuracy_client_")
    }
    return {**{stat: values.get(f"accuracy_{stat}") for stat in STATS}, "clients": clients}


def share_below(clients: dict[int, float], reference: dict[int, float]) -> float | None:
    """The share of the clients both runs tested on which ``clients`` is below ``reference``."""
    common = sorted(set(clients) & set(reference))
    return sum(clients[k] < reference[k] for k in common) / len(common) if common else None


def _without_method(setup: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in setup.items() if not k.startswith("method.")))


def fedavg_reference(runs: list[RunRecord]) -> dict[tuple, dict[int, float]]:
    """FedAvg's clients' accuracies by (set-up without the method, seed)."""
    found = {}
    for run in runs:
        local = last_local(run)
        if run.setup.get("method.name") == "fedavg" and local is not None:
            found[(_without_method(run.setup), run.seed)] = local["clients"]
    return found


def clients_table(groups: dict[str, list[RunRecord]]) -> list[str]:
    """Markdown lines of the table (none where no run has a local evaluation)."""
    reference = fedavg_reference([run for runs in groups.values() for run in runs])
    lines = []
    for label, runs in groups.items():
        for model in MODELS:
            locals_ = [
                (run, local) for run in runs if (local := last_local(run, model)) is not None
            ]
            if not locals_:
                continue
            cells = [mean_std([local[stat] for _, local in locals_]) for stat in STATS[:3]]
            cells.append(mean_std([local["variance"] for _, local in locals_], scale=1.0, digits=1))
            below = [
                share_below(local["clients"], reference[key])
                for run, local in locals_
                if (key := (_without_method(run.setup), run.seed)) in reference
            ]
            below = [b for b in below if b is not None]
            cells.append(mean_std(below, scale=100.0, digits=1) if below else "-")
            name = label if model == "global" else f"{label} (personal)"
            lines.append(f"| {name} | {len(locals_)} | " + " | ".join(cells) + " |")
    if not lines:
        return []
    header = (
        "| method | runs | average (%) | worst 10% (%) | best 10% (%) | variance (%²) "
        "| clients below FedAvg (%) |"
    )
    return [
        "## Accuracy over clients",
        "",
        "The final model on each client's local test set (the last local evaluation); "
        'mean ± std over the n runs of a row (column runs; "(n = 1)": a single run, no '
        "spread). Below FedAvg: the share of clients on which the row's model is less "
        "accurate than FedAvg's (same set-up and seed).",
        "",
        header,
        "|" + "---|" * 7,
        *lines,
    ]
