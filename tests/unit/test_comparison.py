"""``fedimb report``: grouping of run folders into rows and the numbers in the table."""

from __future__ import annotations

import json

import pytest
import yaml

from fedimb.cli.results.report import write_report
from fedimb.cli.results.report_tables import group_runs
from fedimb.cli.results.run_records import find_runs
from fedimb.core.errors import ConfigError
from tests.conftest import run_fedimb


def make_run(
    root,
    name,
    *,
    method="fedavg",
    seed=0,
    final=0.5,
    best=0.6,
    alpha=0.1,
    extra=None,
    completed=True,
    lr=None,
    more=None,
    rows=(),
):
    run = root / name
    run.mkdir(parents=True)
    config = {
        "method": {"name": method},
        "seed": seed,
        "partition": {"name": "dirichlet", "alpha": alpha},
        "output": {"root": str(root)},
        "runtime": {"name": "simulation"},
        **(more or {}),
    }
    if lr is not None:
        config["method"]["lr"] = lr
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "summary.json").write_text(
        json.dumps(
            {
                "completed": completed,
                "final_accuracy": final,
                "best_accuracy": best,
                "final_macro_f1": final - 0.1,
                "target_accuracy": None,
            }
        )
    )
    lines = [
        "round,stage,split,metric,value",
        f"1,train,test,accuracy,{best}",
        f"2,train,test,accuracy,{final}",
    ]
    lines += [f"2,train,extra,{k},{v}" for k, v in (extra or {}).items()]
    lines += [",".join(map(str, row)) for row in rows]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    return run


def test_seeds_of_one_setup_form_one_row(tmp_path):
    make_run(tmp_path, "a0", seed=0, final=0.5)
    make_run(tmp_path, "a1", seed=1, final=0.7)
    make_run(tmp_path, "b0", method="scaffold", seed=0)
    groups, legend = group_runs(find_runs([tmp_path]))
    assert {label: len(runs) for label, runs in groups.items()} == {"fedavg": 2, "scaffold": 1}
    assert legend == {}


def test_differing_settings_label_rows_and_missing_settings_are_ignored(tmp_path):
    make_run(tmp_path, "a", alpha=0.1)
    make_run(tmp_path, "b", alpha=0.5)
    make_run(tmp_path, "c", method="rebafl", lr=0.1, alpha=0.1)
    make_run(tmp_path, "d", method="rebafl", lr=0.2, alpha=0.1, more={"added_later": 1})
    groups, legend = group_runs(find_runs([tmp_path]))
    assert sorted(groups) == [
        "fedavg [A]",
        "fedavg [B]",
        "rebafl (lr=0.1) [A]",
        "rebafl (lr=0.2) [A]",
    ]
    assert sorted(legend.values()) == ["partition.alpha=0.1", "partition.alpha=0.5"]


def test_incomplete_runs_are_left_out(tmp_path):
    make_run(tmp_path, "done")
    make_run(tmp_path, "crashed", completed=False)
    assert [p.name for p in find_runs([tmp_path])] == ["done"]


def test_report_table_has_mean_std_and_the_methods_own_scores(tmp_path):
    make_run(tmp_path / "runs", "a0", seed=0, final=0.5, extra={"T_g": 0.4, "mediator_kl": 1.0})
    make_run(tmp_path / "runs", "a1", seed=1, final=0.7, extra={"T_g": 0.6, "mediator_kl": 3.0})
    report = write_report([tmp_path / "runs"], tmp_path / "out", mean_keys=["mediator_kl"])
    text = report.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| fedavg"))
    # final accuracy 50 and 70 -> 60.00 ± 14.14 (sample std); T_g 40/60 -> 50.00 ± 14.14; KL mean 2
    assert row == ("| fedavg | 2 | 60.00 ± 14.14 | 50.00 ± 14.14 | 2.000 ± 1.414 | 50.00 ± 14.14 |")
    assert (tmp_path / "out" / "accuracy.png").stat().st_size > 0


def test_range_columns_span_every_round_of_every_run_and_match_patterns(tmp_path):
    make_run(
        tmp_path,
        "a0",
        seed=0,
        rows=[
            (1, "train", "extra", "q", 9.7),
            (2, "train", "extra", "q", 10.2),
            (1, "train", "extra", "contribution.0", 0.95),
        ],
    )
    make_run(
        tmp_path,
        "a1",
        seed=1,
        rows=[(1, "train", "extra", "q", 10.9), (2, "train", "extra", "contribution.13", 0.81)],
    )
    make_run(tmp_path, "b0", method="scaffold")
    text = write_report(
        [tmp_path], tmp_path / "out", range_keys=["q", "contribution.*"]
    ).read_text()
    assert "| q (range over rounds) | contribution.* (range over rounds) |" in text
    assert next(line for line in text.splitlines() if line.startswith("| fedavg")).endswith(
        "| 9.7 – 10.9 | 0.81 – 0.95 |"
    )
    assert next(line for line in text.splitlines() if line.startswith("| scaffold")).endswith(
        "| - | - |"
    )


def test_per_run_table_lists_every_seed_with_accuracy_and_loss_at_chosen_rounds(tmp_path):
    make_run(tmp_path, "a1", seed=1, final=0.7, best=0.8, rows=[(1, "train", "test", "loss", 2.5)])
    make_run(
        tmp_path,
        "a0",
        seed=0,
        final=0.5,
        best=0.6,
        rows=[(1, "train", "test", "loss", 5.0055), (2, "train", "test", "loss", 6.9)],
    )
    text = write_report([tmp_path], tmp_path / "out", at_rounds=[1, 2]).read_text()
    rows = text.split("## Every run")[1].strip().split("\n\n")[0].splitlines()
    assert rows[0] == (
        "| method | seed | final test accuracy (%) | final macro-F1 (%) "
        "| round 1: accuracy % (loss) | round 2: accuracy % (loss) |"
    )
    assert rows[2:] == [
        "| fedavg | 0 | 50.00 | 40.00 | 60.00 (5.0055) | 50.00 (6.9000) |",
        "| fedavg | 1 | 70.00 | 60.00 | 80.00 (2.5000) | - |",
    ]
    assert "## Every run" not in write_report([tmp_path], tmp_path / "plain").read_text()


def test_cli_rejects_rounds_that_are_not_numbers(tmp_path):
    make_run(tmp_path, "a0")
    result = run_fedimb("report", str(tmp_path), "--at-rounds", "last")
    assert result.returncode == 2
    assert "--at-rounds takes comma-separated round numbers" in result.stderr


def test_report_without_runs_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no completed runs"):
        write_report([tmp_path], tmp_path / "out")


def test_cli_prints_the_table(tmp_path):
    make_run(tmp_path, "a0")
    result = run_fedimb("report", str(tmp_path), "--title", "T")
    assert result.returncode == 0, result.stderr
    assert "| fedavg | 1 | 50.00 (n = 1) |" in result.stdout
    assert result.stdout.strip().endswith("report.md")
