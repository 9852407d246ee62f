"""One comparison table and accuracy plot over many run folders (``fedimb report``).

Runs are grouped by everything in their ``config.yaml`` but the seed and where/how they
ran (output folder, runtime, checkpointing), so the seeds of one set-up form one row,
labelled by the method and the settings that tell the rows apart. Each row gives
mean ± sample std over its runs of the final and best test accuracy and final macro-F1,
and the last value of the method's own scores (the ``extra`` metrics named ``*accuracy``,
``*f1`` or ``T_*``, e.g. FedBABU's fine-tuned accuracy or GRP-FED's T_g/T_p/T_r/T_l).
Optional columns: the mean over rounds, or the range over every round of every run, of
other ``extra`` metrics; optional section: every run's own numbers (seed, final and best
accuracy, accuracy and loss at chosen rounds), so figures quoted about single seeds come
from the same command as the table.

Each run counts once, known by its run id: folders inside a tracker's store (the copies
MLflow, TensorBoard and W&B keep below output.root) and a second folder of a run id are
copies, left out. A rerun of the same set-up and seed under another run id would shrink
the spread a row shows, so by default only the newest run of each set-up and seed is
averaged and the others are named in a warning (``keep_reruns`` averages them in); the
heading counts what was found and what was left out. A value from a single run reads
"(n = 1)", not "± 0.00".

The report also reads tables written by ``fedimb export`` (:mod:`fedimb.cli.export`),
alone or besides folders. A table's ``setup`` column carries each run's set-up, so its runs
group as their folders do (a table without it groups by its named run columns); their
final/best accuracy and final macro-F1 come from their test rows, and it holds no target
accuracy, so the traffic-to-target column comes from run folders only. Both sources become
:class:`RunRecord` s, which is all the tables and the plot read.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedimb.cli.run_files import read_metrics_csv
from fedimb.core.errors import ConfigError

# Settings that say where or how a run was executed, not what it computed.
# (A file partition is told apart by its digest, not by its index lists.)
NOT_SETUP = (
    "seed",
    "output.",
    "runtime.",
    "checkpoint.",
    "resume",
    "device",
    "partition.clients",
    "tracking.",
)
#: what tells an exported table (``fedimb report <file>``) from a folder
TABLE_SUFFIXES = (".parquet", ".csv")
#: the folders, below output.root, where trackers keep copies of run folders (MLflow's
#: artifact store and file store, TensorBoard's and W&B's files; fedimb.cli.tracking)
TRACKER_STORES = ("mlartifacts", "mlruns", "tensorboard", "wandb")


def mean_std(values: list[float], scale: float = 100.0, digits: int = 2) -> str:
    """mean ± sample std of ``values`` x ``scale`` over those known ('-' when none is; the
    value and "(n = 1)" when one is)."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    arr = np.asarray(values, dtype=np.float64) * scale
    if len(arr) == 1:  # one value has no spread: "± 0.00" would claim one
        return f"{arr[0]:.{digits}f} (n = 1)"
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=1):.{digits}f}"


@dataclass
class RunFolders:
    """The completed run folders below some folders, one per run id (``runs``, in path
    order), the folders left out as copies of a run (``copies``) and how many folders
    hold a run that did not complete or cannot be read (``incomplete``)."""

    runs: list[Path]
    copies: list[Path]
    incomplete: int


def run_identity(run_dir: Path, config: dict[str, Any]) -> str:
    """What tells one run from another: the run id every run gets when it starts
    (``checkpoint.run_id``), or for runs made before it existed, the resolved folder."""
    run_id = (config.get("checkpoint") or {}).get("run_id")
    return str(run_id) if run_id else str(run_dir.resolve())


def _in_tracker_store(run_dir: Path, below: Path) -> bool:
    return any(part in TRACKER_STORES for part in run_dir.relative_to(below).parts)


