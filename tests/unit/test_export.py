"""``fedimb export``: one tidy table of many runs' metrics, and ``fedimb report`` over it."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from fedimb.cli.results.export import export_runs
from fedimb.cli.results.export_table import read_table
from fedimb.cli.results.report import write_report
from fedimb.core.errors import ConfigError
from tests.conftest import run_fedimb
from tests.unit.test_comparison import make_run

COLUMNS = [
    "run_id",
    "run_dir",
    "finished",
    "rerun",
    "method",
    "dataset",
    "model",
    "partition",
    "partition.allow_empty_clients",
    "partition.alpha",
    "partition.classes_per_client",
    "partition.min_partition_size",  # the runs' configs brought up to date: every key
    "partition.samples_per_client",  # today's options declare, at its default
    "dropout",
    "num_clients",
    "seed",
    "round",
    "stage",
    "split",
    "metric",
    "value",
    "setup",
]


def full_run(
    root,
    name,
    *,
    run_id=None,
    method="fedavg",
    seed=0,
    final=0.5,
    best=0.6,
    partition=None,
    **kwargs,
):
    """A run folder whose set-up the exported columns describe completely, and whose
    summary.json agrees with its metrics.csv (so both sources give the same numbers)."""
    more = {
        "dataset": {"name": "digits"},
        "model": {"name": "mlp"},
        "dropout": {"name": "none"},
        "num_clients": 4,
    }
    if run_id is not None:
        more["checkpoint"] = {"run_id": run_id, "enabled": True}
    if partition is not None:
        more["partition"] = partition
    rows = [
        (1, "train", "test", "macro_f1", best - 0.1),
        (2, "train", "test", "macro_f1", final - 0.1),
        (1, "train", "test", "loss", 2.0 + seed),
        (2, "train", "test", "loss", 1.0 + seed),
        *kwargs.pop("rows", ()),
    ]
    return make_run(
        root, name, method=method, seed=seed, final=final, best=best, more=more, rows=rows, **kwargs
    )


@pytest.fixture
def sweep(tmp_path):
    """A sweep folder with two runs of different partitions; the second lacks a run id."""
    folder = tmp_path / "multirun" / "sweep"
    full_run(
        folder,
        "0-fedavg-digits-s0",
        run_id="0123456789ab",
        final=0.5,
        best=0.625,
        partition={
            "name": "dirichlet",
            "alpha": 0.1,
            "allow_empty_clients": False,
            "clients": [[1, 2], [3]],
        },
    )
    full_run(
        folder,
        "1-fedavg-digits-s1",
        seed=1,
        final=0.75,
        best=0.75,
        partition={"name": "pathological", "classes_per_client": 2, "allow_empty_clients": False},
        extra={"T_g": 0.25},
    )
    make_run(folder, "2-crashed", completed=False)
    return folder


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_export_has_one_row_per_value_with_the_runs_columns(sweep, tmp_path, suffix):
    path, found, rows = export_runs([tmp_path], tmp_path / f"out{suffix}")
    table = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
    assert (len(found.records), rows, len(table)) == (
        2,
        13,
        13,
    )  # 6 rows in the first run, 7 (with T_g) in the second
    assert list(table.columns) == COLUMNS
    assert {c: str(table[c].dtype) for c in ("round", "seed", "num_clients", "value", "rerun")} == {
        "round": "int64",
        "seed": "int64",
        "num_clients": "int64",
        "value": "float64",
        "rerun": "bool",
    }
    assert not table["rerun"].any()
    for column in (
        "run_id",
        "run_dir",
        "method",
        "dataset",
        "model",
        "partition",
        "dropout",
        "split",
        "metric",
    ):
        assert pd.api.types.is_string_dtype(table[column]), column
    if suffix == ".parquet":  # CSV readers guess the partition settings' types from their text
        assert all(
            pd.api.types.is_string_dtype(table[c]) for c in COLUMNS if c.startswith("partition.")
        )
    first, second = table[table["seed"] == 0], table[table["seed"] == 1]
    # a run made before run ids existed is known by its folder
    second_dir = str((sweep / "1-fedavg-digits-s1").resolve())
    assert set(first["run_id"]) == {"0123456789ab"} and set(second["run_id"]) == {second_dir}
    assert set(first["run_dir"]) == {str((sweep / "0-fedavg-digits-s0").resolve())}
    assert float(first["partition.alpha"].iloc[0]) == 0.1 and second["partition.alpha"].isna().all()
    assert first["partition.classes_per_client"].isna().all()
    value = table[(table["seed"] == 1) & (table["round"] == 2) & (table["metric"] == "accuracy")][
        "value"
    ]
    assert value.tolist() == [0.75]
    assert table[table["metric"] == "T_g"][["split", "stage", "round"]].values.tolist() == [
        ["extra", "train", 2]
    ]


def test_default_output_is_beside_the_first_folder_and_format_follows_the_suffix(sweep):
    path, _, _ = export_runs([sweep])
    assert path == (sweep / "export.parquet").resolve() and path.read_bytes()[:4] == b"PAR1"
    path, _, _ = export_runs([sweep], fmt="csv")
    assert path.name == "export.csv" and path.read_text().startswith(
        "run_id,run_dir,finished,rerun,method,"
    )


def test_errors_are_one_line(sweep, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("")
    cases = [
        (dict(folders=[tmp_path / "empty"]), "no completed runs (summary.json) in"),
        (dict(folders=[sweep], fmt="xlsx"), "unknown format 'xlsx' (choose from: parquet, csv)"),
        (dict(folders=[sweep], out=tmp_path / "t.txt"), "cannot tell the format of"),
        (
            dict(folders=[sweep], out=tmp_path / "t.csv", fmt="parquet"),
            "--format parquet does not match",
        ),
        (dict(folders=[sweep], out=tmp_path / "file" / "t.parquet"), "is a file, not a folder"),
        (dict(folders=[sweep], out=tmp_path), "it is a folder"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError) as err:
            export_runs(**kwargs)
        assert message in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError, match=r"\.venv/bin/pip install pyarrow"):
        export_runs([sweep])
    assert len(export_runs([sweep], fmt="csv")[1].records) == 2  # CSV needs no pyarrow


def test_cli_prints_counts_then_the_path_and_fails_in_one_line(sweep, tmp_path):
    done = run_fedimb("export", str(sweep), "--out", str(tmp_path / "a.csv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "3 runs found; left out: 0 copies (in a tracker's store, or a second folder of a run id), "
        "1 not completed; 0 reruns of the same set-up and seed flagged (column rerun).",
        "2 runs, 13 rows",
        str((tmp_path / "a.csv").resolve()),
    ]
    failed = run_fedimb("export", str(sweep), "--format", "xlsx")
    assert failed.returncode == 2
    assert (
        failed.stderr.strip() == "fedimb: error: unknown format 'xlsx' (choose from: parquet, csv)"
    )


def comparison_runs(root):
    """Two set-ups (alpha 0.1 / 0.5) of fedavg and one of scaffold, over several seeds."""
    partition = {"name": "dirichlet", "alpha": 0.1, "allow_empty_clients": False}
    for seed, final in ((0, 0.5), (1, 0.7), (2, 0.625)):
        full_run(
            root,
            f"fedavg-s{seed}",
            run_id=f"{seed:012x}",
            seed=seed,
            final=final,
            best=0.75,
            partition=partition,
            extra={"T_g": final / 2, "mediator_kl": seed + 1.0},
            rows=[(1, "train", "extra", "q", 9.5 + seed)],
        )
    full_run(
        root,
        "fedavg-alpha0.5",
        run_id="a" * 12,
        final=0.8,
        best=0.8,
        partition={**partition, "alpha": 0.5},
    )
    full_run(root, "scaffold-s10", run_id="b" * 12, method="scaffold", seed=10, partition=partition)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_report_over_the_exported_table_equals_the_report_over_the_folders(tmp_path, suffix):
    comparison_runs(tmp_path / "runs")
    table, _, _ = export_runs([tmp_path / "runs"], tmp_path / f"export{suffix}")
    options = dict(mean_keys=["mediator_kl"], range_keys=["q"], at_rounds=[1, 2])
    from_folders = (
        write_report([tmp_path / "runs"], tmp_path / "a", **options).read_text().splitlines()
    )
    from_table = write_report([table], tmp_path / "b", **options).read_text().splitlines()
    assert from_table[:-1] == from_folders[:-1]  # all but the "Runs:" line, which names the inputs
    assert (
        "| fedavg [B] | 3 | 60.83 ± 10.10 | 50.83 ± 10.10 | 2.000 ± 1.000 "
        "| 9.5 – 11.5 | 30.42 ± 5.05 |"
    ) in from_table
    assert from_table[-4:] == [
        "| fedavg [B] | 2 | 62.50 | 52.50 | 75.00 (4.0000) | 62.50 (3.0000) |",
        "| scaffold [B] | 10 | 50.00 | 40.00 | 60.00 (12.0000) | 50.00 (11.0000) |",
        "",
        f"Runs: `{table}`",
    ]
    assert "- [A]: partition.alpha=0.5" in from_table
    assert (tmp_path / "b" / "accuracy.png").stat().st_size > 0
    both = (
        write_report([tmp_path / "runs", table], tmp_path / "c", **options).read_text().splitlines()
    )
    tally = next(i for i, line in enumerate(both) if " runs found; " in line)
    assert both[tally].startswith("10 runs found; left out: 5 copies")  # a run in both counts once
    assert (
        both[:tally] + both[tally + 1 : -1] == from_folders[:tally] + from_folders[tally + 1 : -1]
    )


def test_table_runs_carry_the_set_up_seed_and_summary(tmp_path):
    comparison_runs(tmp_path / "runs")
    table, _, _ = export_runs([tmp_path / "runs"], tmp_path / "export.csv")
    record = next(r for r in read_table(table) if r.seed == 1)
    written = {
        "method.name": "fedavg",
        "dataset.name": "digits",
        "model.name": "mlp",
        "partition.name": "dirichlet",
        "partition.allow_empty_clients": False,
        "partition.alpha": 0.1,
        "dropout.name": "none",
        "num_clients": 4,
    }
    assert written.items() <= record.setup.items()
    folder = next(r for r in found_runs_of(tmp_path / "runs") if r.seed == 1)
    assert record.setup == folder.setup  # the whole set-up, brought up to date, round trips
    assert record.summary == {
        "final_accuracy": 0.7,
        "best_accuracy": 0.75,
        "final_macro_f1": pytest.approx(0.6),
    }


def found_runs_of(folder):
    from fedimb.cli.results.found_runs import load_runs

    return load_runs([folder]).records


def test_cli_report_reads_a_table_and_writes_beside_it(tmp_path):
    comparison_runs(tmp_path / "runs")
    table, _, _ = export_runs([tmp_path / "runs"])
    result = run_fedimb("report", str(table))
    assert result.returncode == 0, result.stderr
    assert "| scaffold [B] | 1 |" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == str(
        (tmp_path / "runs" / "report" / "report.md").resolve()
    )


def test_report_rejects_a_table_that_export_did_not_write(tmp_path):
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(
        ConfigError, match=r"other.csv is not a table written by fedimb export \(no column run_id"
    ):
        write_report([tmp_path / "other.csv"], tmp_path / "out")
    with pytest.raises(ConfigError, match="missing.parquet is not a file"):
        write_report([tmp_path / "missing.parquet"], tmp_path / "out")


def test_runs_that_differ_only_beyond_the_named_columns_stay_apart_through_the_table(tmp_path):
    """The ``setup`` column carries what the named columns do not (here the method's lr)."""
    for seed in (0, 1):
        full_run(tmp_path / "runs", f"lr1-s{seed}", seed=seed, lr=0.1, final=0.5 + seed / 10)
        full_run(tmp_path / "runs", f"lr2-s{seed}", seed=seed, lr=0.01, final=0.3 + seed / 10)
    table, _, _ = export_runs([tmp_path / "runs"], tmp_path / "export.parquet")
    assert {record.setup["method.lr"] for record in read_table(table)} == {0.1, 0.01}
    from_folders = write_report([tmp_path / "runs"], tmp_path / "a").read_text().splitlines()
    from_table = write_report([table], tmp_path / "b").read_text().splitlines()
    assert from_table[:-1] == from_folders[:-1]
    assert sum(line.startswith("| fedavg") for line in from_table) == 2  # one row per lr
