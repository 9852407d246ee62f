"""The files of a run folder besides the stream: metrics.csv (long format), a method's
artifacts (``<name>.json`` / ``.png``), curves.png, and what summary.json derives from
the rounds."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedimb.cli.rundir.reader import read_metrics_csv as read_metrics_csv  # benchmarks' import
from fedimb.core.metrics import DISTRIBUTION_STATS

#: the run folder's own files (without suffix), which no artifact may replace
FRONT_END_FILES = frozenset(
    {
        "config",
        "partition",
        "summary",
        "metrics",
        "events",
        "curves",
        "flwr",
        "superlink",
        "superlink_run",
        "tracking",
        "report",
    }
)


def write_artifact(run_dir: Path, name: str, data: Any) -> None:
    """A method's structured output (clusters, inferred distributions, curves) as
    ``<name>.json``; data with ``x`` and ``y`` lists is also plotted as ``<name>.png``."""
    safe = "".join(ch for ch in name if ch.isalnum() or ch in "-_") or "artifact"
    if safe.lower() in FRONT_END_FILES:  # never one of the files the front end writes
        safe = f"artifact-{safe}"
    (run_dir / f"{safe}.json").write_text(json.dumps(data, indent=1) + "\n")
    if (
        isinstance(data, dict)
        and isinstance(data.get("x"), list)
        and isinstance(data.get("y"), list)
    ):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(data["x"], data["y"], marker="o")
        ax.set(
            xlabel=data.get("xlabel", ""),
            ylabel=data.get("ylabel", ""),
            title=data.get("title", safe),
        )
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(run_dir / f"{safe}.png", dpi=110)
        plt.close(fig)


def traffic_to_target(rounds: list[dict[str, Any]], target: float) -> tuple[int, int] | None:
    """(round, bytes up + down so far) when test accuracy first reaches ``target``."""
    total = 0
    for r in rounds:
        total += sum((r.get("bytes") or {}).values())
        accuracy = (r.get("test") or {}).get("accuracy")
        if accuracy is not None and accuracy >= target:
            return r["round"], total
    return None


def _accuracy(r: dict[str, Any], split: str) -> float | None:
    return (r.get(split) or {}).get("accuracy")


def selection_scores(rounds: list[dict[str, Any]], objective_last: int | None) -> dict[str, Any]:
    """The scores a run reports, each from the split it names: the final test accuracy (and
    its round), the final and best validation accuracy (the first round reaching the best),
    the test accuracy in that round (``selected_test_accuracy``: the model validation
    selects) and ``validation_objective``, the mean validation accuracy of the last
    ``objective_last`` validated rounds (the tuning objective; None without
    ``objective_last``). None where a split is absent."""
    tested = [r for r in rounds if _accuracy(r, "test") is not None]
    validated = [r for r in rounds if _accuracy(r, "validation") is not None]
    best = max(validated, key=lambda r: _accuracy(r, "validation") or 0.0, default=None)
    last = [
        float(_accuracy(r, "validation") or 0.0)
        for r in (validated[-objective_last:] if objective_last else [])
    ]
    return {
        "final_accuracy": _accuracy(tested[-1], "test") if tested else None,
        "final_round": tested[-1]["round"] if tested else None,
        "final_validation_accuracy": _accuracy(validated[-1], "validation") if validated else None,
        "validation_best_accuracy": _accuracy(best, "validation") if best else None,
        "validation_best_round": best["round"] if best else None,
        "selected_test_accuracy": _accuracy(best, "test") if best else None,
        "validation_objective": sum(last) / len(last) if last else None,
    }


def metric_rows(r: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(split, metric, value) rows of one round event."""
    rows: list[tuple[str, str, float]] = []
    test = r.get("test") or {}
    for split in ("test", "validation"):
        scores = r.get(split) or {}
        for key in ("accuracy", "macro_f1", "loss"):
            if scores.get(key) is not None:
                rows.append((split, key, scores[key]))
    for c, recall in enumerate(test.get("recall") or []):
        if recall is not None:
            rows.append(("test", f"recall_class_{c}", recall))
    for key, value in (r.get("train") or {}).items():
        rows.append(("train", key, value))
    for key, value in (r.get("clients") or {}).items():
        rows.append(("clients", key, value))
    for key, value in (r.get("bytes") or {}).items():
        rows.append(("comm", f"bytes_{key}", value))
    if r.get("weight_diversity") is not None:
        rows.append(("train", "weight_diversity", r["weight_diversity"]))
    for key, value in (r.get("extra") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append(("extra", key, value))
    for model, local in (r.get("local") or {}).items():  # the accuracy distribution over clients
        prefix = "" if model == "global" else f"{model}_"
        for stat in DISTRIBUTION_STATS:
            rows.append(("local", f"{prefix}accuracy_{stat}", local.get(stat)))
        for client, accuracy in (local.get("accuracy") or {}).items():
            rows.append(("local", f"{prefix}accuracy_client_{client}", accuracy))
    if r.get("seconds") is not None:
        rows.append(("system", "seconds", r["seconds"]))
    for phase, seconds in (
        r.get("timing") or {}
    ).items():  # where the round's time went (fedimb.app.server.phases)
        rows.append(("time", phase, seconds))
    return [(s, m, float(v)) for s, m, v in rows if v is not None and math.isfinite(float(v))]


def write_metrics_csv(path: Path, rounds: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["round", "stage", "split", "metric", "value"])
        for r in rounds:
            for split, metric, value in metric_rows(r):
                writer.writerow([r["round"], r.get("stage", ""), split, metric, f"{value:.10g}"])


#: a round's sampled clients by outcome, as the progress line and curves.png name them: ok,
#: dropped (the availability model's choice, not a fault) and failed (the client raised or
#: timed out, or its update was rejected)
CLIENT_OUTCOMES: dict[str, Callable[[dict[str, int]], int]] = {
    "ok": lambda c: c["succeeded"],
    "dropped": lambda c: c.get("dropped", 0),
    "failed": lambda c: c.get("errors", 0) + c.get("rejected", 0),
}


def plot_curves(path: Path, rounds: list[dict[str, Any]], title: str) -> None:
    """Test accuracy and macro-F1 (and, dashed, the validation accuracy where the run has a
    validation share), test loss and client outcomes per round (the outcomes' legend beside
    the bars, never over them; whole numbers on the round and client axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tested = [r for r in rounds if (r.get("test") or {}).get("accuracy") is not None]
    trained = [r for r in rounds if r["round"] > 0 and r.get("clients")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    x = [r["round"] for r in tested]
    axes[0].plot(x, [r["test"]["accuracy"] for r in tested], label="accuracy")
    axes[0].plot(x, [r["test"].get("macro_f1") for r in tested], label="macro-F1")
    validated = [r for r in rounds if _accuracy(r, "validation") is not None]
    if validated:
        axes[0].plot(
            [r["round"] for r in validated],
            [_accuracy(r, "validation") for r in validated],
            linestyle="--",
            label="validation accuracy",
        )
    axes[0].set(xlabel="round", ylabel="test score", ylim=(0, 1), title=title)
    axes[0].legend()
    axes[1].plot(x, [r["test"].get("loss") for r in tested])
    axes[1].set(xlabel="round", ylabel="test loss")
    xr = [r["round"] for r in trained]
    bottom = [0] * len(trained)
    for label, count in CLIENT_OUTCOMES.items():
        heights = [count(r["clients"]) for r in trained]
        if any(heights) or label == "ok":
            axes[2].bar(xr, heights, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights)]
    axes[2].set(xlabel="round", ylabel="clients")
    axes[2].legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
