"""The leaderboard's smoke suite end to end: calibration and cost estimate, tuning, report
runs in their fixed folders, the comparison table and its figure's data; then the same
command again, which resumes without running anything."""

from __future__ import annotations

import csv
import json

import pytest

from benchmarks import figures
from benchmarks.accuracy import leaderboard

pytestmark = pytest.mark.slow


def test_the_smoke_suite_writes_the_table_and_a_rerun_resumes(tmp_path, capsys):
    leaderboard.main(["--smoke", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "| **total** |" in printed and "| tuning | digits | 4 |" in printed
    assert "| report runs | digits | 4 |" in printed
    suite = leaderboard.smoke_suite()
    for method in suite.methods:
        assert (
            "experiment"
            in (tmp_path / "tune" / "digits" / method / "leaderboard_done.json").read_text()
        )
        for seed in suite.seeds:
            summary = json.loads(
                (tmp_path / "runs" / "digits" / method / f"s{seed}" / "summary.json").read_text()
            )
            assert summary["completed"] and summary["seed"] == seed
            assert summary["validation_fraction"] == 0.1
            assert summary["selected_test_accuracy"] is not None
    assert "[leaderboard] report digits fedprox seed 1" in printed and "remaining ~" in printed

    table = (tmp_path / "leaderboard.md").read_text().splitlines()
    rows = [line for line in table if line.startswith("| digits |")]
    assert [row.split("|")[2].strip() for row in rows] == ["fedavg", "fedprox"]
    assert [row.split("|")[3].strip() for row in rows] == ["2", "2"]
    assert rows[0].rstrip(" |").endswith("reference")
    assert "selected_test_accuracy" in table[0]

    with open(tmp_path / "leaderboard.csv", newline="") as handle:
        data = list(csv.DictReader(handle))
    assert [(r["setup"], r["method"], r["n"]) for r in data] == [
        ("digits", "fedavg", "2"),
        ("digits", "fedprox", "2"),
    ]
    assert figures.FROM_DATA["leaderboard"](data, "") is not None

    folders = sorted(tmp_path.glob("runs/*/*/s*"))
    written = {f: (f / "summary.json").stat().st_mtime_ns for f in folders}
    leaderboard.main(["--smoke", "--out", str(tmp_path)])
    again = capsys.readouterr().out
    assert again.count("(done before)") == 4 and "calibrate digits" not in again
    assert {f: (f / "summary.json").stat().st_mtime_ns for f in folders} == written
