"""``fedimb compare``: per set-up, each method's mean over seeds with its t interval, and its
seed-paired difference to a reference method with a paired t-test, Holm-corrected.

The runs are found as ``fedimb report`` finds them (:mod:`fedimb.cli.results.found_runs`).
A set-up is every setting of a run's ``config.yaml`` but the method's own, the seeds and
where or how it ran (:data:`fedimb.cli.results.run_records.NOT_SETUP`); set-ups are named
by the settings that differ between them. A method's own settings are ``method.*`` and
every setting that tuning searches (the keys of ``tune.search`` and of the method's
``search``, e.g. ``train.lr``): ``fedimb tune`` chooses those per method, so tuned methods
with different learning rates still meet in one set-up. Within a set-up a row is a method,
labelled also by its own settings where its runs differ in them.

Runs pair by seed: (seed_data, seed_train) from summary.json, each falling back to the run's
seed where absent, so a run without the split seeds pairs with the run of the same seed. A
rerun of a set-up and seed pair is left out (the newest run kept) and named. The statistics
are in :mod:`fedimb.cli.results.compare_stats`, the Markdown in
:mod:`fedimb.cli.results.compare_tables`, the figures in
:mod:`fedimb.cli.results.compare_plots`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fedimb.cli.results.compare_stats import (
    MethodComparison,
    SetupComparison,
    holm,
    paired_difference,
    t_interval,
    variance_split,
)
from fedimb.cli.results.compare_tables import comparison_markdown
from fedimb.cli.results.found_runs import FoundRuns, load_runs, setup_and_seed
from fedimb.cli.results.run_records import RunRecord
from fedimb.cli.rundir.reader import finite_number
from fedimb.core.errors import ConfigError

__all__ = ["SetupComparison", "MethodComparison", "compare_runs", "comparison_markdown"]

#: the settings that belong to a method, not to the set-up it is compared in
METHOD_OWN = "method."
#: where a run's configuration names the settings tuning searches (as keys below these)
SEARCH_SPACES = ("tune.search.", "method.search.")
#: the method a comparison is against when none is named, where it ran
DEFAULT_REFERENCE = "fedavg"
#: the settings that name the set-up when all runs share one
NAMING_KEYS = ("dataset.name", "partition.name", "dropout.name")


def seed_pair(run: RunRecord) -> tuple[Any, Any]:
    """What pairs a run with another method's: its (data seed, training seed), each the
    run's seed where summary.json lacks it."""
    data, train = run.summary.get("seed_data"), run.summary.get("seed_train")
    return (run.seed if data is None else data, run.seed if train is None else train)


def comparable_runs(folders: Iterable[Path]) -> FoundRuns:
    """The completed runs below ``folders`` (:func:`~fedimb.cli.results.found_runs.load_runs`) with
    the reruns marked by set-up and seed pair: a grid over seed_data and seed_train under
    one ``seed`` holds no reruns."""
    found = load_runs(folders)
    newest: dict[tuple, RunRecord] = {}
    for record in sorted(found.records, key=lambda r: -1.0 if r.finished is None else r.finished):
        newest[(setup_and_seed(record)[0], repr(seed_pair(record)))] = record
    kept = set(map(id, newest.values()))
    reruns = [record for record in found.records if id(record) not in kept]
    return FoundRuns(found.records, reruns, found.copies, found.incomplete)


def _varying(runs: list[RunRecord], keys: Iterable[str]) -> list[str]:
    return sorted(k for k in keys if len({repr(r.setup[k]) for r in runs}) > 1)


def _common(runs: list[RunRecord]) -> set[str]:
    return set.intersection(*(set(r.setup) for r in runs))


def searched(runs: list[RunRecord]) -> set[str]:
    """The settings any run's search spaces name (e.g. ``train.lr``)."""
    return {
        key.removeprefix(space)
        for run in runs
        for key in run.setup
        for space in SEARCH_SPACES
        if key.startswith(space)
    }


def group_setups(runs: list[RunRecord]) -> dict[str, dict[str, list[RunRecord]]]:
    """Set-up name -> row label -> runs. Only settings every run has are compared (runs
    made before a setting existed group with those using its default)."""
    own = searched(runs)
    keys = sorted(k for k in _common(runs) if not k.startswith(METHOD_OWN) and k not in own)
    naming = _varying(runs, keys)
    by_setup: dict[tuple, list[RunRecord]] = {}
    for run in runs:
        by_setup.setdefault(tuple(repr(run.setup[k]) for k in keys), []).append(run)
    setups = {}
    for members in by_setup.values():
        first = members[0].setup
        shown = naming or [k for k in NAMING_KEYS if k in first]
        name = ", ".join(f"{k.removesuffix('.name')}={first[k]}" for k in shown) or "all runs"
        setups[name] = rows_of(members, own)
    return dict(sorted(setups.items()))


