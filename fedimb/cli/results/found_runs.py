"""Every completed run of some run folders and exported tables once, with the reruns marked.

``fedimb report`` and ``fedimb export`` find runs the same way, so both start here. A
rerun of the same set-up and seed under another run id would shrink the spread a report
row shows, so the older runs of a set-up and seed are marked as reruns
(:func:`reruns_of`): the report leaves them out unless asked, the export flags them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fedimb.cli.results.export_table import read_table
from fedimb.cli.results.run_records import RunRecord, run_folders
from fedimb.cli.rundir.reader import MalformedFile, warn

#: what tells an exported table (``fedimb report <file>``) from a folder
TABLE_SUFFIXES = (".parquet", ".csv")


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


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``3 copies``."""
    return f"{count} {one if count == 1 else many or one + 's'}"


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
            f"{plural(found, 'run')} found; left out: {plural(self.copies, 'copy', 'copies')} "
            f"(in a tracker's store, or a second folder of a run id), "
            f"{self.incomplete} not completed; {plural(len(self.reruns), 'rerun')} of the same "
            f"set-up and seed {reruns}."
        )

    def rerun_warning(self, what: str) -> str:
        """One line naming every rerun and ``what`` became of them."""
        named = ", ".join(
            f"`{r.name}` ({r.setup.get('method.name')}, seed {r.seed})" for r in self.reruns
        )
        reruns = plural(len(self.reruns), "rerun")
        return f"Warning: {reruns} of the same set-up and seed {what}: {named}."


def load_runs(inputs: Iterable[Path]) -> FoundRuns:
    """The completed runs in run or sweep folders (:func:`run_folders`) and in tables
    written by ``fedimb export``, each run id once (a run a table holds that a folder gave
    already is a copy), with the reruns among them marked. A run with a malformed file is
    left out (counted as not completed) with a warning naming the file and the field."""
    inputs = list(map(Path, inputs))
    tables = [p for p in inputs if p.suffix.lower() in TABLE_SUFFIXES and not p.is_dir()]
    folders = run_folders([p for p in inputs if p not in tables])
    records, malformed = [], 0
    for run in folders.runs:
        try:
            records.append(RunRecord.from_folder(run))
        except MalformedFile as err:
            warn(f"{err} (run left out)")
            malformed += 1
    copies = len(folders.copies)
    seen = {record.identity for record in records}
    for table in tables:
        for record in read_table(table):
            if record.identity in seen:
                copies += 1
            else:
                seen.add(record.identity)
                records.append(record)
    return FoundRuns(records, reruns_of(records), copies, folders.incomplete + malformed)
