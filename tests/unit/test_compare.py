"""``fedimb compare``: t intervals and paired t-tests equal scipy's, Holm's correction equals
hand-computed values, runs pair by seed, set-ups group as the report's rows do, and the
command writes its tables and figures from run folders."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from fedimb.cli.main import run as fedimb
from fedimb.cli.results.compare import compare_runs, comparison_markdown, seed_pair
from fedimb.cli.results.compare_stats import holm, paired_difference, t_interval, variance_split
from fedimb.core.errors import ConfigError
from tests.conftest import run_fedimb
from tests.unit.test_comparison import make_run

VALUES = [0.81, 0.84, 0.79, 0.88, 0.85]


def fake_run(root, name, *, method="fedavg", seed=0, final=0.5, summary=None, **kwargs):
    """A completed run folder (:func:`make_run`) whose summary.json also holds ``summary``."""
    run = make_run(root, name, method=method, seed=seed, final=final, best=final, **kwargs)
    path = run / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **(summary or {})}))
    return run


def test_the_interval_is_scipys_t_interval():
    interval = t_interval(VALUES)
    mean = np.mean(VALUES)
    expected = stats.t.interval(0.95, len(VALUES) - 1, loc=mean, scale=stats.sem(VALUES))
    assert (interval.n, interval.mean) == (5, pytest.approx(mean, abs=1e-15))
    assert (interval.low, interval.high) == pytest.approx(expected, rel=1e-12)
    assert (interval.low, interval.high) == pytest.approx(
        tuple(stats.ttest_1samp(VALUES, 0).confidence_interval(0.95)), rel=1e-12
    )
    assert (t_interval([0.7]).low, t_interval([0.7]).high) == (None, None)


def test_the_paired_difference_is_ttest_rel_on_the_seeds_both_ran():
    method = {0: 0.80, 1: 0.85, 2: 0.83, 3: 0.90, 7: 0.99}
    reference = {0: 0.78, 1: 0.80, 2: 0.84, 3: 0.85, 4: 0.10}
    diff = paired_difference(method, reference)
    a, b = [0.80, 0.85, 0.83, 0.90], [0.78, 0.80, 0.84, 0.85]  # seeds 4 and 7 unpaired
    test = stats.ttest_rel(a, b)
    assert (diff.pairs, diff.unpaired) == (4, 2)
    assert diff.mean == pytest.approx(np.mean(np.subtract(a, b)), abs=1e-15)
    assert diff.p == pytest.approx(test.pvalue, rel=1e-12)
    assert (diff.low, diff.high) == pytest.approx(tuple(test.confidence_interval()), rel=1e-12)


def test_fewer_than_two_pairs_give_no_interval_and_no_test():
    diff = paired_difference({0: 0.9, 1: 0.8}, {1: 0.7, 2: 0.6})
    assert (diff.pairs, diff.unpaired, diff.low, diff.high, diff.p) == (1, 2, None, None, None)
    assert diff.mean == pytest.approx(0.1)


def test_holm_adjusts_as_computed_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1, then monotone
    assert holm([0.02]) == [0.02]


def test_variance_split_between_and_within_data_seeds():
    # data seed 0: 1, 3 (mean 2, var 2); data seed 1: 5, 7 (mean 6, var 2)
    split = variance_split({0: [1.0, 3.0], 1: [5.0, 7.0], 2: [9.0]})  # seed 2: one run, left out
    assert (split.data_seeds, split.train_seeds) == (2, 2)
    assert (split.between, split.within, split.data_component) == (8.0, 2.0, 7.0)
    assert variance_split({0: [1.0, 3.0], 1: [5.0]}) is None


def test_runs_pair_by_the_split_seeds_else_by_seed(tmp_path):
    from fedimb.cli.results.run_records import RunRecord

    split = fake_run(tmp_path, "a", seed=3, summary={"seed_data": 1, "seed_train": 2})
    plain = fake_run(tmp_path, "b", seed=3)
    assert seed_pair(RunRecord.from_folder(split)) == (1, 2)
    assert seed_pair(RunRecord.from_folder(plain)) == (3, 3)


def sweep(root, method, finals, **kwargs):
    """A run of ``method`` per seed with these final accuracies (None: no run of that seed)."""
    tag = len(list(root.glob(f"{method}-*-s0"))) if root.exists() else 0  # a second sweep's
    for seed, final in enumerate(finals):
        if final is not None:
            fake_run(
                root, f"{method}-{tag}-s{seed}", method=method, seed=seed, final=final, **kwargs
            )


FEDAVG = [0.80, 0.82, 0.78, 0.85, 0.81]
REBAFL = [0.85, 0.86, 0.84, 0.89, 0.86]  # 4 to 6 points above FedAvg on every seed
FEDPROX = [0.83, 0.80, 0.79, 0.84, None]  # around FedAvg, seed 4 missing


def test_rows_compare_with_fedavg_by_seed_and_holm(tmp_path):
    sweep(tmp_path, "fedavg", FEDAVG)
    sweep(tmp_path, "rebafl", REBAFL)
    sweep(tmp_path, "fedprox", FEDPROX)
    (setup,) = compare_runs([tmp_path], None, "final_accuracy")
    assert setup.reference == "fedavg"
    assert [m.label for m in setup.methods] == ["fedavg", "rebafl", "fedprox"]
    rebafl, fedprox = setup.methods[1], setup.methods[2]
    p_rebafl = stats.ttest_rel(REBAFL, FEDAVG).pvalue
    p_fedprox = stats.ttest_rel(FEDPROX[:4], FEDAVG[:4]).pvalue
    assert (fedprox.difference.pairs, fedprox.difference.unpaired) == (4, 1)
    assert fedprox.difference.p == pytest.approx(p_fedprox, rel=1e-12)
    # Holm over the two: the smaller p doubled, the larger kept (not below the first)
    assert rebafl.holm_p == pytest.approx(2 * p_rebafl, rel=1e-12)
    assert fedprox.holm_p == pytest.approx(max(p_fedprox, 2 * p_rebafl), rel=1e-12)
    text = comparison_markdown([setup])
    row = next(line for line in text.splitlines() if line.startswith("| fedprox |"))
    assert row.endswith(f"| not distinguishable (Holm p = {fedprox.holm_p:.3g}) |")
    assert "| 4 (1 unpaired) |" in row
    row = next(line for line in text.splitlines() if line.startswith("| rebafl |"))
    low, high = stats.ttest_rel(REBAFL, FEDAVG).confidence_interval()
    assert row == (
        f"| rebafl | 5 | 86.00 | [{100 * t_interval(REBAFL).low:.2f}, "
        f"{100 * t_interval(REBAFL).high:.2f}] | 5 | +4.80 | [{100 * low:+.2f}, {100 * high:+.2f}] "
        f"| {p_rebafl:.3g} | {rebafl.holm_p:.3g} | better (Holm p = {rebafl.holm_p:.3g}) |"
    )
    assert "t interval (Student's t" in text and "scipy.stats.ttest_rel" in text


def test_one_pair_reads_not_applicable(tmp_path):
    sweep(tmp_path, "fedavg", FEDAVG[:2])
    sweep(tmp_path, "rebafl", [0.9])
    text = comparison_markdown(compare_runs([tmp_path], "fedavg", "final_accuracy"))
    row = next(line for line in text.splitlines() if line.startswith("| rebafl |"))
    assert (
        row == "| rebafl | 1 | 90.00 | n/a (n = 1) | 1 (1 unpaired) | +10.00 | n/a (1 pair) "
        "| n/a (1 pair) | - | n/a (1 pair) |"
    )


def test_setups_split_by_their_settings_not_by_a_searched_one(tmp_path):
    searched = {"tune": {"search": {"train.lr": "log(0.001, 0.3)"}}}
    for method, finals, alpha, lr in (
        ("fedavg", FEDAVG[:3], 0.1, 0.05),
        ("rebafl", REBAFL[:3], 0.1, 0.1),  # tuned to another learning rate: same set-up
        ("fedavg", FEDAVG[:3], 0.5, 0.05),
        ("fedavg", FEDAVG[:3], 0.5, 0.2),  # two of FedAvg's in one set-up: labelled apart
    ):
        sweep(tmp_path, method, finals, alpha=alpha, more={**searched, "train": {"lr": lr}})
    setups = compare_runs([tmp_path], "rebafl", "final_accuracy")
    assert [(s.name, [m.label for m in s.methods]) for s in setups] == [
        ("partition.alpha=0.1", ["rebafl", "fedavg"]),
        ("partition.alpha=0.5", ["fedavg (train.lr=0.05)", "fedavg (train.lr=0.2)"]),
    ]
    with pytest.raises(ConfigError, match="has 2 configurations of fedavg: name one"):
        compare_runs([tmp_path], None, "final_accuracy")
    (tmp_path / "unsearched").mkdir()
    unsearched = {"tune": {"search": {}}}  # tune.search={}: nothing searched, lr set by hand
    sweep(tmp_path / "unsearched", "fedavg", FEDAVG[:2], more={**unsearched, "train": {"lr": 0.05}})
    sweep(tmp_path / "unsearched", "rebafl", REBAFL[:2], more={**unsearched, "train": {"lr": 0.1}})
    names = [s.name for s in compare_runs([tmp_path / "unsearched"], None, "final_accuracy")]
    assert names == ["train.lr=0.05", "train.lr=0.1"]


def test_a_draw_that_follows_the_seed_belongs_to_the_seed_not_to_the_setup(tmp_path):
    # Synthetic's dataset.data_seed resolves to seed_data, else seed
    for method, finals in (("fedavg", FEDAVG[:3]), ("rebafl", REBAFL[:3])):
        for seed, final in enumerate(finals):
            draw = {"dataset": {"name": "synthetic", "data_seed": seed}}
            fake_run(
                tmp_path / "follows",
                f"{method}-s{seed}",
                method=method,
                seed=seed,
                final=final,
                more=draw,
            )
    (setup,) = compare_runs([tmp_path / "follows"], "fedavg", "final_accuracy")
    assert [(m.label, len(m.values)) for m in setup.methods] == [("fedavg", 3), ("rebafl", 3)]
    # draws fixed by hand, each for every seed, are set-ups of their own
    for fixed in (7, 8):
        for seed, final in enumerate(FEDAVG[:2]):
            draw = {"dataset": {"name": "synthetic", "data_seed": fixed}}
            fake_run(tmp_path / "fixed", f"d{fixed}-s{seed}", seed=seed, final=final, more=draw)
    names = [s.name for s in compare_runs([tmp_path / "fixed"], None, "final_accuracy")]
    assert names == ["dataset.data_seed=7", "dataset.data_seed=8"]


def test_a_grid_of_seeds_reports_both_variances(tmp_path):
    finals = {(0, 0): 0.70, (0, 1): 0.72, (1, 0): 0.80, (1, 1): 0.84}
    for (data, train), final in finals.items():
        fake_run(
            tmp_path,
            f"g{data}{train}",
            summary={"seed_data": data, "seed_train": train},
            final=final,
        )
    (setup,) = compare_runs([tmp_path], None, "final_accuracy")
    (fedavg,) = setup.methods
    assert len(fedavg.runs) == 4  # one seed, four seed pairs: no reruns
    split = fedavg.variance
    assert split.between == pytest.approx(np.var([0.71, 0.82], ddof=1))
    assert split.within == pytest.approx(
        (np.var([0.70, 0.72], ddof=1) + np.var([0.80, 0.84], ddof=1)) / 2
    )
    text = comparison_markdown([setup])
    assert f"| fedavg | 2 × 2 | {split.between * 1e4:.3g} | {split.within * 1e4:.3g} |" in text


def test_compare_command_writes_tables_and_figures(tmp_path, capsys):
    runs = tmp_path / "runs"
    local = {"local_accuracy_average": 0.6, "local_accuracy_worst_10": 0.2}
    validation = [
        (1, "train", "validation", "accuracy", 0.5),
        (2, "train", "validation", "accuracy", 0.6),
    ]
    for method, finals in (("fedavg", FEDAVG[:3]), ("rebafl", REBAFL[:3])):
        for seed, final in enumerate(finals):
            fake_run(
                runs,
                f"{method}-s{seed}",
                method=method,
                seed=seed,
                final=final,
                summary={**local, "selected_test_accuracy": final - 0.01},
                rows=validation,
            )
    out = tmp_path / "out"
    code = fedimb(
        [
            "compare",
            str(runs),
            "--metric",
            "selected_test_accuracy",
            "--markdown",
            str(out / "compare.md"),
            "--plot",
            str(out / "means.png"),
            "--curves",
            str(out / "curves.png"),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert (out / "compare.md").read_text() in printed
    assert "test accuracy at the round of best validation accuracy" in printed
    assert "| fedavg | 3 | 79.00 |" in printed  # 0.80, 0.82, 0.78 less 0.01
    assert "| rebafl | 3 | 60.00 | 20.00 |" in printed  # the accuracy over clients
    assert (out / "means.png").stat().st_size > 0 and (out / "curves.png").stat().st_size > 0


def test_bad_input_gets_one_line_errors(tmp_path):
    sweep(tmp_path / "runs", "fedavg", FEDAVG[:2])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"^no completed runs \(summary.json\) in .*empty$"):
        compare_runs([tmp_path / "empty"], None, "final_accuracy")
    with pytest.raises(
        ConfigError,
        match=r"^reference method 'scaffold' \(--against\) is not among the runs' methods: fedavg$",
    ):
        compare_runs([tmp_path / "runs"], "scaffold", "final_accuracy")
    with pytest.raises(
        ConfigError, match=r"^no run's summary.json has a number under 'nope' \(--metric\); numeric"
    ):
        compare_runs([tmp_path / "runs"], None, "nope")
    result = run_fedimb("compare", str(tmp_path / "runs"), "--metric", "nope")
    assert result.returncode == 2 and result.stderr.startswith(
        "fedimb: error: no run's summary.json has a number under 'nope'"
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_rerun_of_a_seed_pair_is_left_out_and_the_newest_kept(tmp_path):
    import os

    for name, final, finished in (("old", 0.5, 1_700_000_000), ("new", 0.7, 1_700_086_400)):
        run = fake_run(tmp_path, name, summary={"seed_data": 1, "seed_train": 2}, final=final)
        os.utime(run / "summary.json", (finished, finished))
    fake_run(tmp_path, "other", summary={"seed_data": 1, "seed_train": 3}, final=0.9)
    (setup,) = compare_runs([tmp_path], None, "final_accuracy")
    assert setup.methods[0].values == {(1, 2): 0.7, (1, 3): 0.9}


def test_a_lower_loss_on_every_seed_is_better(tmp_path):
    for seed, (fedavg, rebafl) in enumerate([(0.9, 0.5), (0.8, 0.6), (1.0, 0.7)]):
        fake_run(tmp_path, f"a{seed}", seed=seed, summary={"final_loss": fedavg})
        fake_run(tmp_path, f"b{seed}", method="rebafl", seed=seed, summary={"final_loss": rebafl})
    (setup,) = compare_runs([tmp_path], None, "final_loss")
    rebafl = setup.methods[1]
    p = stats.ttest_rel([0.5, 0.6, 0.7], [0.9, 0.8, 1.0]).pvalue
    assert rebafl.holm_p == pytest.approx(p, rel=1e-12) and p < 0.05
    row = next(line for line in comparison_markdown([setup]).splitlines() if "| rebafl |" in line)
    assert row.startswith("| rebafl | 3 | 0.60 | [0.35, 0.85] | 3 | -0.30 |")
    assert row.endswith(f"| better (Holm p = {p:.3g}) |")


def test_without_fedavg_and_no_reference_named_there_are_no_differences(tmp_path):
    sweep(tmp_path, "rebafl", REBAFL[:2])
    sweep(tmp_path, "fedprox", FEDPROX[:2])
    (setup,) = compare_runs([tmp_path], None, "final_accuracy")
    assert setup.reference is None and all(m.difference is None for m in setup.methods)
    text = comparison_markdown([setup])
    assert "| method | n | mean (%) | 95% t interval (%) |\n|---|---|---|---|\n" in text
    assert "Δ" not in text
