"""The leaderboard's record: the few files each finished step leaves that the rest of the
plan reads, kept in the repository so that the full suite (hours) resumes on any clone and
not only in the results folder of the machine that started it.

A step's record is what the later steps and ``fedimb compare`` read, nothing more: the
calibration's timings (``calibration.json``); a tuning's ``leaderboard_done.json``, tuned
experiment file (``conf/experiment/*.yaml``) and ``summary.json`` (its trials); a report
run's ``config.yaml``, ``summary.json``, its plan and the accuracy rows of its
``metrics.csv`` (the curves of ``fedimb compare``'s figure; the other metrics would make
the record ten times larger).

The record is data, not a folder tree: ``calibration.json`` and one JSON Lines file per
set-up (``<set-up>.jsonl``), a line per finished step with its files' texts by path. At
the start the script writes every step of the record that its results folder lacks into
that folder, and records every finished step of the folder that the record lacks; after
each step it records that step (its line replaced). Everything else reads the results
folder. A step recorded under another plan (other overrides or trials) is not reused:
:func:`leaderboard.tune` compares the plans. Delete the record to start the suite over.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

from benchmarks import common

#: the full suite's record, committed beside the script that writes it
RECORD = common.REPO / "benchmarks" / "results" / "leaderboard"
#: where the full suite runs, and where the record is restored for the scripts that read it
RESULTS = common.REPO / "results" / "leaderboard"
CALIBRATION = "calibration.json"
#: the files of a finished tuning, relative to its folder
TUNING_FILES = ("leaderboard_done.json", "summary.json", "conf/experiment/*.yaml")
#: a report run's plan (the set-up's overrides and the tuning budget it was tuned with)
PLAN_FILE = "leaderboard_plan.json"
#: the files of a finished report run, relative to its folder
REPORT_FILES = ("config.yaml", "summary.json", "metrics.csv", PLAN_FILE)
#: the rows of ``metrics.csv`` a record keeps
KEPT_METRIC = "accuracy"
#: the suite's steps finish in parallel threads, and a set-up's steps share one file
_WRITING = threading.Lock()


def finished_run(folder: Path) -> bool:
    """A report run whose ``summary.json`` says it completed."""
    summary = folder / "summary.json"
    return summary.is_file() and bool(json.loads(summary.read_text()).get("completed"))


def finished_tuning(folder: Path) -> bool:
    return (folder / "leaderboard_done.json").is_file()


def accuracy_rows(metrics: str) -> str:
    """The header and the :data:`KEPT_METRIC` rows of a ``metrics.csv`` (round, stage,
    split, metric, value)."""
    lines = metrics.splitlines(keepends=True)
    return "".join(lines[:1] + [line for line in lines[1:] if line.split(",")[3] == KEPT_METRIC])


def step_files(folder: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """The texts of one step's files in ``folder``, by path relative to it."""
    files = {}
    for pattern in patterns:
        for path in sorted(folder.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            files[path.relative_to(folder).as_posix()] = (
                accuracy_rows(text) if path.name == "metrics.csv" else text
            )
    return files


def write_step(folder: Path, files: dict[str, str]) -> None:
    """One step's files into ``folder`` (emptied first, so a half-written step there is
    not mixed with the finished one)."""
    if folder.exists():
        shutil.rmtree(folder)
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def step_key(step: dict) -> tuple:
    return (step["step"], step["method"], step.get("seed", -1))


def step_folder(out: Path, step: dict) -> Path:
    """Where ``step`` lives in a results folder."""
    if step["step"] == "tune":
        return out / "tune" / step["setup"] / step["method"]
    return out / "runs" / step["setup"] / step["method"] / f"s{step['seed']}"


def read_steps(record: Path, setup: str) -> list[dict]:
    path = record / f"{setup}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_steps(record: Path, setup: str, steps: list[dict]) -> None:
    """The set-up's steps, one line each, in a fixed order (a rerun of the table or a
    step recorded again changes only its own line)."""
    record.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(s, sort_keys=True) for s in sorted(steps, key=step_key)]
    path = record / f"{setup}.jsonl"
    partial = path.with_suffix(".jsonl.partial")  # a stopped write leaves the old file whole
    partial.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    os.replace(partial, path)


