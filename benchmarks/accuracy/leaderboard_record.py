"""The leaderboard's record: the few files each finished step leaves that the rest of the
plan reads, kept in the repository so that the full suite (hours) resumes on any clone and
not only in the results folder of the machine that started it.

A step's record is what the later steps and ``fedimb compare`` read, nothing more: the
calibration's timings (``calibration.json``); a tuning's ``leaderboard_done.json``, tuned
experiment file (``conf/experiment/*.yaml``) and ``summary.json`` (its trials); a report
run's ``config.yaml``, ``summary.json``, its plan and the accuracy rows of its
``metrics.csv`` (the curves of ``fedimb compare``'s figure; the other metrics would make
the record ten times larger). The record mirrors the results folder's layout, so one
function copies either way: at the start the script copies every step of the record
that its results folder lacks, and every step of the folder that the record lacks; after
each step it records that step. A step recorded under another plan (other overrides or
trials) is not reused: :func:`leaderboard.tune` compares the plans. Delete the record to
start the suite over.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks import common

#: the full suite's record, committed beside the script that writes it
RECORD = common.REPO / "benchmarks" / "results" / "leaderboard"
CALIBRATION = "calibration.json"
#: the files of a finished tuning, relative to its folder
TUNING_FILES = ("leaderboard_done.json", "summary.json", "conf/experiment/*.yaml")
#: a report run's plan (the set-up's overrides and the tuning budget it was tuned with)
PLAN_FILE = "leaderboard_plan.json"
#: the files of a finished report run, relative to its folder
REPORT_FILES = ("config.yaml", "summary.json", "metrics.csv", PLAN_FILE)
#: the rows of ``metrics.csv`` a record keeps
KEPT_METRIC = "accuracy"


def finished_run(folder: Path) -> bool:
    """A report run whose ``summary.json`` says it completed."""
    summary = folder / "summary.json"
    return summary.is_file() and bool(json.loads(summary.read_text()).get("completed"))


def finished_tuning(folder: Path) -> bool:
    return (folder / "leaderboard_done.json").is_file()


def copy_step(source: Path, target: Path, patterns: tuple[str, ...]) -> None:
    """The files of one step from the folder ``source`` to ``target`` (emptied first, so a
    half-written step there is not mixed with the finished one)."""
    if target.exists():
        shutil.rmtree(target)
    for pattern in patterns:
        for path in source.glob(pattern):
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "metrics.csv":
                destination.write_text(accuracy_rows(path.read_text()))
            else:
                shutil.copy2(path, destination)


def accuracy_rows(metrics: str) -> str:
    """The header and the :data:`KEPT_METRIC` rows of a ``metrics.csv`` (round, stage,
    split, metric, value)."""
    lines = metrics.splitlines(keepends=True)
    return "".join(lines[:1] + [line for line in lines[1:] if line.split(",")[3] == KEPT_METRIC])


def record_tuning(out: Path, record: Path | None, setup: str, method: str) -> None:
    """Record the finished tuning of ``method`` on ``setup`` (nothing without a record)."""
    if record is not None:
        where = Path("tune", setup, method)
        copy_step(out / where, record / where, TUNING_FILES)


def record_report(out: Path, record: Path | None, setup: str, method: str, seed: int) -> None:
    """Record the finished report run of ``method`` on ``setup`` with ``seed``."""
    if record is not None:
        where = Path("runs", setup, method, f"s{seed}")
        copy_step(out / where, record / where, REPORT_FILES)


def record_calibration(out: Path, record: Path | None) -> None:
    if record is not None and (out / CALIBRATION).is_file():
        record.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / CALIBRATION, record / CALIBRATION)


def merge(out: Path, record: Path) -> tuple[int, int]:
    """Copy the finished steps of ``record`` that ``out`` lacks into ``out`` and those of
    ``out`` that ``record`` lacks into ``record``; the calibration goes where it is missing.
    Returns (steps restored, steps recorded)."""
    restored = recorded = 0
    for source, target in ((record, out), (out, record)):
        if (source / CALIBRATION).is_file() and not (target / CALIBRATION).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / CALIBRATION, target / CALIBRATION)
        steps = [
            (folder.parent, TUNING_FILES, finished_tuning)
            for folder in source.glob("tune/*/*/leaderboard_done.json")
        ] + [
            (folder.parent, REPORT_FILES, finished_run)
            for folder in source.glob("runs/*/*/s*/summary.json")
        ]
        for folder, files, finished in steps:
            twin = target / folder.relative_to(source)
            if finished(folder) and not finished(twin):
                copy_step(folder, twin, files)
                restored += source is record
                recorded += source is out
    return restored, recorded