def completed_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config if its summary.json says it completed (None if not, or unreadable)."""
    import yaml

    try:
        if json.loads((run_dir / "summary.json").read_text()).get("completed"):
            config = run_config(run_dir)
            return config if isinstance(config, dict) else None
    except (
        OSError,
        ValueError,
        AttributeError,
        yaml.YAMLError,
    ):  # AttributeError: JSON that is no object
        pass
    return None


def run_folders(folders: Iterable[Path]) -> RunFolders:
    """Every completed run at or below ``folders`` once (see :class:`RunFolders`).

    A folder inside a tracker's store (MLflow's artifacts, TensorBoard's or W&B's files
    below a given folder) is a copy of a run folder, as is a second folder with the same
    run id; of the folders of one run id the one its summary.json names is kept, else the
    first in path order."""
    by_id: dict[str, list[Path]] = {}
    copies, incomplete, seen = set(), 0, set()
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder")
        for summary in sorted({folder / "summary.json", *folder.rglob("summary.json")}):
            if not summary.is_file() or summary.resolve() in seen:  # folders given twice count once
                continue
            seen.add(summary.resolve())
            if _in_tracker_store(summary.parent, folder):
                copies.add(summary.parent.resolve())
            elif (config := completed_config(summary.parent)) is None:
                incomplete += 1
            else:
                same = by_id.setdefault(run_identity(summary.parent, config), [])
                if summary.parent.resolve() not in same:
                    same.append(summary.parent.resolve())
    runs = [_original(same) for same in by_id.values()]
    copies |= {path for same in by_id.values() for path in same} - set(runs)
    return RunFolders(sorted(runs), sorted(copies), incomplete)


def _original(same: list[Path]) -> Path:
    """Of the folders of one run, the one its summary.json names, else the first."""
    for run_dir in same:
        if str(run_dir) == _summary(run_dir).get("run_dir"):
            return run_dir
    return same[0]


def find_runs(folders: Iterable[Path]) -> list[Path]:
    """Every completed run folder at or below ``folders``, one per run (copies left out,
    see :func:`run_folders`), in path order."""
    return run_folders(folders).runs


def flatten_config(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as ``a.b.c -> value`` (lists as tuples, so values compare
    and hash)."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten_config(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: tree if not isinstance(tree, list) else tuple(tree)}


def run_config(run_dir: Path) -> dict[str, Any]:
    """The run's ``config.yaml`` as a plain dict."""
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text()) or {}


