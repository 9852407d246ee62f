"""The Markdown of ``fedimb compare``: a caption saying what the numbers are, then per set-up
the methods' means with t intervals and paired differences to the reference, the variance
between and within data seeds where runs form a grid, and the accuracy over clients where
runs tested locally."""

from __future__ import annotations

from fedimb.cli.results.compare_stats import CONFIDENCE, MethodComparison, SetupComparison

#: what a metric of summary.json is, and on which split
METRIC_MEANINGS = {
    "final_accuracy": "final test accuracy (the last tested round, on the test set)",
    "selected_test_accuracy": "test accuracy at the round of best validation accuracy "
    "(the round chosen on the validation split)",
    "validation_objective": "validation objective (mean validation accuracy of the last "
    "validation.objective_last tested rounds, on the validation split)",
    "final_validation_accuracy": "final validation accuracy (on the validation split)",
    "validation_best_accuracy": "best validation accuracy over rounds (validation split)",
    "best_accuracy": "best test accuracy over rounds (chosen on the test set, as some papers "
    "report it)",
    "final_macro_f1": "final test macro-F1 (on the test set)",
    "personal_selected_accuracy": "personal models' mean test accuracy over clients at the "
    "round of best mean accuracy on the clients' own validation shares",
    "personal_selected_worst_10": "personal models' test accuracy on the worst 10% of "
    "clients, at the round the clients' validation shares choose",
    "personal_validation_objective": "personal models' validation objective (on the clients' "
    "own validation shares)",
}
#: the level below which a Holm-adjusted p calls a difference real
ALPHA = 1 - CONFIDENCE


def in_percent(metric: str) -> bool:
    """Whether ``metric`` is a fraction shown in % (accuracies, F1, the objective)."""
    fraction = any(word in metric for word in ("accuracy", "f1", "objective", "worst", "best_10"))
    return fraction and not metric.endswith("variance")


def lower_is_better(metric: str) -> bool:
    """Whether a smaller ``metric`` is the better one (losses, time, traffic, spread)."""
    return metric.endswith(("loss", "seconds", "variance")) or metric.startswith(
        ("bytes", "clients_lost", "round_to")
    )


def caption(metric: str, reference: str | None) -> list[str]:
    """What the tables' numbers are: the metric and its split, the interval, test, correction."""
    unit = " in %" if in_percent(metric) else ""
    meaning = METRIC_MEANINGS.get(metric, f"summary.json's {metric}")
    lines = [
        f"Metric: `{metric}`, {meaning}{unit}. Each row: its n runs (one per seed pair), their "
        f"mean and {CONFIDENCE:.0%} t interval (Student's t, n − 1 degrees of freedom)."
    ]
    if reference:
        direction = "lower" if lower_is_better(metric) else "higher"
        lines.append(
            f"Δ: the row minus {reference} over the seeds both ran (paired by (seed_data, "
            f"seed_train)), its mean with a {CONFIDENCE:.0%} t interval; p: the paired t-test "
            f"(scipy.stats.ttest_rel, two-sided); Holm p: Holm's correction across the methods "
            f"of the set-up. better / worse ({direction} is better): Holm p < {ALPHA:.2g}, so "
            f"the interval excludes 0; otherwise not distinguishable."
        )
    return lines


def _scale(metric: str) -> float:
    return 100.0 if in_percent(metric) else 1.0


def _plural(count: int, one: str) -> str:
    return f"{count} {one}{'' if count == 1 else 's'}"


def verdict(row: MethodComparison, metric: str) -> str:
    """better / worse / not distinguishable, with the Holm-adjusted p; n/a below 2 pairs."""
    diff = row.difference
    if diff is None:
        return "-"
    if diff.p is None or row.holm_p is None or diff.low is None or diff.high is None:
        return f"n/a ({_plural(diff.pairs, 'pair')})"
    if row.holm_p >= ALPHA or diff.low <= 0 <= diff.high:
        return f"not distinguishable (Holm p = {row.holm_p:.3g})"
    higher = diff.low > 0
    better = higher != lower_is_better(metric)
    return f"{'better' if better else 'worse'} (Holm p = {row.holm_p:.3g})"


