"""Classification metrics on label arrays (numpy only)."""

from __future__ import annotations

import numpy as np


def classification_metrics(
    y_true: np.ndarray, y_pred: np.ndarray, num_classes: int
) -> dict[str, object]:
    """Accuracy, macro-F1 and per-class recall.

    Macro-F1 averages over the classes present in ``y_true`` (on a balanced test set:
    all classes); recall of a class absent from ``y_true`` is reported as NaN.
    """
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    confusion = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(confusion, (y_true, y_pred), 1)
    tp = np.diag(confusion).astype(np.float64)
    support = confusion.sum(axis=1).astype(np.float64)
    predicted = confusion.sum(axis=0).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(support > 0, tp / support, np.nan)
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        f1 = np.where(
            precision + np.nan_to_num(recall) > 0,
            2 * precision * recall / (precision + recall),
            0.0,
        )
    present = support > 0
    return {
        "accuracy": float(tp.sum() / max(len(y_true), 1)),
        "macro_f1": float(np.nanmean(f1[present])) if present.any() else float("nan"),
        "recall": [None if np.isnan(r) else float(r) for r in recall],
    }


#: the statistics of :func:`accuracy_distribution` that reports and trackers show
DISTRIBUTION_STATS = ("average", "worst_10", "best_10", "variance")


def accuracy_distribution(accuracies: dict[int, float]) -> dict[str, float]:
    """How one model's accuracy spreads over clients (q-FFL, ICLR 2020, §5: average, worst
    and best 10%, variance): the unweighted mean over clients, the mean of the lowest and of
    the highest ceil(10%) of them, and the population variance of the accuracies in
    percent (%²), as q-FFL's tables give it."""
    values = np.sort(np.asarray(list(accuracies.values()), dtype=np.float64))
    tail = max(1, int(np.ceil(0.1 * len(values))))
    return {
        "clients": int(len(values)),
        "average": float(values.mean()),
        "worst_10": float(values[:tail].mean()),
        "best_10": float(values[-tail:].mean()),
        "variance": float(np.var(100.0 * values)),
    }
