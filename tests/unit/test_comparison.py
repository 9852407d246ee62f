"""``fedimb report``: grouping of run folders into rows and the numbers in the table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from fedimb.comparison import find_runs, group_runs, write_report
from fedimb.errors import ConfigError


def make_run(root, name, *, method="fedavg", seed=0, final=0.5, best=0.6, alpha=0.1, extra=None,
             completed=True, lr=None, more=None):
    run = root / name
    run.mkdir(parents=True)
    config = {"method": {"name": method}, "seed": seed, "partition": {"name": "dirichlet", "alpha": alpha},
              "output": {"root": str(root)}, "runtime": {"name": "simulation"}, **(more or {})}
    if lr is not None:
        config["method"]["lr"] = lr
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "summary.json").write_text(json.dumps({
        "completed": completed, "final_accuracy": final, "best_accuracy": best, "final_macro_f1": final - 0.1,
        "target_accuracy": None,
    }))
    rows = ["round,stage,split,metric,value", f"1,train,test,accuracy,{best}", f"2,train,test,accuracy,{final}"]
    rows += [f"2,train,extra,{k},{v}" for k, v in (extra or {}).items()]
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
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
    assert sorted(groups) == ["fedavg [A]", "fedavg [B]", "rebafl (lr=0.1) [A]", "rebafl (lr=0.2) [A]"]
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
    assert row == "| fedavg | 2 | 60.00 ± 14.14 | 60.00 ± 0.00 | 50.00 ± 14.14 | 2.000 ± 1.414 | 50.00 ± 14.14 |"
    assert (tmp_path / "out" / "accuracy.png").stat().st_size > 0


def test_report_without_runs_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no completed runs"):
        write_report([tmp_path], tmp_path / "out")


def test_cli_prints_the_table(tmp_path):
    make_run(tmp_path, "a0")
    result = subprocess.run([sys.executable, "-m", "fedimb", "report", str(tmp_path), "--title", "T"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "| fedavg | 1 | 50.00 ± 0.00 |" in result.stdout
    assert result.stdout.strip().endswith("report.md")