def rows_of(runs: list[RunRecord], searched: set[str]) -> dict[str, list[RunRecord]]:
    """A set-up's runs by row: a method, and its own settings (``method.*`` and the
    ``searched`` ones) where its runs differ in them."""
    by_method: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_method.setdefault(str(run.setup.get("method.name")), []).append(run)
    rows: dict[str, list[RunRecord]] = {}
    for name, members in by_method.items():
        own = [
            k
            for k in _common(members)
            if (k.startswith(METHOD_OWN) or k in searched)
            and k != "method.name"
            and not k.startswith(SEARCH_SPACES)
        ]
        differing = _varying(members, own)
        for run in members:
            details = ", ".join(f"{k.removeprefix('method.')}={run.setup[k]}" for k in differing)
            rows.setdefault(f"{name} ({details})" if details else name, []).append(run)
    return rows


def check_metric(runs: list[RunRecord], metric: str) -> None:
    """A one-line error unless some run's summary has a number under ``metric``."""
    if any(finite_number(run.summary.get(metric)) for run in runs):
        return
    numeric = sorted({k for run in runs for k, v in run.summary.items() if finite_number(v)})
    raise ConfigError(
        f"no run's summary.json has a number under '{metric}' (--metric); "
        f"numeric fields: {', '.join(numeric)}"
    )


def reference_method(runs: list[RunRecord], against: str | None) -> str | None:
    """The reference asked for (a one-line error when no run is of it), else FedAvg where
    it ran, else none."""
    names = {str(run.setup.get("method.name")) for run in runs}
    if against is None:
        return DEFAULT_REFERENCE if DEFAULT_REFERENCE in names else None
    labels = {label for rows in group_setups(runs).values() for label in rows}
    if against not in names | labels:
        raise ConfigError(
            f"reference method '{against}' (--against) is not among the runs' methods: "
            f"{', '.join(sorted(names))}"
        )
    return against


def method_row(label: str, runs: list[RunRecord], metric: str) -> MethodComparison:
    """A row's numbers, without the comparison to the reference."""
    values = {
        seed_pair(r): float(r.summary[metric]) for r in runs if finite_number(r.summary.get(metric))
    }
    by_data_seed: dict[Any, list[float]] = {}
    for (data, _), value in values.items():
        by_data_seed.setdefault(data, []).append(value)
    grid = len(by_data_seed) > 1 and len({train for _, train in values}) > 1
    local_keys = sorted({k for r in runs for k in r.summary if k.startswith("local_")})
    local = {}
    for key in local_keys:
        found = [r.summary[key] for r in runs if finite_number(r.summary.get(key))]
        if found:
            local[key] = sum(found) / len(found)
    return MethodComparison(
        label,
        str(runs[0].setup.get("method.name")),
        runs,
        values,
        t_interval(list(values.values())) if values else None,
        variance=variance_split(by_data_seed) if grid else None,
        local=local,
        not_numbers=sum(
            isinstance(r.summary.get(metric), float) and not finite_number(r.summary[metric])
            for r in runs
        ),
    )


def compare_setup(
    name: str, rows: dict[str, list[RunRecord]], metric: str, against: str | None
) -> SetupComparison:
    """One set-up's rows, each compared with the reference row, Holm-corrected across them."""
    methods = [method_row(label, runs, metric) for label, runs in rows.items()]
    candidates = [m for m in methods if m.label == against] or [
        m for m in methods if m.method == against
    ]
    if len(candidates) > 1:
        raise ConfigError(
            f"set-up '{name}' has {len(candidates)} configurations of {against}: name one "
            f"with --against ({'; '.join(m.label for m in candidates)})"
        )
    reference = candidates[0] if candidates else None
    others = [m for m in methods if m is not reference]
    if reference is not None:
        for row in others:
            row.difference = paired_difference(row.values, reference.values)
        tested = {
            m.label: m.difference.p for m in others if m.difference and m.difference.p is not None
        }
        adjusted = dict(zip(tested, holm(list(tested.values()))))
        for row in others:
            row.holm_p = adjusted.get(row.label)
    others.sort(key=lambda m: (-(m.interval.mean if m.interval else float("-inf")), m.label))
    return SetupComparison(
        name,
        metric,
        reference.label if reference else None,
        ([reference] if reference else []) + others,
        against,
    )


def compare_found(
    found: FoundRuns, against: str | None, metric: str, folders: Iterable[Path] = ()
) -> list[SetupComparison]:
    """:func:`compare_runs` over runs already found below ``folders``."""
    runs = found.counted()
    if not runs:
        where = ", ".join(map(str, folders)) or "the folders given"
        raise ConfigError(f"no completed runs (summary.json) in {where}")
    check_metric(runs, metric)
    against = reference_method(runs, against)
    return [compare_setup(name, rows, metric, against) for name, rows in group_setups(runs).items()]


def compare_runs(
    folders: list[Path], against: str | None, metric: str = "final_accuracy"
) -> list[SetupComparison]:
    """Every set-up of the completed runs below ``folders`` (run or sweep folders, or any
    folder above them), its methods' ``metric`` (a numeric summary.json field) compared with
    ``against`` (None: FedAvg where it ran). One-line errors (ConfigError) when no completed
    run is found, the reference ran nowhere, or no summary has the metric."""
    folders = list(map(Path, folders))
    return compare_found(comparable_runs(folders), against, metric, folders)
