"""The report's tables: runs grouped into rows by set-up, and each row's numbers as Markdown.

A row is the runs of one set-up (everything in ``config.yaml`` but the seed and where/how
they ran), labelled by the method and the settings that tell the rows apart. Each row gives
mean ± sample std over its runs of the final test accuracy, the test accuracy at the round
of best validation accuracy (where runs have a validation share: the model validation
selects) and the final macro-F1 (the maximum over rounds of the test accuracy is chosen on
the test set: it stays in summary.json and the export, not here), and the last value of the
method's own scores (the ``extra`` metrics named ``*accuracy``, ``*f1`` or ``T_*``, e.g.
FedBABU's fine-tuned accuracy or GRP-FED's T_g/T_p/T_r/T_l). Optional columns: the mean
over rounds, or the range over every round of every run, of other ``extra`` metrics. The
per-run table gives every run's own numbers (seed, final test accuracy, the best validation
round and the test accuracy there, test accuracy and loss at chosen rounds). The functions
take run records or run folders (benchmarks pass folders).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.cli.results.run_records import Run, RunRecord, as_record
from fedimb.cli.rundir.reader import finite_number


def mean_std(values: list[Any], scale: float = 100.0, digits: int = 2) -> str:
    """mean ± sample std of ``values`` x ``scale`` over those known ('-' when none is; the
    value and "(n = 1)" when one is). A NaN or a non-number is never averaged in: the
    cell says how many were left out."""
    known = [v for v in values if v is not None]
    finite = [v for v in known if finite_number(v)]
    left_out = (
        f" ({len(known) - len(finite)} not a number, left out)" if len(finite) < len(known) else ""
    )
    if not finite:
        return "-" + left_out
    arr = np.asarray(finite, dtype=np.float64) * scale
    if len(arr) == 1:  # one value has no spread: "± 0.00" would claim one
        return f"{arr[0]:.{digits}f} (n = 1){left_out}"
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=1):.{digits}f}{left_out}"


def _percent(value: Any) -> str:
    """A fraction as a percentage with two decimals ('-' when unknown)."""
    if value is None:
        return "-"
    return f"{100 * value:.2f}" if finite_number(value) else "not a number"


def group_runs(run_dirs: Sequence[Run]) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Runs with the same set-up, and a legend of the set-ups.

    Only settings every run has (every run of the method, for ``method.*``) are
    compared, so runs made before a setting existed group with runs that use its default.
    A row is labelled by its method, the method's own settings (``method.*``) that differ
    across that method's runs, and, when the runs come from several set-ups, the set-up's
    letter; the legend gives each letter's settings that differ between set-ups.
    """
    setups = {run: as_record(run).setup for run in run_dirs}
    by_method: dict[Any, list[Run]] = {}
    for run, setup in setups.items():
        by_method.setdefault(setup["method.name"], []).append(run)

    def varying(runs: list[Run], method_keys: bool) -> list[str]:
        """Settings of the one kind that all ``runs`` have and that differ between them."""
        common = set.intersection(*(set(setups[r]) for r in runs))
        return sorted(
            k
            for k in common
            if k.startswith("method.") == method_keys
            and k != "method.name"
            and len({repr(setups[r][k]) for r in runs}) > 1
        )

    shared = varying(list(setups), method_keys=False)
    own = {name: varying(runs, method_keys=True) for name, runs in by_method.items()}
    letters: dict[str, str] = {}
    labelled: dict[str, list[Run]] = {}
    for run, setup in setups.items():
        name = setup["method.name"]
        settings = ", ".join(f"{k}={setup[k]}" for k in shared)
        letter = letters.setdefault(settings, chr(ord("A") + len(letters)) if shared else "")
        details = ", ".join(f"{k.removeprefix('method.')}={setup[k]}" for k in own[name])
        label = (
            f"{name}" + (f" ({details})" if details else "") + (f" [{letter}]" if letter else "")
        )
        labelled.setdefault(label, []).append(run)
    return labelled, {letter: settings for settings, letter in letters.items() if letter}


def _rows(run: Run, split: str) -> list[dict[str, Any]]:
    return [r for r in as_record(run).rows if r["split"] == split]


def records_of(groups: Mapping[str, Sequence[Run]]) -> dict[str, list[RunRecord]]:
    """The groups with every run loaded once (callers may pass folders)."""
    return {label: [as_record(run) for run in runs] for label, runs in groups.items()}


def own_scores(run: Run) -> dict[str, float]:
    """The last value of each of the method's own scores (see the module docstring)."""
    return {
        r["metric"]: r["value"]
        for r in _rows(run, "extra")
        if r["metric"].endswith(("accuracy", "f1")) or r["metric"].startswith("T_")
    }


def extra_means(run: Run, keys: list[str]) -> dict[str, float]:
    """Mean over rounds of the 'extra' metrics ``keys`` (e.g. a KL divergence per round)."""
    values: dict[str, list[float]] = {}
    for row in _rows(run, "extra"):
        if row["metric"] in keys:
            values.setdefault(row["metric"], []).append(row["value"])
    return {k: float(np.mean(v)) for k, v in values.items()}


