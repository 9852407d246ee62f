"""``partition=flwr``: every flwr-datasets partitioner that splits a labelled data set's
rows, by its class name and its own arguments, trains two rounds in process; fedimb's own
``iid`` and ``dirichlet`` are those partitioners; bad settings are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.data.flwr_partitioners import REFUSED
from fedimb.core.data.partition import make_partition
from fedimb.core.errors import ConfigError

MODULE = "flwr_datasets.partitioner"
DIGITS = ["dataset=digits", "num_clients=5"]
SYNTHETIC = ["dataset=synthetic", "model=mclr", "num_clients=3"]
#: every partitioner of the module that fedimb does not refuse, with the arguments it needs
ARGUMENTS = {
    "IidPartitioner": ({}, DIGITS),
    "LinearPartitioner": ({}, DIGITS),
    "SquarePartitioner": ({}, DIGITS),
    "ExponentialPartitioner": ({}, DIGITS),
    "SizePartitioner": ({"partition_sizes": [100, 200, 300, 400, 400]}, DIGITS),
    "DirichletPartitioner": ({"alpha": 0.5, "min_partition_size": 5}, DIGITS),
    "InnerDirichletPartitioner": (
        {"partition_sizes": [280] * 5, "alpha": 0.5},
        DIGITS,
    ),
    "PathologicalPartitioner": ({"num_classes_per_partition": 2}, DIGITS),
    "ShardPartitioner": ({"num_shards_per_partition": 2}, DIGITS),
    "ContinuousPartitioner": ({"strictness": 0.5}, DIGITS),
    "DistributionPartitioner": (
        {
            "distribution_array": [[1.0, 1.0]] * 10,
            "num_unique_labels_per_partition": 2,
            "preassigned_num_samples_per_label": 5,
        },
        ["dataset=digits", "num_clients=10"],
    ),
    "NaturalIdPartitioner": ({}, SYNTHETIC),
    "GroupedNaturalIdPartitioner": ({"group_size": 2}, [*SYNTHETIC, "dataset.num_devices=6"]),
}


def flwr_override(name: str, arguments: dict) -> str:
    inner = ",".join(f"{k}:{v}".replace(" ", "") for k, v in arguments.items())
    return f"partition.partitioner={{_target_:{MODULE}.{name}{',' if inner else ''}{inner}}}"


def test_every_usable_partitioner_of_flwr_datasets_is_covered():
    import flwr_datasets.partitioner as module

    assert set(ARGUMENTS) | set(REFUSED) == set(module.__all__)


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_a_flwr_datasets_partitioner_by_name_trains_two_rounds(name):
    arguments, data = ARGUMENTS[name]
    fed = InProcessFederation(
        [*data, "partition=flwr", flwr_override(name, arguments), "num_rounds=2", "dropout=none"]
    )
    clients = int(fed.cfg.num_clients)
    covered = np.concatenate(fed.run.data.partition.indices)
    assert len(covered) == len(set(covered.tolist()))  # no sample given twice
    for server_round in (1, 2):
        record = fed.round(server_round)
        assert record["clients"]["succeeded"] == clients
        assert record["clients"]["rejected"] == record["clients"]["errors"] == 0
    assert 0 <= record["test"]["accuracy"] <= 1


LABELS = np.repeat(np.arange(10), [30, 25, 40, 35, 20, 50, 45, 30, 25, 40])


def test_iid_is_flwr_datasets_iid_partitioner_sample_for_sample():
    ours = make_partition(LABELS, 10, 7, {"name": "iid"}, seed=3)
    flower = make_partition(
        LABELS, 10, 7, {"name": "flwr", "partitioner": {"_target_": f"{MODULE}.IidPartitioner"}}, 3
    )
    assert all(np.array_equal(a, b) for a, b in zip(ours.indices, flower.indices))


def test_dirichlet_is_flwr_datasets_dirichlet_partitioner_label_for_label():
    """The same proportions from the same seed: the same label histogram per client (the
    sample identities differ, since partition=flwr shuffles the rows first as Flower's
    FederatedDataset does)."""
    ours = make_partition(LABELS, 10, 4, {"name": "dirichlet", "alpha": 0.3}, seed=5)
    flower = make_partition(
        LABELS,
        10,
        4,
        {
            "name": "flwr",
            "partitioner": {
                "_target_": f"{MODULE}.DirichletPartitioner",
                "alpha": 0.3,
                "min_partition_size": 2,
            },
        },
        5,
    )
    assert np.array_equal(ours.counts, flower.counts)


@pytest.mark.parametrize(
    "partitioner, message",
    [
        (None, "partition=flwr needs partition.partitioner={_target_:"),
        ({"_target_": f"{MODULE}.Nope"}, "_target_ must be flwr_datasets.partitioner.<Name>"),
        ({"_target_": f"{MODULE}.VerticalEvenPartitioner"}, "splits columns (vertical FL)"),
        ({"_target_": f"{MODULE}.IdToSizeFncPartitioner"}, "takes a Python function"),
        ({"_target_": f"{MODULE}.ShardPartitioner", "shards": 2}, "has no argument 'shards'"),
        ({"_target_": f"{MODULE}.IidPartitioner", "num_partitions": 4}, "but num_clients is 7"),
        ({"_target_": f"{MODULE}.NaturalIdPartitioner"}, "needs a data set with natural clients"),
        (
            {"_target_": f"{MODULE}.DirichletPartitioner", "alpha": 1e-4, "min_partition_size": 90},
            "DirichletPartitioner refused its arguments:",
        ),
    ],
)
def test_bad_flwr_partitioner_settings_are_one_line_errors(partitioner, message):
    spec = {"name": "flwr", **({"partitioner": partitioner} if partitioner else {})}
    with pytest.raises(ConfigError, match=None) as error:
        make_partition(LABELS, 10, 7, spec, seed=0)
    assert message in str(error.value) and "\n" not in str(error.value)
