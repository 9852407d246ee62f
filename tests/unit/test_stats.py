"""Label statistics: KL divergence to uniform and the partition summary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedimb.core.data.stats import kl_to_uniform, partition_summary


def test_kl_uniform_is_zero():
    assert kl_to_uniform(np.array([5, 5, 5, 5])) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("c", [2, 3, 10, 47])
def test_kl_one_hot_is_log_c(c):
    counts = np.zeros(c)
    counts[c // 2] = 7
    assert kl_to_uniform(counts) == pytest.approx(math.log(c))


def test_kl_hand_value():
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert kl_to_uniform(np.array([3, 1])) == pytest.approx(expected)


def test_kl_single_row_returns_float():
    assert isinstance(kl_to_uniform([1, 2, 3]), float)


def test_kl_rows_and_zero_rows():
    counts = np.array([[3, 1], [0, 0], [2, 2], [0, 4]])
    kl = kl_to_uniform(counts)
    assert kl.shape == (4,)
    assert kl[0] == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5))
    assert np.isnan(kl[1])
    assert kl[2] == pytest.approx(0.0, abs=1e-12)
    assert kl[3] == pytest.approx(math.log(2))


def test_kl_empty_single_histogram_is_nan():
    assert math.isnan(kl_to_uniform(np.zeros(3)))


def test_partition_summary_2x3():
    counts = np.array([[2, 2, 2], [0, 3, 0]])
    s = partition_summary(counts)
    assert set(s) == {
        "num_clients",
        "num_classes",
        "global_counts",
        "client_sizes",
        "client_counts",
        "client_kl_to_uniform",
        "mean_client_kl_to_uniform",
        "global_kl_to_uniform",
    }
    assert s["num_clients"] == 2
    assert s["num_classes"] == 3
    assert s["global_counts"] == [2, 5, 2]
    assert s["client_sizes"] == [6, 3]
    assert s["client_counts"] == [[2, 2, 2], [0, 3, 0]]
    assert s["client_kl_to_uniform"][0] == pytest.approx(0.0, abs=1e-6)
    assert s["client_kl_to_uniform"][1] == pytest.approx(round(math.log(3), 6))
    assert s["mean_client_kl_to_uniform"] == pytest.approx(math.log(3) / 2)
    p = np.array([2, 5, 2]) / 9
    assert s["global_kl_to_uniform"] == pytest.approx(float(np.sum(p * np.log(3 * p))))
    assert "client_groups" not in s


def test_partition_summary_groups_and_empty_client():
    counts = np.array([[1, 0, 0], [0, 0, 0]])
    s = partition_summary(counts, groups=np.array([0, 1]))
    assert s["client_groups"] == [0, 1]
    assert all(type(g) is int for g in s["client_groups"])
    assert s["client_kl_to_uniform"][1] is None
    assert s["mean_client_kl_to_uniform"] == pytest.approx(math.log(3))


def test_partition_summary_all_empty():
    s = partition_summary(np.zeros((2, 3), dtype=int))
    assert s["client_kl_to_uniform"] == [None, None]
    assert s["mean_client_kl_to_uniform"] is None


def test_summary_of_empty_partition_is_strict_json():
    import json

    text = json.dumps(partition_summary(np.zeros((2, 3), dtype=int)), allow_nan=False)
    assert '"global_kl_to_uniform": null' in text