def extra_range(run: Run, pattern: str) -> tuple[float, float] | None:
    """(min, max) over every round of the 'extra' metrics matching the shell pattern
    ``pattern`` (e.g. ``q`` or ``contribution.*``); None if the run has none."""
    values = [
        row["value"] for row in _rows(run, "extra") if fnmatch.fnmatchcase(row["metric"], pattern)
    ]
    return (min(values), max(values)) if values else None


def value_range(ranges: list[tuple[float, float] | None]) -> str:
    """'min – max' over several runs' ranges ('-' when none has the metric)."""
    found = [r for r in ranges if r is not None]
    if not found:
        return "-"
    return f"{min(lo for lo, _ in found):.3g} – {max(hi for _, hi in found):.3g}"


def metric_curve(run: Run, metric: str = "accuracy", split: str = "test") -> dict[int, float]:
    """round -> value of ``metric`` (by default the global test set's; ``split="local"``:
    the local evaluation's, e.g. ``accuracy_worst_10``)."""
    return {r["round"]: r["value"] for r in _rows(run, split) if r["metric"] == metric}


def comparison_table(
    groups: Mapping[str, Sequence[Run]],
    mean_keys: Sequence[str] = (),
    range_keys: Sequence[str] = (),
) -> list[str]:
    """Markdown lines of the table (see the module docstring); ``mean_keys`` adds columns
    of 'extra' metrics averaged over rounds, ``range_keys`` (shell patterns) columns of
    their smallest and largest value over every round of every run of the row."""
    records = records_of(groups)
    summaries = {label: [r.summary for r in runs] for label, runs in records.items()}
    target = next(
        (
            s["target_accuracy"]
            for v in summaries.values()
            for s in v
            if finite_number(s.get("target_accuracy")) and s["target_accuracy"] > 0
        ),
        None,
    )
    scores = {label: [own_scores(r) for r in runs] for label, runs in records.items()}
    score_keys = sorted({k for per_run in scores.values() for s in per_run for k in s})
    validated = any(
        s.get("selected_test_accuracy") is not None for v in summaries.values() for s in v
    )
    header = "| method | runs | final test accuracy (%) |"
    header += " test accuracy at best validation round (%) |" if validated else ""
    header += " final macro-F1 (%) |"
    if target:
        header += f" MB to {target:.0%} accuracy (runs reaching it) |"
    header += "".join(f" {k} (mean over rounds) |" for k in mean_keys)
    header += "".join(f" {k} (range over rounds) |" for k in range_keys)
    header += "".join(f" final {k} (%) |" for k in score_keys)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for label, runs in records.items():
        done = summaries[label]
        row = f"| {label} | {len(runs)} | {mean_std([s.get('final_accuracy') for s in done])} |"
        if validated:
            row += f" {mean_std([s.get('selected_test_accuracy') for s in done])} |"
        row += f" {mean_std([s.get('final_macro_f1') for s in done])} |"
        if target:
            reached = [
                s["bytes_to_target"] for s in done if finite_number(s.get("bytes_to_target"))
            ]
            row += f" {mean_std(reached, scale=1e-6, digits=1)} ({len(reached)}/{len(done)}) |"
        means = [extra_means(r, list(mean_keys)) for r in runs]
        for key in mean_keys:
            row += f" {mean_std([m[key] for m in means if key in m], scale=1.0, digits=3)} |"
        for pattern in range_keys:
            row += f" {value_range([extra_range(r, pattern) for r in runs])} |"
        for key in score_keys:
            row += f" {mean_std([s[key] for s in scores[label] if key in s])} |"
        lines.append(row)
    return lines


def per_run_table(groups: Mapping[str, Sequence[Run]], at_rounds: Sequence[int] = ()) -> list[str]:
    """Markdown lines with one row per run: its seed, final test accuracy, (where runs have
    a validation share) the round of best validation accuracy and the test accuracy there,
    final macro-F1 and, at each of ``at_rounds``, its test accuracy (loss)."""
    records = records_of(groups)
    validated = any(
        r.summary.get("validation_best_round") is not None for v in records.values() for r in v
    )
    header = "| method | seed | final test accuracy (%) |"
    if validated:
        header += " best validation round | test accuracy there (%) |"
    header += " final macro-F1 (%) |"
    header += "".join(f" round {r}: accuracy % (loss) |" for r in at_rounds)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for label, runs in records.items():
        for run in sorted(runs, key=lambda r: str(r.seed).zfill(9)):
            s = run.summary
            accuracy, loss = metric_curve(run), metric_curve(run, "loss")
            row = f"| {label} | {run.seed} | {_percent(s.get('final_accuracy'))} |"
            if validated:
                best_round = s.get("validation_best_round")
                row += f" {'-' if best_round is None else best_round} |"
                row += f" {_percent(s.get('selected_test_accuracy'))} |"
            row += f" {_percent(s.get('final_macro_f1'))} |"
            for r in at_rounds:
                row += (
                    f" {100 * accuracy[r]:.2f} ({loss[r]:.4f}) |"
                    if r in accuracy and r in loss
                    else " - |"
                )
            lines.append(row)
    return lines
