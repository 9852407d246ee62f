"""``partition=file``: another framework's split brought in as a JSON file, every run's
own split exported in its ``partition.json``, and the two giving the identical run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedimb.app.configuration.build import experiment_data
from fedimb.app.configuration.compose import compose
from fedimb.cli.rundir.files import read_metrics_csv
from fedimb.core.errors import ConfigError

DIGITS_TRAIN = 1437  # sklearn's 1,797 digits, 20% held out as the test set


def file_partition(tmp_path: Path, clients, num_clients: int | None = None):
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"clients": clients}))
    cfg = compose(
        [
            "dataset=digits",
            "partition=file",
            f"partition.path={path}",
            f"num_clients={num_clients if num_clients is not None else len(clients)}",
        ]
    )
    return experiment_data(cfg).partition


def test_a_client_may_be_a_range_and_a_run_folder_writes_blocks_so():
    from fedimb.cli.launch.experiment import partition_json

    written = json.loads(
        partition_json(
            {"num_clients": 4}, [np.arange(3, 7), np.array([9, 8]), np.array([4]), np.arange(0)]
        )
    )["clients"]
    assert written == [{"range": [3, 7]}, [9, 8], [4], []]


def test_a_range_gives_the_indices_it_spans(tmp_path):
    partition = file_partition(tmp_path, [{"range": [0, 3]}, [3, 4], {"range": [10, 12]}])
    assert [ix.tolist() for ix in partition.indices] == [[0, 1, 2], [3, 4], [10, 11]]


def test_the_file_gives_each_client_its_indices_duplicates_allowed(tmp_path):
    clients = [[0, 1, 2, 2], [3, 4, 5], [6, 0]]
    partition = file_partition(tmp_path, clients)
    assert [ix.tolist() for ix in partition.indices] == [[0, 1, 2, 2], [3, 4, 5], [0, 6]]
    assert partition.counts.sum() == 9


@pytest.mark.parametrize(
    "clients, num_clients, message",
    [
        (
            [[0, 1], [DIGITS_TRAIN]],
            None,
            f"client 1 has index {DIGITS_TRAIN}, outside the training split",
        ),
        ([[0, -1], [2]], None, "client 0 has index -1"),
        ([[0, 1.5], [2]], None, "client 0 has a non-integer index 1.5"),
        ([[0, "3"], [2]], None, "non-integer index '3'"),
        ([[0, 1], []], None, "client 1 has no samples"),
        ([[0, 1], [2]], 3, "holds 2 clients but num_clients=3"),
        ([[0, 1], {"range": [5, 2]}], None, "client 1 has a range that ends before it starts"),
        ([[0, 1], {"range": [2]}], None, 'client 1 must be a list of indices or {"range"'),
        ([[0, 1], {"range": [0, 2], "x": 1}], None, "client 1 must be a list of indices"),
        ([[0, 1], {"range": [0, 2.5]}], None, "client 1 has a non-integer index 2.5"),
        ([[0, 1], {"range": [0, DIGITS_TRAIN + 1]}], None, f"index {DIGITS_TRAIN}, outside"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, clients, num_clients, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        file_partition(tmp_path, clients, num_clients)


def test_missing_or_malformed_files_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="needs partition.path"):
        compose(["dataset=digits", "partition=file"])
    with pytest.raises(ConfigError, match="no such file"):
        compose(["dataset=digits", "partition=file", f"partition.path={tmp_path / 'none.json'}"])
    (tmp_path / "bad.json").write_text('{"clients": [1, 2]}')
    with pytest.raises(ConfigError, match="must hold"):
        compose(["dataset=digits", "partition=file", f"partition.path={tmp_path / 'bad.json'}"])


def test_a_run_exported_partition_reimports_into_the_identical_run(tmp_path):
    from fedimb.cli.commands.diagnose import diagnose_config, report_lines
    from fedimb.cli.launch.experiment import run_experiment

    common = [
        "runtime=in_process",
        "dataset=digits",
        "num_clients=4",
        "num_rounds=2",
        "dropout=none",
        "train.local_epochs=1",
        "seed=3",
        "checkpoint.enabled=false",
    ]
    quiet = lambda line: None  # noqa: E731 - the progress lines
    first_dir = run_experiment(
        compose([*common, "partition=dirichlet", "partition.alpha=0.3"]), tmp_path / "a", quiet
    )
    exported = json.loads((first_dir / "partition.json").read_text())
    assert [len(c) for c in exported["clients"]] == exported["client_sizes"]

    reimport = [*common, "partition=file", f"partition.path={first_dir / 'partition.json'}"]
    second_dir = run_experiment(compose(reimport), tmp_path / "b", quiet)

    def scores(run_dir):
        return [
            (r["round"], r["metric"], r["value"])
            for r in read_metrics_csv(run_dir / "metrics.csv")
            if r["split"] in ("test", "train") and r["metric"] != "seconds"
        ]

    assert scores(first_dir) == scores(second_dir)
    assert json.loads((second_dir / "partition.json").read_text())["clients"] == exported["clients"]

    text = "\n".join(
        report_lines(*diagnose_config(compose(reimport)))
    )  # what fedimb diagnose prints
    assert "client sizes" in text.lower() and str(min(exported["client_sizes"])) in text


def test_the_file_partition_travels_inside_the_configuration(tmp_path):
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"clients": [[0, 1], [2, 3]]}))
    cfg = compose(["dataset=digits", "partition=file", f"partition.path={path}", "num_clients=2"])
    path.unlink()  # a node on another machine has no such file: the indices are in the config
    from fedimb.app.configuration import transport

    again = transport.decode(transport.encode(cfg))
    assert np.array_equal(experiment_data(again).partition.indices[1], [2, 3])
