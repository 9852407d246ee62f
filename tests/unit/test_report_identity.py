"""``fedimb report`` and ``fedimb export`` count each run once: tracker copies and second
folders of a run id are left out, and a rerun of a set-up and seed is named, not averaged in."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

from fedimb.cli.results.export import export_runs
from fedimb.cli.results.found_runs import load_runs
from fedimb.cli.results.report import write_report
from tests.conftest import run_fedimb
from tests.unit.test_comparison import make_run

OLD, NEW = 1_700_000_000, 1_700_086_400  # when the first run and its rerun finished


def run(root, name, run_id, *, seed, final, finished):
    """A run folder with a run id, whose summary.json names the folder and was written at
    ``finished``."""
    folder = make_run(
        root, name, seed=seed, final=final, best=final, more={"checkpoint": {"run_id": run_id}}
    )
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "run_dir": str(folder.resolve())}))
    os.utime(folder / "summary.json", (finished, finished))
    return folder


@pytest.fixture
def outputs(tmp_path):
    """outputs/ with FedAvg seed 0 run twice (the older one also copied by MLflow and by
    hand), seed 1 once, and a folder whose summary.json is cut short."""
    root = tmp_path / "outputs"
    first = run(
        root / "2026-01-01", "10-00-fedavg-s0", "aaaaaaaaaaaa", seed=0, final=0.4, finished=OLD
    )
    run(root / "2026-01-02", "10-00-fedavg-s0", "bbbbbbbbbbbb", seed=0, final=0.6, finished=NEW)
    run(root / "2026-01-02", "11-00-fedavg-s1", "cccccccccccc", seed=1, final=0.8, finished=NEW)
    # what MLflow's log_artifacts copies of the run folder, and a copy made by hand (sorts first)
    shutil.copytree(first, root / "mlartifacts" / "5f0e2d8a41c7" / "artifacts")
    shutil.copytree(first, root / "0-backup" / "fedavg-s0")
    (root / "broken").mkdir()
    (root / "broken" / "summary.json").write_text('{"completed": tr')
    return root


def test_copies_count_once_and_the_rerun_is_left_out_with_a_warning(outputs, tmp_path):
    text = write_report([outputs], tmp_path / "out", per_run=True).read_text()
    lines = text.splitlines()
    # seed 0's newest run (60%) and seed 1 (80%): 70.00 ± 14.14, not five runs
    assert next(line for line in lines if line.startswith("| fedavg |")).startswith(
        "| fedavg | 2 | 70.00 ± 14.14 |"
    )
    assert (
        "6 runs found; left out: 2 copies (in a tracker's store, or a second folder of a run id), "
        "1 not completed; 1 rerun of the same set-up and seed left out."
    ) in lines
    first = (outputs / "2026-01-01" / "10-00-fedavg-s0").resolve()
    assert (
        f"Warning: 1 rerun of the same set-up and seed left out, the newest run of each kept (pass "
        f"--keep-reruns to average them in): `{first}` (fedavg, seed 0)."
    ) in lines
    assert (
        "2 runs in 1 row: a row gives mean ± sample std over its n runs (column runs), one per seed"
        in text
    )
    every_run = text.split("## Every run")[1]
    assert every_run.count("| fedavg | 0 |") == 1 and "| fedavg | 0 | 60.00 |" in every_run


def test_keep_reruns_averages_the_rerun_in_and_says_so(outputs, tmp_path):
    text = write_report([outputs], tmp_path / "out", keep_reruns=True).read_text()
    assert "| fedavg | 3 | 60.00 ± 20.00 |" in text
    assert "1 rerun of the same set-up and seed averaged in." in text
    assert "Warning: 1 rerun of the same set-up and seed averaged in (--keep-reruns)" in text


def test_the_folder_its_summary_names_is_the_run_and_the_others_copies(outputs):
    found = load_runs([outputs])
    assert sorted(r.run_id for r in found.records) == [
        "aaaaaaaaaaaa",
        "bbbbbbbbbbbb",
        "cccccccccccc",
    ]
    first = next(r for r in found.records if r.run_id == "aaaaaaaaaaaa")
    assert first.name == str((outputs / "2026-01-01" / "10-00-fedavg-s0").resolve())
    assert found.reruns == [first] and (found.copies, found.incomplete) == (2, 1)


def test_a_folder_given_twice_counts_once(outputs, tmp_path):
    found = load_runs([outputs, outputs / "2026-01-02"])
    assert (len(found.records), found.copies) == (3, 2)


def test_export_keeps_each_run_once_and_flags_the_rerun(outputs, tmp_path):
    path, found, _ = export_runs([outputs], tmp_path / "export.csv")
    table = pd.read_csv(path)
    runs = table.drop_duplicates("run_id").set_index("run_id")
    assert sorted(runs.index) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"]  # no copy
    assert runs["rerun"].to_dict() == {
        "aaaaaaaaaaaa": True,
        "bbbbbbbbbbbb": False,
        "cccccccccccc": False,
    }
    assert pd.Timestamp(runs.loc["aaaaaaaaaaaa", "finished"]) == pd.Timestamp(
        OLD, unit="s", tz="UTC"
    )
    assert set(table[~table["rerun"]]["run_id"]) == {"bbbbbbbbbbbb", "cccccccccccc"}


def test_report_over_the_export_leaves_out_the_same_rerun(outputs, tmp_path):
    path, _, _ = export_runs([outputs], tmp_path / "export.parquet")
    from_table = write_report([path], tmp_path / "a").read_text()
    assert "| fedavg | 2 | 70.00 ± 14.14 |" in from_table
    assert "Warning: 1 rerun of the same set-up and seed left out" in from_table
    assert "(fedavg, seed 0)." in from_table


def test_cli_export_prints_what_it_found_and_left_out(outputs, tmp_path):
    done = run_fedimb("export", str(outputs), "--out", str(tmp_path / "e.csv"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "6 runs found; left out: 2 copies (in a tracker's store, or a second folder of a run id), "
        "1 not completed; 1 rerun of the same set-up and seed flagged (column rerun)."
    )
    first = (outputs / "2026-01-01" / "10-00-fedavg-s0").resolve()
    assert lines[1] == (
        "Warning: 1 rerun of the same set-up and seed kept and flagged (rerun = true; "
        "table[~table['rerun']] holds the newest run of each set-up and seed): "
        f"`{first}` (fedavg, seed 0)."
    )
    assert lines[2:] == ["3 runs, 6 rows", str((tmp_path / "e.csv").resolve())]
