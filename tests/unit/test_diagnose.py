"""``fedimb diagnose``: the numbers of a federation's imbalance and the advice they give."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fedimb.cli.commands.diagnose import advice, diagnose_counts


def test_balanced_federation_gets_fedavg():
    d = diagnose_counts(np.full((6, 4), 25))
    assert d.class_ratio == 1.0 and np.allclose(d.zscores, 0) and np.allclose(d.client_kl, 0)
    assert d.clusters is None
    assert [line for line in advice(d)] == [
        "no marked imbalance (class ratio 1.0x, mean client KLD 0.00, size CV 0.00): "
        "method=fedavg is a fair baseline"
    ]


def test_global_long_tail_gives_zscores_and_astraea():
    counts = np.tile([100, 50, 20, 10], (4, 1))  # every client has the global shape
    d = diagnose_counts(counts)
    sizes = np.array([400, 200, 80, 40])
    assert d.zscores == pytest.approx((sizes - sizes.mean()) / sizes.std())
    assert d.class_ratio == pytest.approx(10.0)
    text = " ".join(advice(d))
    assert "largest/smallest class 10.0x" in text and "method=astraea" in text
    assert "augment classes [2, 3]" in text  # z < -1/3.5


def test_three_groups_of_identical_clients_are_three_clusters_and_label_skew():
    groups = [[90, 10, 0, 0], [0, 0, 90, 10], [0, 50, 0, 50]]
    counts = np.array([groups[i % 3] for i in range(9)])
    d = diagnose_counts(counts, max_k=5)
    assert d.clusters == 3 and d.cluster_sizes == [3, 3, 3]
    text = " ".join(advice(d))
    assert "method=fedconcat method.strategy.num_clusters=3" in text
    assert "local label skew" in text and "method=rebafl" in text
    assert float(np.mean(d.mediator_kl)) < float(np.mean(d.client_kl))  # mediators mix the groups


def test_unequal_client_sizes_are_quantity_skew():
    counts = np.array([[5, 5], [50, 50], [500, 500], [10, 10]])
    d = diagnose_counts(counts)
    assert d.size_cv > 1
    assert any("quantity skew" in line and "method=grpfed" in line for line in advice(d))


def test_cli_diagnoses_a_configured_partition():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedimb",
            "diagnose",
            "dataset=digits",
            "partition=dirichlet",
            "partition.alpha=0.1",
            "num_clients=10",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "Per-client KLD to uniform (10 clients" in result.stdout
    assert "local label skew" in result.stdout