def record_step(record: Path | None, step: dict, folder: Path, patterns: tuple[str, ...]) -> None:
    """Record the finished step in ``folder`` (its line replaced; nothing without a record)."""
    if record is None:
        return
    step = {**step, "files": step_files(folder, patterns)}
    with _WRITING:  # read, replace the line and write as one: other steps end meanwhile
        others = [s for s in read_steps(record, step["setup"]) if step_key(s) != step_key(step)]
        write_steps(record, step["setup"], [*others, step])


def record_tuning(out: Path, record: Path | None, setup: str, method: str) -> None:
    """Record the finished tuning of ``method`` on ``setup``."""
    step = {"step": "tune", "setup": setup, "method": method}
    record_step(record, step, step_folder(out, step), TUNING_FILES)


def record_report(out: Path, record: Path | None, setup: str, method: str, seed: int) -> None:
    """Record the finished report run of ``method`` on ``setup`` with ``seed``."""
    step = {"step": "run", "setup": setup, "method": method, "seed": seed}
    record_step(record, step, step_folder(out, step), REPORT_FILES)


def record_calibration(out: Path, record: Path | None) -> None:
    if record is not None and (out / CALIBRATION).is_file():
        record.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / CALIBRATION, record / CALIBRATION)


def folder_steps(out: Path) -> list[tuple[dict, Path, tuple[str, ...]]]:
    """The finished steps of a results folder: (step, its folder, its files)."""
    steps = []
    for done in sorted(out.glob("tune/*/*/leaderboard_done.json")):
        folder = done.parent
        step = {"step": "tune", "setup": folder.parent.name, "method": folder.name}
        steps.append((step, folder, TUNING_FILES))
    for summary in sorted(out.glob("runs/*/*/s*/summary.json")):
        folder = summary.parent
        if finished_run(folder):
            step = {
                "step": "run",
                "setup": folder.parent.parent.name,
                "method": folder.parent.name,
                "seed": int(folder.name[1:]),
            }
            steps.append((step, folder, REPORT_FILES))
    return steps


def merge(out: Path, record: Path) -> tuple[int, int]:
    """Write the steps of ``record`` that ``out`` lacks into ``out`` and record the
    finished steps of ``out`` that ``record`` lacks; the calibration goes where it is
    missing. Returns (steps restored, steps recorded)."""
    restored = recorded = 0
    for source, target in ((record, out), (out, record)):
        if (source / CALIBRATION).is_file() and not (target / CALIBRATION).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / CALIBRATION, target / CALIBRATION)
    known = {}
    for path in sorted(record.glob("*.jsonl")):
        for step in read_steps(record, path.stem):
            known[(step["setup"], *step_key(step))] = step
            folder = step_folder(out, step)
            done = finished_tuning(folder) if step["step"] == "tune" else finished_run(folder)
            if not done:
                write_step(folder, step["files"])
                restored += 1
    new: dict[str, list[dict]] = {}
    for step, folder, patterns in folder_steps(out):
        if (step["setup"], *step_key(step)) not in known:
            new.setdefault(step["setup"], []).append(
                {**step, "files": step_files(folder, patterns)}
            )
    for setup, steps in new.items():
        write_steps(record, setup, [*read_steps(record, setup), *steps])
        recorded += len(steps)
    return restored, recorded


def restored(record: Path = RECORD, out: Path = RESULTS) -> Path:
    """The results folder with every recorded step in it (for scripts that read the
    leaderboard's tunings: the influence and Byzantine studies)."""
    merge(out, record)
    return out
