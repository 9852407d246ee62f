"""Partitioners: structural invariants, seeding, and each scheme's defining statistics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedimb.core.data.longtail import EMNIST_BALANCED_CHARS, longtail_profile
from fedimb.core.data.partition import PARTITIONERS, make_partition
from fedimb.core.data.partitioners import client_groups
from fedimb.core.data.stats import kl_to_uniform, label_counts
from fedimb.core.errors import ConfigError

NUM_CLASSES = 10
PER_CLASS = 500
LABELS = np.repeat(np.arange(NUM_CLASSES), PER_CLASS)  # balanced 10 x 500

# (spec, number of clients) for every partitioner
SPECS = {
    "iid": ({"name": "iid"}, 5),
    "dirichlet": ({"name": "dirichlet", "alpha": 0.5, "min_partition_size": 10}, 8),
    "pathological": (
        {"name": "pathological", "classes_per_client": 2, "samples_per_client": None},
        10,
    ),
    "clustered": (
        {"name": "clustered", "classes_per_group": [2, 2, 3, 3, 5], "samples_per_client": None},
        20,
    ),
    "longtail": ({"name": "longtail", "profile": "exponential", "imbalance_ratio": 10}, 5),
    "quantity": ({"name": "quantity", "rho": 0.7, "tau": 0.5}, 10),
    "flwr": (
        {
            "name": "flwr",
            "partitioner": {
                "_target_": "flwr_datasets.partitioner.ShardPartitioner",
                "num_shards_per_partition": 2,
            },
        },
        6,
    ),
}


def _part(spec, num_clients, seed=0, labels=LABELS, num_classes=NUM_CLASSES):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flwr-datasets' resampling warnings
        return make_partition(labels, num_classes, num_clients, spec, seed)


def test_specs_cover_every_partitioner():
    # ``natural`` needs a data set with natural clients: tests/unit/test_ecg.py; ``file``
    # takes the clients' indices from the user: tests/integration/test_partition_file.py
    assert set(SPECS) | {"natural", "file"} == set(PARTITIONERS)


# ------------------------------------------------------------------ invariants
@pytest.mark.parametrize("name", sorted(SPECS))
def test_partition_structure(name):
    spec, num_clients = SPECS[name]
    part = _part(spec, num_clients, seed=0)
    assert part.num_clients == num_clients
    assert part.counts.shape == (num_clients, NUM_CLASSES)
    all_ix = np.concatenate(part.indices)
    # disjoint across clients
    assert len(np.unique(all_ix)) == len(all_ix)
    # in range
    assert all_ix.min() >= 0 and all_ix.max() < len(LABELS)
    # counts is the label histogram of each client's indices
    for ix, row in zip(part.indices, part.counts):
        assert ix.dtype == np.int64
        np.testing.assert_array_equal(row, np.bincount(LABELS[ix], minlength=NUM_CLASSES))
    assert part.counts.sum() == len(all_ix)
    if name == "clustered":
        assert part.groups is not None
    else:
        assert part.groups is None


@pytest.mark.parametrize("name", sorted(SPECS))
def test_partition_seeding(name):
    spec, num_clients = SPECS[name]
    a = _part(spec, num_clients, seed=0)
    b = _part(spec, num_clients, seed=0)
    c = _part(spec, num_clients, seed=1)
    assert len(a.indices) == len(b.indices)
    for x, y in zip(a.indices, b.indices):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert any(
        len(x) != len(y) or not np.array_equal(x, y) for x, y in zip(a.indices, c.indices)
    ), "a different seed should give a different partition"


def test_unknown_partition_lists_choices():
    with pytest.raises(ConfigError) as info:
        make_partition(LABELS, NUM_CLASSES, 5, {"name": "nosuch"}, 0)
    msg = str(info.value)
    assert "nosuch" in msg
    for choice in PARTITIONERS:
        assert choice in msg
    assert "\n" not in msg


def test_unknown_partition_parameter_is_config_error():
    with pytest.raises(ConfigError, match="iid"):
        make_partition(LABELS, NUM_CLASSES, 5, {"name": "iid", "foo": 1}, 0)


# ------------------------------------------------------------------------- iid
def test_iid_sizes_and_label_balance():
    part = _part({"name": "iid"}, 5)
    sizes = part.counts.sum(axis=1)
    assert sizes.sum() == len(LABELS)
    assert sizes.max() - sizes.min() <= 1
    kl = kl_to_uniform(part.counts)
    assert np.all(kl < 0.05), kl


def test_iid_uneven_sizes_differ_by_at_most_one():
    part = _part({"name": "iid"}, 7)
    sizes = part.counts.sum(axis=1)
    assert sizes.sum() == len(LABELS)
    assert sizes.max() - sizes.min() <= 1


# ------------------------------------------------------------------- dirichlet
def test_dirichlet_smaller_alpha_is_more_skewed():
    low = _part({"name": "dirichlet", "alpha": 0.1, "min_partition_size": 2}, 10, seed=0)
    high = _part({"name": "dirichlet", "alpha": 10.0, "min_partition_size": 2}, 10, seed=0)
    kl_low = float(np.mean(kl_to_uniform(low.counts)))
    kl_high = float(np.mean(kl_to_uniform(high.counts)))
    assert kl_low > kl_high
    assert kl_low > 0.5  # strongly skewed
    assert kl_high < 0.15  # nearly balanced


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dirichlet_min_partition_size(seed):
    part = _part({"name": "dirichlet", "alpha": 0.3, "min_partition_size": 100}, 10, seed=seed)
    assert part.counts.sum(axis=1).min() >= 100
    assert part.counts.sum() == len(LABELS)  # every sample is used


def test_dirichlet_impossible_min_size_raises_config_error():
    with pytest.raises(ConfigError):
        _part({"name": "dirichlet", "alpha": 0.01, "min_partition_size": 499}, 10)


# ---------------------------------------------------------------- pathological
@pytest.mark.parametrize("num_clients,k", [(10, 2), (20, 2), (10, 3), (5, 4), (30, 1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pathological_classes_per_client_and_balance(num_clients, k, seed):
    spec = {"name": "pathological", "classes_per_client": k, "samples_per_client": None}
    part = _part(spec, num_clients, seed=seed)
    held = part.counts > 0
    np.testing.assert_array_equal(held.sum(axis=1), np.full(num_clients, k))
    holders = held.sum(axis=0)
    assert (num_clients * k) % NUM_CLASSES == 0
    assert holders.max() - holders.min() <= 1
    # every class is held by someone here, so all samples of held classes are used
    assert holders.min() >= 1
    np.testing.assert_array_equal(part.counts.sum(axis=0), np.full(NUM_CLASSES, PER_CLASS))
    # each class is split evenly over its holders
    for c in range(NUM_CLASSES):
        shares = part.counts[held[:, c], c]
        assert shares.max() - shares.min() <= 1


def test_pathological_all_samples_of_held_classes_used_when_some_classes_unheld():
    # 2 clients x 2 classes: only 4 of the 10 classes are held.
    part = _part({"name": "pathological", "classes_per_client": 2}, 2, seed=3)
    held_classes = np.flatnonzero(part.counts.sum(axis=0) > 0)
    assert len(held_classes) == 4
    for c in held_classes:
        assert part.counts[:, c].sum() == PER_CLASS
    assert part.counts.sum() == 4 * PER_CLASS


def test_pathological_fixed_samples_per_client():
    spec = {"name": "pathological", "classes_per_client": 2, "samples_per_client": 60}
    part = _part(spec, 20, seed=0)
    np.testing.assert_array_equal(part.counts.sum(axis=1), np.full(20, 60))
    for row in part.counts:
        nz = row[row > 0]
        np.testing.assert_array_equal(nz, [30, 30])


def test_pathological_fixed_samples_uneven_share():
    # 61 samples over 2 classes -> 31 + 30
    spec = {"name": "pathological", "classes_per_client": 2, "samples_per_client": 61}
    part = _part(spec, 10, seed=0)
    for row in part.counts:
        assert sorted(row[row > 0].tolist()) == [30, 31]


def test_pathological_too_many_samples_raises_one_line_error():
    # 20 clients x 2 classes -> each class has 4 holders x 150 = 600 > 500 samples
    spec = {"name": "pathological", "classes_per_client": 2, "samples_per_client": 300}
    with pytest.raises(ConfigError) as info:
        _part(spec, 20, seed=0)
    msg = str(info.value)
    assert "\n" not in msg
    assert "samples_per_client" in msg
    assert "500" in msg and "600" in msg


@pytest.mark.parametrize("k", [0, 11])
def test_pathological_bad_classes_per_client(k):
    with pytest.raises(ConfigError, match="classes_per_client"):
        _part({"name": "pathological", "classes_per_client": k}, 10)


# ------------------------------------------------------------------- clustered
def test_client_groups_contiguous_blocks():
    np.testing.assert_array_equal(client_groups(20, 5), np.repeat(np.arange(5), 4))
    np.testing.assert_array_equal(client_groups(4, 2), [0, 0, 1, 1])


def test_clustered_groups_and_classes():
    per_group = [2, 2, 3, 3, 5]
    spec = {"name": "clustered", "classes_per_group": per_group, "samples_per_client": None}
    part = _part(spec, 20, seed=0)
    np.testing.assert_array_equal(part.groups, client_groups(20, 5))
    np.testing.assert_array_equal(part.groups, np.repeat(np.arange(5), 4))
    held = (part.counts > 0).sum(axis=1)
    expected = np.array([per_group[g] for g in part.groups])
    np.testing.assert_array_equal(held, expected)


def test_clustered_fixed_samples_per_client():
    spec = {"name": "clustered", "classes_per_group": [2, 5], "samples_per_client": 50}
    part = _part(spec, 10, seed=0)
    np.testing.assert_array_equal(part.counts.sum(axis=1), np.full(10, 50))
    for i, row in enumerate(part.counts):
        nz = row[row > 0]
        if part.groups[i] == 0:
            np.testing.assert_array_equal(nz, [25, 25])
        else:
            np.testing.assert_array_equal(nz, [10] * 5)


def test_clustered_more_groups_than_clients_raises():
    with pytest.raises(ConfigError):
        _part({"name": "clustered", "classes_per_group": [2, 2, 3, 3, 5]}, 3)


# -------------------------------------------------------------------- longtail
def test_longtail_exponential_global_counts():
    spec = {"name": "longtail", "profile": "exponential", "imbalance_ratio": 10}
    part = _part(spec, 5, seed=0)
    global_counts = part.counts.sum(axis=0)
    assert np.all(np.diff(global_counts) < 0), global_counts
    assert global_counts[0] == 500
    assert global_counts[-1] == 50
    expected = np.floor(500 * 10.0 ** (-np.arange(10) / 9))
    assert np.all(np.abs(global_counts - expected) <= 1), (global_counts, expected)


def test_longtail_dirichlet_client_split():
    spec = {
        "name": "longtail",
        "profile": "exponential",
        "imbalance_ratio": 10,
        "client_split": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 2,
    }
    part = _part(spec, 5, seed=0)
    global_counts = part.counts.sum(axis=0)
    assert global_counts[0] == 500 and global_counts[-1] == 50


def test_longtail_bad_client_split():
    with pytest.raises(ConfigError, match="client_split"):
        _part({"name": "longtail", "client_split": "nosuch"}, 5)


def test_longtail_profile_exponential_hand_values():
    np.testing.assert_allclose(longtail_profile(3, "exponential", 10), [1.0, 10**-0.5, 0.1])


def test_longtail_profile_halfnormal():
    w = longtail_profile(10, "halfnormal", 10)
    assert w[0] == pytest.approx(1.0)
    assert w[-1] / w[0] == pytest.approx(0.1)
    assert np.all(np.diff(w) < 0)
    # ratio 1 -> flat
    np.testing.assert_allclose(longtail_profile(4, "halfnormal", 1), np.ones(4))


def test_longtail_profile_letters_emnist_balanced():
    w = longtail_profile(47, "letters")
    assert len(w) == 47
    assert EMNIST_BALANCED_CHARS[14] == "E" and EMNIST_BALANCED_CHARS[39] == "e"
    assert w[14] == pytest.approx(1.0) and w[39] == pytest.approx(1.0)
    assert set(np.flatnonzero(np.isclose(w, w.max()))) == {14, 39}


def test_longtail_profile_letters_few_classes():
    w = longtail_profile(3, "letters")
    # e (12.702), t (9.056), a (8.167)
    np.testing.assert_allclose(w, [1.0, 9.056 / 12.702, 8.167 / 12.702])
    with pytest.raises(ConfigError):
        longtail_profile(30, "letters")


def test_longtail_profile_explicit():
    np.testing.assert_allclose(
        longtail_profile(3, "explicit", frequencies=[2, 4, 1]), [0.5, 1.0, 0.25]
    )
    with pytest.raises(ConfigError):
        longtail_profile(3, "explicit", frequencies=[1, 2])
    with pytest.raises(ConfigError):
        longtail_profile(3, "explicit")


def test_longtail_profile_errors():
    with pytest.raises(ConfigError, match="imbalance_ratio"):
        longtail_profile(3, "exponential", 0.5)
    with pytest.raises(ConfigError, match="exponential"):
        longtail_profile(3, "nosuch")


# -------------------------------------------------------------------- quantity
@pytest.mark.parametrize("rho,tau", [(0.7, 0.5), (0.3, 0.8)])
def test_quantity_size_and_label_skew(rho, tau):
    part = _part({"name": "quantity", "rho": rho, "tau": tau}, 10, seed=0)
    sizes = part.counts.sum(axis=1)
    # non-increasing in the client index up to flooring (one sample per class at most)
    assert np.all(np.diff(sizes) <= NUM_CLASSES), sizes
    assert sizes[0] > sizes[-1]
    assert sizes.min() / sizes.max() == pytest.approx(rho, abs=0.1)
    # within a client, sorted class counts decay by tau (up to flooring)
    for row in part.counts:
        s = np.sort(row)[::-1].astype(float)
        assert s[0] > 0
        for r in range(NUM_CLASSES - 1):
            assert abs(s[r + 1] - tau * s[r]) <= 1.0 + tau, (row, r)
        # the leading ratio is close to tau where counts are large
        assert s[1] / s[0] == pytest.approx(tau, abs=0.05)
    # no class pool is over-drawn
    assert np.all(part.counts.sum(axis=0) <= PER_CLASS)


def test_quantity_uses_most_of_the_binding_class():
    part = _part({"name": "quantity", "rho": 0.7, "tau": 0.5}, 10, seed=0)
    # the total is the largest that no class runs out of: some class is nearly exhausted
    assert part.counts.sum(axis=0).max() >= PER_CLASS - NUM_CLASSES


def test_quantity_rho_tau_one_is_balanced():
    part = _part({"name": "quantity", "rho": 1.0, "tau": 1.0}, 5, seed=0)
    np.testing.assert_array_equal(part.counts, np.full((5, NUM_CLASSES), 100))


@pytest.mark.parametrize("rho,tau", [(0.0, 0.5), (1.5, 0.5), (0.5, 0.0), (0.5, 1.1)])
def test_quantity_bad_parameters(rho, tau):
    with pytest.raises(ConfigError):
        _part({"name": "quantity", "rho": rho, "tau": tau}, 5)


def test_label_counts_truncates_and_pads():
    np.testing.assert_array_equal(label_counts(np.array([0, 2, 2]), 4), [1, 0, 2, 0])
