"""ReBaFL: prototype aggregation (eq. 23), feature transfer (eq. 15), client and server."""

from __future__ import annotations

import numpy as np
import torch
from flwr.common import FitRes, parameters_to_ndarrays

from fedimb.app.runtimes.in_process import OK, InProcessFederation
from fedimb.core.aggregate import aggregate_prototypes
from fedimb.core.prototypes import (
    class_prototypes,
    cyclic_targets,
    from_payload,
    to_payload,
    transfer_features,
)


def test_aggregate_prototypes_hand_values_and_missing_classes():
    p1 = {0: np.array([1.0, 0.0]), 1: np.array([0.0, 2.0])}
    p2 = {0: np.array([3.0, 0.0]), 2: np.array([5.0, 5.0])}
    out = aggregate_prototypes([p1, p2], [{0: 1, 1: 4}, {0: 3, 2: 2}])
    assert sorted(out) == [0, 1, 2]
    np.testing.assert_allclose(out[0], [(1 * 1 + 3 * 3) / 4, 0.0])  # weighted by n_ic
    np.testing.assert_allclose(out[1], [0.0, 2.0])  # only client 1 reports class 1
    np.testing.assert_allclose(out[2], [5.0, 5.0])
    assert 3 not in out  # nobody reported class 3


def test_aggregate_prototypes_ignores_zero_counts_and_empty_rounds():
    out = aggregate_prototypes([{0: np.ones(2)}, {0: np.zeros(2)}], [{0: 0}, {0: 2}])
    np.testing.assert_allclose(out[0], [0.0, 0.0])
    assert aggregate_prototypes([], []) == {}


def test_transfer_features_eq15():
    prototypes = torch.tensor([[0.0, 0.0], [10.0, 10.0], [-5.0, 5.0]])
    h = torch.tensor([[1.0, 2.0], [11.0, 9.0]])
    labels = torch.tensor([0, 1])
    targets = torch.tensor([2, 0])
    out = transfer_features(h, labels, prototypes, targets, lam=0.5)
    assert out.tolist() == [[-4.5, 6.0], [0.5, -0.5]]


def test_cyclic_targets_enumerate_available_classes():
    assert cyclic_targets(7, torch.tensor([1, 4, 6])).tolist() == [1, 4, 6, 1, 4, 6, 1]


def test_class_prototypes_are_class_means():
    x = torch.tensor([[1.0], [3.0], [10.0], [20.0], [30.0]])
    y = torch.tensor([0, 0, 1, 1, 2])
    protos, counts = class_prototypes(
        torch.nn.Identity(), x, y, torch.tensor([0, 1, 2, 3]), batch_size=3
    )
    assert counts == {0: 2, 1: 2}
    np.testing.assert_allclose(protos[0], [2.0])
    np.testing.assert_allclose(protos[1], [15.0])


def test_payload_round_trip():
    protos = {3: np.arange(4, dtype=np.float32), 1: np.ones(4, dtype=np.float32)}
    back, counts = from_payload("p", to_payload("p", protos, {3: 7, 1: 2}))
    assert counts == {1: 2, 3: 7} and sorted(back) == [1, 3]
    np.testing.assert_array_equal(back[3], protos[3])
    assert from_payload("p", {}) == ({}, {})


def rebafl(*overrides):
    return InProcessFederation(
        ["method=rebafl", "num_clients=4", "train.local_epochs=1", *overrides]
    )


def test_server_keeps_prototypes_of_classes_nobody_reported():
    fed = rebafl("dropout=none")
    fed.round(1)
    first = {c: v.copy() for c, v in fed.strategy.prototypes.items()}
    held_by_anyone = np.flatnonzero(fed.run.data.partition.counts.sum(axis=0)).tolist()
    assert sorted(first) == held_by_anyone and len(first) == 8  # 4 clients x 2 distinct classes
    # round 2: only client 0 survives; classes it does not hold keep their round-1 prototype
    fed.strategy.run.availability.p[:] = 0.0
    fed.strategy.run.availability.p[0] = 1.0
    record = fed.round(2)
    assert record["clients"]["succeeded"] == 1 and record["clients"]["dropped"] == 3
    held = set(np.flatnonzero(fed.run.data.partition.counts[0]).tolist())
    for c, vector in fed.strategy.prototypes.items():
        if c in held:
            assert not np.allclose(vector, first[c])
        else:
            np.testing.assert_array_equal(vector, first[c])


def test_client_reports_prototypes_and_counts_of_its_classes():
    fed = rebafl("dropout=none")
    config = fed.strategy.fit_config(1)
    client = fed.client(fed.nodes[2])
    _, n, metrics = client.fit(parameters_to_ndarrays(fed.parameters), config)
    protos, counts = from_payload("prototypes", metrics)
    expected = {c: int(k) for c, k in enumerate(fed.run.data.partition.counts[2]) if k}
    assert counts == expected and sum(counts.values()) == n
    assert all(v.shape == (client.model.feature_dim,) for v in protos.values())


def test_augmentation_trains_only_the_classifier():
    fed = rebafl("dropout=none", "method.client.mu=1.0")
    fed.round(1)  # global prototypes exist now
    client = fed.client(fed.nodes[0])
    client.set_parameters(parameters_to_ndarrays(fed.parameters))
    client.config = fed.strategy.fit_config(2)
    client.before_training(client.config)
    idx = client.data.indices[:20]
    x, y = client.data.x[idx], client.data.y[idx]
    model = client.model
    model.zero_grad()
    client.loss(x, y).backward()
    full = [p.grad.clone() for p in model.encoder.parameters()]
    model.zero_grad()
    client.mu = 0.0
    client.loss(x, y).backward()
    without_aug = [p.grad.clone() for p in model.encoder.parameters()]
    for a, b in zip(full, without_aug):
        torch.testing.assert_close(a, b)  # ℓ_aug adds nothing to the encoder's gradient
    assert len(client.prototype_classes) == 8


def test_rejects_prototypes_of_wrong_dimension():
    fed = rebafl("dropout=none")
    fed.strategy.begin_round(1)
    fed.strategy.configure_fit(
        server_round=1, parameters=fed.parameters, client_manager=fed.manager
    )
    bad = to_payload("prototypes", {0: np.ones(3, dtype=np.float32)}, {0: 5})
    res = FitRes(status=OK, parameters=fed.parameters, num_examples=5, metrics=bad)
    new, _ = fed.strategy.aggregate_fit(1, [(fed.nodes[0], res)], [])
    assert new is None and fed.strategy.round_log.rejected == 1
