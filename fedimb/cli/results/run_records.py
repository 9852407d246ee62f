"""Completed run folders as the report and the export read them: where they are, what set-up
each ran, and one :class:`RunRecord` per run.

A module of its own so that the report, its clients table and ``fedimb export`` share one
reader of run folders without importing each other. Each run counts once, known by its run
id: folders inside a tracker's store (the copies MLflow, TensorBoard and W&B keep below
output.root) and a second folder of a run id are copies, left out. A run's set-up is its
``config.yaml`` without the settings that say where or how it ran (:data:`NOT_SETUP`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from fedimb.app.configuration.upgrade import upgrade
from fedimb.cli.rundir.files import selection_scores
from fedimb.cli.rundir.reader import (
    MalformedFile,
    read_config,
    read_metrics_csv,
    read_summary,
    warn,
)
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
#: a data set's draw, which follows ``seed_data``, else ``seed`` (Synthetic's): where it
#: has that value it belongs to the run's seeds, not to its set-up; a draw fixed by hand
#: (``dataset.data_seed=0`` for every seed) is a setting of the set-up
SEED_DRAW = "dataset.data_seed"
#: the folders, below output.root, where trackers keep copies of run folders (MLflow's
#: artifact store and file store, TensorBoard's and W&B's files; fedimb.cli.tracking)
TRACKER_STORES = ("mlartifacts", "mlruns", "tensorboard", "wandb")


@dataclass
class RunFolders:
    """The completed run folders below some folders, one per run id (``runs``, in path
    order), the folders left out as copies of a run (``copies``) and how many folders
    hold a run that did not complete or cannot be read (``incomplete``; a malformed one
    with a warning naming its file and field)."""

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


def read_completed(run_dir: Path) -> dict[str, Any] | None:
    """The run's config if its summary.json says it completed, else None; a
    :class:`MalformedFile` if either cannot be read."""
    if read_summary(run_dir / "summary.json").get("completed"):
        return run_config(run_dir)
    return None


def completed_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config if its summary.json says it completed (None if not, or unreadable)."""
    try:
        return read_completed(run_dir)
    except MalformedFile:
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
                continue
            try:
                config = read_completed(summary.parent)
            except MalformedFile as err:
                warn(f"{err} (run left out)")
                config = None
            if config is None:
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
        if str(run_dir) == read_summary(run_dir / "summary.json").get("run_dir"):
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
    """The run's ``config.yaml`` (:func:`~fedimb.cli.rundir.reader.read_config`) brought
    up to date (:func:`~fedimb.app.configuration.upgrade.upgrade`), as a plain dict."""
    upgraded = OmegaConf.to_container(upgrade(read_config(run_dir / "config.yaml")))
    assert isinstance(upgraded, dict)
    return {str(k): v for k, v in upgraded.items()}


def setup_of(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration as dotted keys, without the settings of ``NOT_SETUP`` and without a
    data set's draw where it is the one the seeds give it (:data:`SEED_DRAW`)."""
    setup = {k: v for k, v in flatten_config(config).items() if not k.startswith(NOT_SETUP)}
    data_seed = config.get("seed_data")
    if setup.get(SEED_DRAW) == (config.get("seed") if data_seed is None else data_seed):
        del setup[SEED_DRAW]
    return setup


def seed_of(config: dict[str, Any]) -> Any:
    """The run's ``seed``; where ``seed_data`` or ``seed_train`` is set, all three
    (``0 (data 3, train 5)``), so that runs differing only there are not taken for reruns."""
    seed = config["seed"]
    data, train = config.get("seed_data"), config.get("seed_train")
    if data is None and train is None:
        return seed
    data, train = (seed if value is None else value for value in (data, train))
    return f"{seed} (data {data}, train {train})"


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
    config: dict[str, Any] = field(default_factory=dict)  # a run folder's config.yaml

    @classmethod
    def from_folder(cls, run_dir: Path) -> RunRecord:
        """The run folder's record; a :class:`MalformedFile` names a file it cannot read."""
        config = run_config(run_dir)
        summary = read_summary(run_dir / "summary.json", warn)
        return cls(
            str(run_dir),
            setup_of(config),
            seed_of(config),
            summary,
            read_metrics_csv(run_dir / "metrics.csv"),
            run_identity(run_dir, config),
            (run_dir / "summary.json").stat().st_mtime,
            config,
        )

    @property
    def identity(self) -> str:
        return self.run_id or self.name


#: a run folder or its record; the report's functions take either (benchmarks pass folders)
Run = Path | RunRecord


def as_record(run: Run) -> RunRecord:
    return run if isinstance(run, RunRecord) else RunRecord.from_folder(Path(run))


def summary_from_rows(rows: list[dict[str, Any]], objective_last: int | None) -> dict[str, Any]:
    """What summary.json says about the test and validation rows, for a run known only by
    its metrics: the last tested round's accuracy and macro-F1, the best accuracy and the
    scores of the validation share (:func:`~fedimb.cli.rundir.files.selection_scores`)."""
    tested = [r for r in rows if r["split"] == "test" and r["metric"] == "accuracy"]
    scored: dict[tuple[int, str], dict[str, Any]] = {}
    for r in rows:
        if r["split"] in ("test", "validation") and r["metric"] == "accuracy":
            scored.setdefault((r["round"], r["stage"]), {"round": r["round"]})[r["split"]] = {
                "accuracy": r["value"]
            }
    selection = selection_scores(list(scored.values()), objective_last)
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
        **{  # only where the run has validation rows
            k: v
            for k, v in selection.items()
            if k.startswith(("validation", "selected")) and v is not None
        },
    }