def _cells(row: MethodComparison, comparison: SetupComparison) -> list[str]:
    scale = _scale(comparison.metric)
    interval = row.interval
    if interval is None:
        cells = ["0", "-", "-"]
    else:
        bounds = (
            f"[{interval.low * scale:.2f}, {interval.high * scale:.2f}]"
            if interval.low is not None and interval.high is not None
            else f"n/a (n = {interval.n})"
        )
        cells = [str(interval.n), f"{interval.mean * scale:.2f}", bounds]
    if row.not_numbers:  # NaN is never averaged in
        cells[0] += f" ({row.not_numbers} not a number, left out)"
    if comparison.reference is None:
        return cells
    diff = row.difference
    if row.label == comparison.reference or diff is None:
        return cells + ["-", "-", "-", "-", "-", "reference"]
    pairs = str(diff.pairs) + (f" ({diff.unpaired} unpaired)" if diff.unpaired else "")
    if diff.low is None or diff.high is None or diff.p is None or diff.mean is None:
        unknown = f"n/a ({_plural(diff.pairs, 'pair')})"
        mean = "-" if diff.mean is None else f"{diff.mean * scale:+.2f}"
        return cells + [pairs, mean, unknown, unknown, "-", verdict(row, comparison.metric)]
    return cells + [
        pairs,
        f"{diff.mean * scale:+.2f}",
        f"[{diff.low * scale:+.2f}, {diff.high * scale:+.2f}]",
        f"{diff.p:.3g}",
        "-" if row.holm_p is None else f"{row.holm_p:.3g}",
        verdict(row, comparison.metric),
    ]


def methods_table(comparison: SetupComparison) -> list[str]:
    """The set-up's rows: n, mean, t interval and, with a reference, the paired difference."""
    unit = " (%)" if in_percent(comparison.metric) else ""
    header = f"| method | n | mean{unit} | {CONFIDENCE:.0%} t interval{unit} |"
    if comparison.reference is not None:
        points = " (points)" if unit else ""
        header += (
            f" pairs | Δ vs {comparison.reference}{points} | {CONFIDENCE:.0%} t interval of Δ "
            "| p (paired t) | Holm p | verdict |"
        )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in comparison.methods:
        lines.append(f"| {row.label} | " + " | ".join(_cells(row, comparison)) + " |")
    return lines


def variance_table(comparison: SetupComparison) -> list[str]:
    """Between and within data seeds, for the rows whose runs form a grid of seeds."""
    rows = [m for m in comparison.methods if m.variance is not None]
    if not rows:
        return []
    square = 100.0**2 if in_percent(comparison.metric) else 1.0
    unit = " (%²)" if in_percent(comparison.metric) else ""
    lines = [
        "Variance over seeds (one-way random effects, grouped by seed_data): between = sample "
        "variance of the per-data-seed means, within = mean of the per-data-seed variances over "
        "seed_train, data component = max(0, between − within / runs per data seed).",
        "",
        f"| method | data seeds × training seeds | between{unit} | within{unit} "
        f"| data component{unit} |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        split = row.variance
        assert split is not None
        lines.append(
            f"| {row.label} | {split.data_seeds} × {split.train_seeds} | "
            f"{split.between * square:.3g} | {split.within * square:.3g} | "
            f"{split.data_component * square:.3g} |"
        )
    return lines


def local_table(comparison: SetupComparison) -> list[str]:
    """The mean over runs of each row's last local evaluation (accuracy over clients)."""
    keys = sorted({k for m in comparison.methods for k in m.local})
    if not keys:
        return []
    header = "| method | runs |" + "".join(
        f" {k.removeprefix('local_')}{' (%²)' if k.endswith('variance') else ' (%)'} |"
        for k in keys
    )
    lines = [
        "Accuracy over clients (the last local evaluation on each client's local test set): "
        "mean over the row's runs.",
        "",
        header,
        "|" + "---|" * (header.count("|") - 1),
    ]
    for row in comparison.methods:
        if not row.local:
            continue
        cells = [
            "-"
            if k not in row.local
            else f"{row.local[k] * (1.0 if k.endswith('variance') else 100.0):.2f}"
            for k in keys
        ]
        lines.append(f"| {row.label} | {len(row.runs)} | " + " | ".join(cells) + " |")
    return lines


def comparison_markdown(comparisons: list[SetupComparison]) -> str:
    """The caption, then per set-up its tables (see the module docstring)."""
    if not comparisons:
        return ""
    metric = comparisons[0].metric
    reference = next((c.reference for c in comparisons if c.reference), None)
    lines = [*caption(metric, reference), ""]
    for comparison in comparisons:
        lines += [f"## {comparison.name}", ""]
        if comparison.reference is None and comparison.against:
            lines += [f"No run of {comparison.against} in this set-up: no paired differences.", ""]
        lines += methods_table(comparison)
        for extra in (variance_table(comparison), local_table(comparison)):
            if extra:
                lines += ["", *extra]
        lines.append("")
    return "\n".join(lines)
