"""The leaderboard's smoke suite end to end: calibration and cost estimate, tuning, report
runs in their fixed folders, the comparison table and its figure's data; then the same
command again, which resumes without running anything; then the command on a new results
folder with the first run's record, which restores every step instead of running it; and
the table of a suite with a set-up that has not finished."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from benchmarks import figures
from benchmarks.accuracy import leaderboard, leaderboard_record, leaderboard_suites

pytestmark = pytest.mark.slow


def test_the_smoke_suite_writes_the_table_and_a_rerun_resumes(tmp_path, capsys):
    record = tmp_path / "record"
    out = tmp_path / "out"
    leaderboard.main(["--smoke", "--out", str(out), "--record", str(record)])
    printed = capsys.readouterr().out
    assert "| **total** |" in printed and "| tuning | digits | 4 |" in printed
    assert "| report runs | digits | 4 |" in printed
    suite = leaderboard_suites.smoke_suite()
    for method in suite.methods:
        assert (
            "experiment" in (out / "tune" / "digits" / method / "leaderboard_done.json").read_text()
        )
        for seed in suite.seeds:
            summary = json.loads(
                (out / "runs" / "digits" / method / f"s{seed}" / "summary.json").read_text()
            )
            assert summary["completed"] and summary["seed"] == seed
            assert summary["validation_fraction"] == 0.1
            assert summary["selected_test_accuracy"] is not None
    assert "[leaderboard] report digits fedprox seed 1" in printed and "remaining ~" in printed

    table_text = (out / "leaderboard.md").read_text()
    table = table_text.splitlines()
    rows = [line for line in table if line.startswith("| digits |")]
    assert [row.split("|")[2].strip() for row in rows] == ["fedavg", "fedprox"]
    assert [row.split("|")[3].strip() for row in rows] == ["2", "2"]
    assert rows[0].rstrip(" |").endswith("reference")
    assert "selected_test_accuracy" in table[0]

    with open(out / "leaderboard.csv", newline="") as handle:
        data = list(csv.DictReader(handle))
    assert [(r["setup"], r["method"], r["n"]) for r in data] == [
        ("digits", "fedavg", "2"),
        ("digits", "fedprox", "2"),
    ]
    assert figures.FROM_DATA["leaderboard"](data, "") is not None

    folders = sorted(out.glob("runs/*/*/s*"))
    written = {f: (f / "summary.json").stat().st_mtime_ns for f in folders}
    leaderboard.main(["--smoke", "--out", str(out)])
    again = capsys.readouterr().out
    assert again.count("(done before)") == 4 and "calibrate digits" not in again
    assert {f: (f / "summary.json").stat().st_mtime_ns for f in folders} == written

    assert sorted(p.name for p in record.iterdir()) == ["calibration.json", "digits.jsonl"]
    steps = {
        (s["step"], s["method"], s.get("seed")): sorted(s["files"])
        for s in leaderboard_record.read_steps(record, "digits")
    }
    assert steps == {
        **{
            ("run", m, s): ["config.yaml", "leaderboard_plan.json", "metrics.csv", "summary.json"]
            for m in suite.methods
            for s in suite.seeds
        },
        **{
            ("tune", m, None): [
                f"conf/experiment/{m}_tuned.yaml",
                "leaderboard_done.json",
                "summary.json",
            ]
            for m in suite.methods
        },
    }
    elsewhere = tmp_path / "elsewhere"
    leaderboard.main(["--smoke", "--out", str(elsewhere), "--record", str(record)])
    restored = capsys.readouterr().out
    assert f"{record}: 6 steps restored, 0 recorded" in restored
    assert restored.count("(done before)") == 4 and "calibrate digits" not in restored
    assert "[leaderboard] tune digits fedprox |" in restored
    assert not list(elsewhere.glob("tune/*/*/trials"))  # no trial ran again
    kept = (elsewhere / "runs/digits/fedavg/s0/metrics.csv").read_text().splitlines()  # restored
    assert kept[0] == "round,stage,split,metric,value" and len(kept) > 1
    assert {line.split(",")[3] for line in kept[1:]} == {"accuracy"}
    assert (elsewhere / "leaderboard.md").read_text() == table_text

    # a set-up with no finished run yet is named, and the finished one is compared
    two = dataclasses.replace(suite, setups={**suite.setups, "later": ["dataset=digits"]})
    partial = leaderboard.write_leaderboard(two, elsewhere, "cmd").read_text()
    assert partial.count("| digits |") == 2 and "| later |" not in partial
    assert "Not finished yet: later (0 of 4 report runs)." in partial
    table_only = tmp_path / "table_only"
    leaderboard.main(["--smoke", "--table-only", "--out", str(table_only), "--record", str(record)])
    assert "calibrat" not in capsys.readouterr().out
    assert (table_only / "leaderboard.md").read_text() == table_text

    # a method not run yet: the set-up is not finished; an interim table compares the
    # methods that have finished there, and says which have not
    three = dataclasses.replace(suite, methods=[*suite.methods, "fedavgm"])
    assert leaderboard.finished_setups(three, elsewhere) == []
    assert leaderboard.interim_setups(three, elsewhere) == {"digits": ["fedavg", "fedprox"]}
    interim = leaderboard.write_leaderboard(three, elsewhere, "cmd", interim=True).read_text()
    assert [
        r.split("|")[2].strip() for r in interim.splitlines() if r.startswith("| digits |")
    ] == [
        "fedavg",
        "fedprox",
    ]
    assert (
        "Interim on digits: the 2 of its 3 methods that have finished, compared among "
        "themselves (Holm over 1 test: the final table's thresholds are stricter). "
        "Not finished yet: fedavgm." in interim
    )
    with pytest.raises(SystemExit, match="no set-up has finished"):
        leaderboard.write_leaderboard(three, elsewhere, "cmd")

    # a report run of another plan (the set-up changed since) does not count as finished
    assert leaderboard.finished_runs(suite, elsewhere, "digits") == 4
    (elsewhere / "runs/digits/fedprox/s1/leaderboard_plan.json").write_text("{}")
    assert leaderboard.finished_runs(suite, elsewhere, "digits") == 3
    assert leaderboard.interim_setups(suite, elsewhere) == {}  # the reference alone is left


def test_a_personal_suite_ranks_personal_models_against_fedavg_with_fine_tuning(tmp_path):
    small = leaderboard_suites.smoke_suite()
    personal = [
        *small.setups["digits"],
        "evaluation.personal=true",
        "evaluation.local_test_fraction=0.2",
        "evaluation.local_validation_fraction=0.2",
        "tune.objective=personal_validation_objective",
    ]
    suite = dataclasses.replace(
        small,
        setups={"digits_personal": personal},
        methods=["fedavg_ft", "local"],
        calibration_setup="digits_personal",
        reference="fedavg_ft",
        metrics=leaderboard_suites.PERSONAL_METRICS,
        name="personal_leaderboard",
    )
    out = tmp_path / "out"
    timings = leaderboard.calibrate(suite, out, jobs=2)
    assert leaderboard.run_suite(suite, out, timings, jobs=2) == []
    lines = leaderboard.write_leaderboard(suite, out, "command").read_text().splitlines()
    captions = [i for i, line in enumerate(lines) if line.startswith("| set-up")]
    assert len(captions) == 2  # the mean over clients, then the worst 10% of clients
    for metric in leaderboard_suites.PERSONAL_METRICS:
        assert any(metric in line for line in lines)
    rows = [line for line in lines if line.startswith("| digits_personal |")]
    assert [row.split("|")[2].strip() for row in rows] == ["fedavg_ft", "local"] * 2
    assert rows[0].rstrip(" |").endswith("reference")
    for seed in suite.seeds:
        summary = json.loads(
            (out / "runs" / "digits_personal" / "local" / f"s{seed}" / "summary.json").read_text()
        )
        assert 0 < summary["personal_selected_accuracy"] <= 1
        assert summary["personal_selected_worst_10"] <= summary["personal_selected_accuracy"]
    assert (out / "personal_leaderboard_power.md").is_file()
    assert not (out / "leaderboard_chance.md").exists()  # no global model's test set here