def setup_of(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration as dotted keys, without the settings of ``NOT_SETUP``."""
    return {k: v for k, v in flatten_config(config).items() if not k.startswith(NOT_SETUP)}


def run_setup(run_dir: Path) -> dict[str, Any]:
    """The run's configuration as dotted keys, without the settings of ``NOT_SETUP``."""
    return setup_of(run_config(run_dir))


def _summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


@dataclass(eq=False)
class RunRecord:
    """One run as the report needs it, whichever source it comes from (a run folder, or
    a table written by ``fedimb export``): the set-up that groups it into a row, its
    seed, the summary numbers and the rows of its metrics.csv; its run id (see
    :func:`run_identity`; the name when unknown) and when it finished (seconds since the
    epoch: summary.json's time; None when unknown), which tell a rerun from the run it
    repeats. Hashed by identity, so runs with equal numbers stay apart."""

    name: str
    setup: dict[str, Any]
    seed: Any
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    run_id: str = ""
    finished: float | None = None

    @classmethod
    def from_folder(cls, run_dir: Path) -> RunRecord:
        config = run_config(run_dir)
        return cls(
            str(run_dir),
            setup_of(config),
            config.get("seed", "-"),
            _summary(run_dir),
            read_metrics_csv(run_dir / "metrics.csv"),
            run_identity(run_dir, config),
            (run_dir / "summary.json").stat().st_mtime,
        )

    @property
    def identity(self) -> str:
        return self.run_id or self.name


#: a run folder or its record; the functions below take either (benchmarks pass folders)
Run = Path | RunRecord


def as_record(run: Run) -> RunRecord:
    return run if isinstance(run, RunRecord) else RunRecord.from_folder(Path(run))


def _percent(value: float | None) -> str:
    """A fraction as a percentage with two decimals ('-' when unknown)."""
    return "-" if value is None else f"{100 * value:.2f}"


def summary_from_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What summary.json says about the test rows, for a run known only by its metrics:
    the last tested round's accuracy and macro-F1, and the best accuracy."""
    tested = [r for r in rows if r["split"] == "test" and r["metric"] == "accuracy"]
    final = tested[-1] if tested else None
    f1 = {
        (r["round"], r["stage"]): r["value"]
        for r in rows
        if r["split"] == "test" and r["metric"] == "macro_f1"
    }
    return {
        "final_accuracy": final["value"] if final else None,
        "best_accuracy": max(r["value"] for r in tested) if tested else None,
        "final_macro_f1": f1.get((final["round"], final["stage"])) if final else None,
    }


def setup_and_seed(run: RunRecord) -> tuple:
    """What a rerun shares with the run it repeats: the whole set-up and the seed."""
    return tuple(sorted((key, repr(value)) for key, value in run.setup.items())), repr(run.seed)


def reruns_of(records: list[RunRecord]) -> list[RunRecord]:
    """The runs that a newer run (a later ``finished``; unknown counts as oldest, a tie goes
    to the later one in ``records``) of the same set-up and seed repeats, in ``records``' order."""
    newest: dict[tuple, RunRecord] = {}
    for record in sorted(records, key=lambda r: -1.0 if r.finished is None else r.finished):
        newest[setup_and_seed(record)] = record
    return [record for record in records if newest[setup_and_seed(record)] is not record]


@dataclass
class FoundRuns:
    """Every completed run of some folders and tables once (``records``), the reruns among
    them (:func:`reruns_of`), and how many copies and runs that did not complete were left out."""

    records: list[RunRecord]
    reruns: list[RunRecord]
    copies: int
    incomplete: int

    def counted(self, keep_reruns: bool = False) -> list[RunRecord]:
        """The runs a report averages: one per set-up and seed unless ``keep_reruns``."""
        return self.records if keep_reruns else [r for r in self.records if r not in self.reruns]

    def tally(self, reruns: str) -> str:
        """One line: how many runs were found, how many left out as copies or not completed,
        and what became of the reruns (``reruns``: "left out", "averaged in", ...)."""
        found = len(self.records) + self.copies + self.incomplete
        return (
            f"{_plural(found, 'run')} found; left out: {_plural(self.copies, 'copy', 'copies')} (in a "
            f"tracker's store, or a second folder of a run id), {self.incomplete} not completed; "
            f"{_plural(len(self.reruns), 'rerun')} of the same set-up and seed {reruns}."
        )

    def rerun_warning(self, what: str) -> str:
        """One line naming every rerun and ``what`` became of them."""
        named = ", ".join(
            f"`{r.name}` ({r.setup.get('method.name')}, seed {r.seed})" for r in self.reruns
        )
        return f"Warning: {_plural(len(self.reruns), 'rerun')} of the same set-up and seed {what}: {named}."


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def load_runs(inputs: Iterable[Path]) -> FoundRuns:
    """The completed runs in run or sweep folders (:func:`run_folders`) and in tables
    written by ``fedimb export``, each run id once (a run a table holds that a folder gave
    already is a copy), with the reruns among them marked."""
    inputs = list(map(Path, inputs))
    tables = [p for p in inputs if p.suffix.lower() in TABLE_SUFFIXES and not p.is_dir()]
    folders = run_folders([p for p in inputs if p not in tables])
    records = [RunRecord.from_folder(run) for run in folders.runs]
    copies = len(folders.copies)
    if tables:
        from fedimb.cli.export import read_table

        seen = {record.identity for record in records}
        for table in tables:
            for record in read_table(table):
                if record.identity in seen:
                    copies += 1
                else:
                    seen.add(record.identity)
                    records.append(record)
    return FoundRuns(records, reruns_of(records), copies, folders.incomplete)


def group_runs(run_dirs: list[Run]) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Runs with the same set-up, and a legend of the set-ups.

    Only settings every run has (every run of the method, for ``method.*``) are
    compared, so runs made before a setting existed group with runs that use its default. A row is labelled by its method, the method's
    own settings (``method.*``) that differ across that method's runs, and, when the
    runs come from several set-ups, the set-up's letter; the legend gives each letter's
    settings that differ between set-ups.
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


def _records(groups: dict[str, list[Run]]) -> dict[str, list[RunRecord]]:
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
    groups: dict[str, list[Run]], mean_keys: list[str] = (), range_keys: list[str] = ()
) -> list[str]:
    """Markdown lines of the table (see the module docstring); ``mean_keys`` adds columns
    of 'extra' metrics averaged over rounds, ``range_keys`` (shell patterns) columns of
    their smallest and largest value over every round of every run of the row."""
    groups = _records(groups)
    summaries = {label: [r.summary for r in runs] for label, runs in groups.items()}
    target = next(
        (s["target_accuracy"] for v in summaries.values() for s in v if s.get("target_accuracy")),
        None,
    )
    scores = {label: [own_scores(r) for r in runs] for label, runs in groups.items()}
    score_keys = sorted({k for per_run in scores.values() for s in per_run for k in s})
    header = "| method | runs | final accuracy (%) | best accuracy (%) | final macro-F1 (%) |"
    if target:
        header += f" MB to {target:.0%} accuracy (runs reaching it) |"
    header += "".join(f" {k} (mean over rounds) |" for k in mean_keys)
    header += "".join(f" {k} (range over rounds) |" for k in range_keys)
    header += "".join(f" final {k} (%) |" for k in score_keys)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for label, runs in groups.items():
        done = summaries[label]
        row = (
            f"| {label} | {len(runs)} | {mean_std([s['final_accuracy'] for s in done])} | "
            f"{mean_std([s['best_accuracy'] for s in done])} | {mean_std([s['final_macro_f1'] for s in done])} |"
        )
        if target:
            reached = [s["bytes_to_target"] for s in done if s.get("bytes_to_target") is not None]
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


