"""The scores a run reports, each named by its split: the validation rows of metrics.csv,
summary.json's validation fields, the done line, the progress line of a run that does not
read the test set, and the report's columns."""

from __future__ import annotations

import json

import yaml

from fedimb.app.configuration.compose import compose
from fedimb.cli.results.report import write_report
from fedimb.cli.results.run_records import RunRecord, summary_from_rows
from fedimb.cli.rundir.files import metric_rows
from fedimb.cli.rundir.progress import done_text, round_line
from fedimb.cli.rundir.summary import run_summary


def scored(number: int, test: float | None, validation: float | None) -> dict:
    record = {"round": number, "stage": "train", "seconds": 1.0, "test": {}}
    if test is not None:
        record["test"] = {"accuracy": test, "macro_f1": test - 0.1, "loss": 1.0}
    if validation is not None:
        record["validation"] = {"accuracy": validation, "macro_f1": 0.5, "loss": 2.0}
    return record


# validation peaks at round 2 (0.7, first reached there); the test set peaks at round 4
ROUNDS = [
    scored(0, 0.1, 0.1),
    scored(1, 0.5, 0.6),
    scored(2, 0.55, 0.7),
    scored(3, 0.6, 0.7),
    scored(4, 0.8, 0.5),
]


def summary_of(rounds, *overrides, tmp_path):
    cfg = compose(["dataset=digits", "validation.fraction=0.1", *overrides])
    start = {"validation_chance": 0.125}  # the start event's majority-class share
    return run_summary(cfg, start, rounds, {"seconds": 1.0}, {}, 1.0, tmp_path)


def test_summary_names_each_score_by_its_split(tmp_path):
    summary = summary_of(
        ROUNDS, "seed=3", "seed_train=8", "validation.objective_last=2", tmp_path=tmp_path
    )
    assert {k: summary[k] for k in summary if "valid" in k or "selected" in k or "seed" in k} == {
        "seed": 3,
        "seed_data": 3,
        "seed_train": 8,
        "validation_fraction": 0.1,
        "validation_chance": 0.125,
        "final_validation_accuracy": 0.5,
        "validation_best_accuracy": 0.7,
        "validation_best_round": 2,
        "selected_test_accuracy": 0.55,
        "validation_objective": (0.7 + 0.5) / 2,
    }
    # the test set's own maximum stays, under its own name, beside the final test accuracy
    assert (summary["final_accuracy"], summary["best_accuracy"], summary["best_round"]) == (
        0.8,
        0.8,
        4,
    )


def test_without_validation_or_without_test_the_missing_fields_are_null(tmp_path):
    plain = summary_of(
        [scored(0, 0.1, None), scored(1, 0.4, None)], "validation.fraction=0", tmp_path=tmp_path
    )
    assert [
        plain[k]
        for k in ("validation_best_round", "selected_test_accuracy", "validation_objective")
    ] == [
        None,
        None,
        None,
    ]
    blind = summary_of(
        [scored(0, None, 0.2), scored(1, None, 0.4)], "evaluation.test=false", tmp_path=tmp_path
    )
    assert (
        blind["final_accuracy"],
        blind["selected_test_accuracy"],
        blind["validation_best_round"],
    ) == (
        None,
        None,
        1,
    )


def test_the_done_line_gives_the_final_test_accuracy_and_the_validation_choice():
    assert done_text(ROUNDS, 75.0) == (
        "[fedimb] done in 1m15s: final test accuracy 0.8000 (round 4), "
        "best validation 0.7000 (round 2), test there 0.5500"
    )
    blind = [scored(0, None, 0.2), scored(1, None, 0.4)]
    assert done_text(blind, 5.0) == (
        "[fedimb] done in 5s: best validation 0.4000 (round 1), test set not read"
    )


def test_a_run_without_the_test_set_shows_validation_scores_labelled_as_such():
    line = round_line(scored(1, None, 0.4), 2, 3.0, [1.0])
    assert line.startswith("round 1/2 | val acc 0.4000 f1 0.5000 loss 2.0000 |")
    assert round_line(ROUNDS[1], 2, 3.0, [1.0]).startswith(
        "round 1/2 | acc 0.5000 f1 0.4000 loss 1.0000 |"
    )


def test_validation_scores_become_rows_of_their_own_split():
    rows = [r for r in metric_rows(ROUNDS[2]) if r[0] in ("test", "validation")]
    assert rows == [
        ("test", "accuracy", 0.55),
        ("test", "macro_f1", 0.55 - 0.1),
        ("test", "loss", 1.0),
        ("validation", "accuracy", 0.7),
        ("validation", "macro_f1", 0.5),
        ("validation", "loss", 2.0),
    ]


def test_a_run_known_by_its_rows_has_the_same_validation_choice():
    rows = [
        {"round": r["round"], "stage": "train", "split": split, "metric": metric, "value": value}
        for r in ROUNDS
        for split, metric, value in metric_rows(r)
    ]
    summary = summary_from_rows(rows, objective_last=3)
    assert (summary["validation_best_round"], summary["selected_test_accuracy"]) == (2, 0.55)


def make_run(root, name, seed, selected, *, seed_train=None):
    run = root / name
    run.mkdir(parents=True)
    config = {"method": {"name": "fedavg"}, "seed": seed, "seed_train": seed_train}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    summary = {
        "completed": True,
        "final_accuracy": 0.5,
        "best_accuracy": 0.9,
        "final_macro_f1": 0.4,
        "validation_best_round": 1,
        "selected_test_accuracy": selected,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "metrics.csv").write_text("round,stage,split,metric,value\n1,train,test,accuracy,0.5\n")


def test_the_report_shows_the_test_accuracy_validation_selects_and_no_test_maximum(tmp_path):
    make_run(tmp_path, "a", 0, 0.6)
    make_run(tmp_path, "b", 1, 0.8)
    make_run(tmp_path, "c", 1, 0.7, seed_train=4)  # another training seed: not a rerun of "b"
    text = write_report([tmp_path], tmp_path / "out", per_run=True).read_text()
    lines = text.splitlines()
    assert (
        "| method | runs | final test accuracy (%) | test accuracy at best validation round (%) "
        "| final macro-F1 (%) |"
    ) in lines
    assert "| fedavg | 3 | 50.00 ± 0.00 | 70.00 ± 10.00 | 40.00 ± 0.00 |" in lines
    assert "| fedavg | 1 (data 1, train 4) | 50.00 | 1 | 70.00 | 40.00 |" in lines
    assert "90.00" not in text  # the maximum over rounds of the test accuracy


def test_a_runs_seed_names_its_data_and_training_seeds_where_they_are_set(tmp_path):
    make_run(tmp_path, "a", 2, 0.6)
    make_run(tmp_path, "b", 2, 0.6, seed_train=5)
    assert [RunRecord.from_folder(tmp_path / n).seed for n in "ab"] == [2, "2 (data 2, train 5)"]
