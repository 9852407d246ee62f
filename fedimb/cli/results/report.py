"""One comparison table and accuracy plot over many run folders (``fedimb report``).

Runs are grouped by everything in their ``config.yaml`` but the seed and where/how they
ran (output folder, runtime, checkpointing), so the seeds of one set-up form one row
(:mod:`fedimb.cli.results.report_tables`). Optional section: every run's own numbers, so figures
quoted about single seeds come from the same command as the table; and where runs made a
local evaluation, the accuracy over clients (:mod:`fedimb.cli.results.report_clients`).

Each run counts once, known by its run id (:mod:`fedimb.cli.results.run_records`). A rerun of the
same set-up and seed under another run id would shrink the spread a row shows, so by
default only the newest run of each set-up and seed is averaged and the others are named
in a warning (``keep_reruns`` averages them in); the heading counts what was found and
what was left out. A value from a single run reads "(n = 1)", not "± 0.00".

The report also reads tables written by ``fedimb export`` (:mod:`fedimb.cli.results.export_table`),
alone or besides folders. A table's ``setup`` column carries each run's set-up, so its runs
group as their folders do (a table without it groups by its named run columns); their
final test accuracy, final macro-F1 and the test accuracy at the best validation round come
from their test and validation rows, and it holds no target
accuracy, so the traffic-to-target column comes from run folders only. Both sources become
:class:`~fedimb.cli.results.run_records.RunRecord` s, which is all the tables and the plot read.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedimb.cli.results.found_runs import FoundRuns, load_runs, plural
from fedimb.cli.results.report_clients import clients_table
from fedimb.cli.results.report_tables import (
    comparison_table,
    group_runs,
    metric_curve,
    per_run_table,
    records_of,
)
from fedimb.cli.results.run_records import Run
from fedimb.core.errors import ConfigError


def accuracy_plot(groups: dict[str, list[Run]], path: Path, title: str) -> None:
    """Mean test accuracy per round of every group, with a ±std band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, runs in records_of(groups).items():
        curves = [metric_curve(r) for r in runs]
        rounds = sorted(set.intersection(*(set(c) for c in curves)))
        values = np.array([[c[r] for r in rounds] for c in curves])
        mean, std = values.mean(axis=0), values.std(axis=0)
        ax.plot(rounds, mean, label=label)
        ax.fill_between(rounds, mean - std, mean + std, alpha=0.15)
    ax.set(xlabel="round", ylabel="test accuracy", title=title, ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine() -> str:
    """The machine a report or benchmark ran on: its architecture and CPU count."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs"


def heading(found: FoundRuns, rows: int, keep_reruns: bool) -> list[str]:
    """What the report counts: the runs per row (n), what was left out, and a warning
    naming the reruns of a set-up and seed (left out, or with ``keep_reruns`` averaged in)."""
    counted = len(found.counted(keep_reruns))
    per_seed = (
        "one per run, so a rerun counts its seed again"
        if keep_reruns and found.reruns
        else "one per seed"
    )
    lines = [
        f"{plural(counted, 'run')} in {plural(rows, 'row')}: a row gives mean ± sample std over "
        f'its n runs (column runs), {per_seed}; a value from a single run reads "(n = 1)".',
        found.tally("averaged in" if keep_reruns else "left out"),
    ]
    if found.reruns and keep_reruns:  # a paragraph of its own, so it is seen
        lines += [
            "",
            found.rerun_warning("averaged in (--keep-reruns), so those seeds count more than once"),
            "",
        ]
    elif found.reruns:
        lines += [
            "",
            found.rerun_warning(
                "left out, the newest run of each kept (pass --keep-reruns to average them in)"
            ),
            "",
        ]
    return lines


def write_report(
    folders: list[Path],
    out: Path,
    title: str = "Comparison",
    mean_keys: Sequence[str] = (),
    range_keys: Sequence[str] = (),
    per_run: bool = False,
    at_rounds: Sequence[int] = (),
    keep_reruns: bool = False,
) -> Path:
    """``<out>/report.md`` and ``<out>/accuracy.png`` over every completed run in ``folders``
    (run or sweep folders, or tables written by ``fedimb export``), each run once and, unless
    ``keep_reruns``, one run (the newest) per set-up and seed; with ``per_run`` (or
    ``at_rounds``) also a table of every run's own numbers."""
    found = load_runs(folders)
    runs = found.counted(keep_reruns)
    if not runs:
        raise ConfigError(f"no completed runs (summary.json) in {', '.join(map(str, folders))}")
    groups, legend = group_runs(runs)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# {title}",
        "",
        *heading(found, len(groups), keep_reruns),
        f"Machine: {machine()}.",
        "",
        *comparison_table(groups, mean_keys, range_keys),
        "",
    ]
    lines += [f"- [{letter}]: {settings}" for letter, settings in legend.items()]
    over_clients = clients_table(records_of(groups))
    if over_clients:
        lines += ["", *over_clients]
    if per_run or at_rounds:
        lines += ["", "## Every run", "", *per_run_table(groups, at_rounds)]
    lines += ["", "Runs: " + ", ".join(f"`{folder}`" for folder in folders)]
    accuracy_plot(groups, out / "accuracy.png", title)
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report
