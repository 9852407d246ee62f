"""Every online data set's real loader, run without the network on a tiny local copy in
its source's own format (tests/fixtures_online.py), through partitioning and two rounds;
and the one-line error where there is no copy."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.data.datasets import DATASETS
from fedimb.core.data.ecg import BEAT_CLASSES, RECORDS
from fedimb.core.data.leaf import leaf_test_split
from fedimb.core.data.partitioners import natural
from fedimb.core.errors import ConfigError, DataUnavailableError
from tests.fixtures_online import (
    BEATS,
    WRITERS,
    emnist_files,
    hub_mirror,
    mitbih_records,
    offline_caches,
)

HUB_SETS = ("fmnist", "cifar10", "svhn", "cinic10")
ONLINE = (*HUB_SETS, "femnist", "emnist", "mitbih")


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    offline_caches(tmp_path, monkeypatch)


def two_rounds(overrides: list[str]) -> dict:
    """Two FedAvg rounds in process; the last round's record."""
    fed = InProcessFederation(
        ["method=fedavg", "num_rounds=2", "train.local_epochs=1", "dropout=none", *overrides]
    )
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["errors"] == 0 and record["clients"]["rejected"] == 0
        assert math.isfinite(record["train"]["train_loss"])
    assert 0 <= record["test"]["accuracy"] <= 1
    return record


@pytest.mark.parametrize("name", HUB_SETS)
def test_hub_data_set_loads_from_a_local_mirror(name, tmp_path):
    """``dataset.hf_id=<folder>``: flwr-datasets reads the parquet files (images decoded
    to the data set's mode, ``ClassLabel`` labels, its split names) with the Hub offline."""
    expected = hub_mirror(tmp_path / name, name)
    spec = {"name": name, "root": None, "hf_id": str(tmp_path / name)}
    raw = DATASETS[name].load_raw(spec)
    for split in ("train", "test"):
        np.testing.assert_array_equal(raw[f"x_{split}"], expected[split]["x"])
        np.testing.assert_array_equal(raw[f"y_{split}"], expected[split]["y"])
    assert raw["x_train"].shape[1:] == DATASETS[name].input_shape
    assert (tmp_path / "cache" / f"{name}.npz").is_file()  # stored for the next process
    assert any((tmp_path / "hf" / "datasets").iterdir())  # Hugging Face's cache: ours too
    two_rounds([f"dataset={name}", f"dataset.hf_id={tmp_path / name}", "num_clients=2"])


def test_femnist_clients_are_writers(tmp_path):
    """FEMNIST from a mirror of ``flwrlabs/femnist``: ``character`` labels, one natural
    group per writer (numbered in sorted id order), the test split made per writer."""
    expected = hub_mirror(tmp_path / "femnist", "femnist")["train"]
    spec = {
        "name": "femnist",
        "root": None,
        "hf_id": str(tmp_path / "femnist"),
        "test_fraction": 0.1,
        "split_seed": 0,
    }
    raw = DATASETS["femnist"].load_raw(spec)
    writer_number = np.searchsorted(np.asarray(sorted(WRITERS)), expected["writer"])
    test = leaf_test_split(writer_number, 0.1, 0)
    np.testing.assert_array_equal(raw["x_train"], expected["x"][~test])
    np.testing.assert_array_equal(raw["y_test"], expected["y"][test])
    np.testing.assert_array_equal(raw["groups_train"], writer_number[~test])
    for w in range(len(WRITERS)):
        n = int((writer_number == w).sum())
        assert int((raw["groups_train"] == w).sum()) == max(1, math.floor(0.9 * n + 1e-9))
    assert raw["x_train"].shape[1:] == DATASETS["femnist"].input_shape
    record = two_rounds(
        [
            "dataset=femnist",
            f"dataset.hf_id={tmp_path / 'femnist'}",
            "partition=natural",
            "num_clients=2",
        ]
    )
    assert record["clients"]["succeeded"] == 2


def test_femnist_natural_partition_gives_one_client_per_writer(tmp_path):
    """With as many clients as writers, client k holds exactly writer k's training
    samples (writers numbered in sorted id order)."""
    hub_mirror(tmp_path / "femnist", "femnist")
    fed = InProcessFederation(
        [
            "method=fedavg",
            "dataset=femnist",
            f"dataset.hf_id={tmp_path / 'femnist'}",
            "partition=natural",
            f"num_clients={len(WRITERS)}",
            "num_rounds=1",
            "dropout=none",
        ]
    )
    groups = fed.run.data.dataset.groups_train
    for client, indices in enumerate(fed.run.data.partition.indices):
        assert len(indices) > 0 and set(groups[indices].tolist()) == {client}
    assert sum(len(ix) for ix in fed.run.data.partition.indices) == len(groups)
    assert fed.round(1)["clients"]["succeeded"] == len(WRITERS)