def per_run_table(groups: dict[str, list[Run]], at_rounds: list[int] = ()) -> list[str]:
    """Markdown lines with one row per run: its seed, final accuracy, best accuracy and
    the first round that reached it, final macro-F1 and, at each of ``at_rounds``, its
    test accuracy (loss)."""
    header = "| method | seed | final accuracy (%) | best accuracy (%) | round of best | final macro-F1 (%) |"
    header += "".join(f" round {r}: accuracy % (loss) |" for r in at_rounds)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for label, runs in _records(groups).items():
        for run in sorted(runs, key=lambda r: str(r.seed).zfill(9)):
            s = run.summary
            accuracy, loss = metric_curve(run), metric_curve(run, "loss")
            best_round = min(
                (r for r in accuracy if accuracy[r] == max(accuracy.values())), default="-"
            )
            row = (
                f"| {label} | {run.seed} | {100 * s['final_accuracy']:.2f} | "
                f"{100 * s['best_accuracy']:.2f} | {best_round} | {_percent(s['final_macro_f1'])} |"
            )
            for r in at_rounds:
                row += (
                    f" {100 * accuracy[r]:.2f} ({loss[r]:.4f}) |"
                    if r in accuracy and r in loss
                    else " - |"
                )
            lines.append(row)
    return lines


def accuracy_plot(groups: dict[str, list[Run]], path: Path, title: str) -> None:
    """Mean test accuracy per round of every group, with a ±std band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, runs in _records(groups).items():
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
        f"{_plural(counted, 'run')} in {_plural(rows, 'row')}: a row gives mean ± sample std over its "
        f'n runs (column runs), {per_seed}; a value from a single run reads "(n = 1)".',
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
    mean_keys: list[str] = (),
    range_keys: list[str] = (),
    per_run: bool = False,
    at_rounds: list[int] = (),
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
    from fedimb.cli.report_clients import clients_table  # it builds on this module

    over_clients = clients_table(_records(groups))
    if over_clients:
        lines += ["", *over_clients]
    if per_run or at_rounds:
        lines += ["", "## Every run", "", *per_run_table(groups, at_rounds)]
    lines += ["", "Runs: " + ", ".join(f"`{folder}`" for folder in folders)]
    accuracy_plot(groups, out / "accuracy.png", title)
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report