def test_leaf_test_split_per_writer():
    """Per writer n samples: max(1, floor(0.9 n)) kept for training, the rest tested;
    the choice is seeded."""
    writers = np.repeat([0, 1, 2, 3], [1, 2, 10, 25])
    test = leaf_test_split(writers, 0.1, 7)
    assert [int(test[writers == w].sum()) for w in range(4)] == [0, 1, 1, 3]
    np.testing.assert_array_equal(test, leaf_test_split(writers, 0.1, 7))
    assert not np.array_equal(test, leaf_test_split(writers, 0.1, 8))


def test_emnist_reads_torchvisions_files_offline(tmp_path):
    """EMNIST balanced from torchvision's files under ``dataset.root``: no server asked,
    the glyphs turned upright."""
    expected = emnist_files(tmp_path / "emnist")
    raw = DATASETS["emnist"].load_raw({"name": "emnist", "root": str(tmp_path / "emnist")})
    for split in ("train", "test"):
        np.testing.assert_array_equal(raw[f"x_{split}"], expected[split]["x"])
        np.testing.assert_array_equal(raw[f"y_{split}"], expected[split]["y"])
    two_rounds(["dataset=emnist", f"dataset.root={tmp_path / 'emnist'}", "num_clients=2"])


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # wfdb on pandas 3
def test_mitbih_reads_wfdb_records_offline(tmp_path):
    """MIT-BIH from wfdb records under ``dataset.root``: every record's beats of known
    classes (not its rhythm notes), 80/20 per record, one natural group per record."""
    root = tmp_path / "mitdb"
    mitbih_records(root, tuple(RECORDS))
    raw = DATASETS["mitbih"].load_raw({"name": "mitbih", "root": str(root)})
    beats = [BEAT_CLASSES.index(c) for _, c in BEATS if c in BEAT_CLASSES]
    per_record = len(beats)  # 4: 3 training beats and round(0.8) = 1 test beat each
    assert len(raw["y_train"]) == 3 * len(RECORDS) and len(raw["y_test"]) == len(RECORDS)
    assert raw["x_train"].shape[1:] == DATASETS["mitbih"].input_shape
    np.testing.assert_array_equal(np.bincount(raw["groups_train"]), [3] * len(RECORDS))
    labels = np.concatenate([raw["y_train"], raw["y_test"]])
    assert np.bincount(labels, minlength=12)[beats].tolist() == [len(RECORDS)] * per_record
    record = two_rounds(
        ["dataset=mitbih", f"dataset.root={root}", "partition=natural", "num_clients=4"]
    )
    assert record["clients"]["succeeded"] == 4  # 48 records merged into 4 blocks of 12


@pytest.mark.parametrize("name", ONLINE)
def test_no_local_copy_offline_is_one_fast_line(name, tmp_path):
    spec = {"name": name, "root": None, "test_fraction": 0.1, "split_seed": 0}
    started = time.monotonic()
    with pytest.raises(DataUnavailableError) as error:
        DATASETS[name].load_raw(spec)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert "\n" not in message and f"'{name}'" in message and "dataset.root" in message
    own_copy = {"emnist": "EMNIST/raw", "mitbih": "100.hea"}.get(name, "dataset.hf_id=<folder>")
    assert own_copy in message  # the copy in the source's own format that it reads


def test_natural_merges_contiguous_blocks_of_groups():
    """7 groups over 3 clients: groups {0, 1, 2}, {3, 4}, {5, 6}; as many clients as
    groups: one each; more clients than groups: an error naming the most."""
    groups = np.array([6, 0, 3, 1, 5, 2, 4, 0, 6, 3])
    rng = np.random.default_rng(0)
    parts, _ = natural(np.zeros(10), 2, 3, rng, 0, groups=groups)
    assert [p.tolist() for p in parts] == [[1, 3, 5, 7], [2, 6, 9], [0, 4, 8]]
    parts, _ = natural(np.zeros(10), 2, 7, rng, 0, groups=groups)
    assert [p.tolist() for p in parts] == [[1, 7], [3], [5], [2, 9], [6], [4], [0, 8]]
    with pytest.raises(ConfigError, match="set num_clients=7"):
        natural(np.zeros(10), 2, 8, rng, 0, groups=groups)
