"""FedNH: the prototypes' spread, the cosine logits, the server's smoothed prototype
update (hand-computed), frozen prototypes on the client, and payload checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import FitRes, ndarrays_to_parameters, parameters_to_ndarrays

from fedimb.app.runtimes.in_process import OK, InProcessFederation
from fedimb.core import payload
from fedimb.core.errors import ConfigError
from fedimb.core.models import build_model
from fedimb.core.models.cosine import CosineHead, prototype_slot, spread_on_sphere
from fedimb.core.prototypes import smoothed_prototypes

MLP = {"name": "mlp"}


# ------------------------------------------------------------------ initialisation
def test_fewer_classes_than_dimensions_are_orthonormal():
    w = spread_on_sphere(3, 5, 0).double()
    # unit rows, every pairwise cosine 0: W W^T = I
    torch.testing.assert_close(w @ w.T, torch.eye(3, dtype=torch.float64), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("classes", "dim", "cosine"), [(3, 2, -1 / 2), (4, 3, -1 / 3), (5, 2, math.cos(0.4 * math.pi))]
)
def test_more_classes_than_dimensions_spread_as_far_as_possible(classes, dim, cosine):
    """3 directions in the plane: 120° apart (cos −1/2); 4 in space: a regular
    tetrahedron (cos −1/3); 5 in the plane: a regular pentagon (neighbours at 72°,
    cos 0.309): the best separation C unit vectors can have in these cases."""
    w = spread_on_sphere(classes, dim, 1).double()
    torch.testing.assert_close(w.norm(dim=1), torch.ones(classes, dtype=torch.float64))
    off = (w @ w.T)[~torch.eye(classes, dtype=torch.bool)]
    assert abs(off.max().item() - cosine) < 1e-3  # the largest cosine is the smallest possible


def test_prototypes_depend_only_on_the_training_seed():
    def head(seed):
        options = {"cosine_head": 2.0}
        return build_model(MLP, (1, 8, 8), 10, seed=seed, options=options).head

    a, b, c = head(3), head(3), head(4)
    assert isinstance(a, CosineHead) and a.scale.item() == 2.0
    torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)
    assert not torch.allclose(a.weight, c.weight)


def test_the_option_and_the_method_refuse_bad_values_in_one_line():
    with pytest.raises(ConfigError, match=r"cosine_head must be > 0, got 0"):
        build_model(MLP, (1, 8, 8), 10, options={"cosine_head": 0})
    with pytest.raises(ConfigError, match="needs the cosine head") as err:
        prototype_slot(build_model(MLP, (1, 8, 8), 10))
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ cosine logits
def test_cosine_logits_are_the_scaled_cosines():
    """p_0 = (1, 0), p_1 = (0, 2) (normalised to (0, 1)), s = 3.
    z = (3, 4): cosines 3/5 and 4/5, logits 1.8 and 2.4; z = (0, −2): 0 and −3."""
    head = CosineHead(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), scale=3.0)
    logits = head(torch.tensor([[3.0, 4.0], [0.0, -2.0]]))
    torch.testing.assert_close(logits, torch.tensor([[1.8, 2.4], [0.0, -3.0]]))


# ------------------------------------------------------------------ server update
def test_smoothed_update_on_a_two_client_toy():
    """ρ = 0.75; p_0 = (1, 0), p_1 = (0, 1), p_2 = (−0.6, −0.8) (nobody reports class 2).
    Client A: n = (3, 0, 0), class-0 mean (0, 0.8) → normalised (0, 1).
    Client B: n = (1, 2, 0), class-0 mean (0.3, 0.4) → (0.6, 0.8); class-1 mean (−0.5, 0) → (−1, 0).
    Class 0: (3·(0, 1) + 1·(0.6, 0.8)) / 4 = (0.15, 0.95), norm √0.925 = 0.961769,
      μ_0 = (0.155963, 0.987763); 0.75·(1, 0) + 0.25·μ_0 = (0.788991, 0.246941),
      norm 0.826732 → p_0 = (0.954349, 0.298695).
    Class 1: μ_1 = (−1, 0); 0.75·(0, 1) + 0.25·(−1, 0) = (−0.25, 0.75) → (−1, 3)/√10.
    Class 2 keeps (−0.6, −0.8) exactly."""
    previous = np.array([[1.0, 0.0], [0.0, 1.0], [-0.6, -0.8]], dtype=np.float32)
    means_a = np.array([[0.0, 0.8], [0.0, 0.0], [0.0, 0.0]], dtype=np.float32)
    means_b = np.array([[0.3, 0.4], [-0.5, 0.0], [0.0, 0.0]], dtype=np.float32)
    new = smoothed_prototypes(
        previous, [means_a, means_b], [np.array([3, 0, 0]), np.array([1, 2, 0])], rho=0.75
    )
    expected = np.array(
        [[0.9543486, 0.2986950], [-1 / math.sqrt(10), 3 / math.sqrt(10)], [-0.6, -0.8]]
    )
    np.testing.assert_allclose(new, expected, atol=1e-6)
    np.testing.assert_array_equal(new[2], previous[2])


def test_a_zero_report_leaves_the_prototype_alone():
    previous = np.array([[0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    zero = np.zeros((2, 2), dtype=np.float32)
    new = smoothed_prototypes(previous, [zero], [np.array([4, 0])], rho=0.9)
    np.testing.assert_array_equal(new, previous)


def test_at_rho_zero_an_unreported_class_keeps_its_prototype():
    # class 0: μ_0 = (0, 0.5)/0.5 = (0, 1), and at ρ = 0 p_0 ← μ_0; class 1, reported by
    # nobody, keeps (1, 0) (the authors' code would normalise 0·p_1 + 1·0 to 0)
    previous = np.array([[0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    means = np.array([[0.0, 0.5], [0.0, 0.0]], dtype=np.float32)
    new = smoothed_prototypes(previous, [means], [np.array([2, 0])], rho=0.0)
    np.testing.assert_array_equal(new, [[0.0, 1.0], [1.0, 0.0]])


# ------------------------------------------------------------------ federation
def fednh(*overrides):
    return InProcessFederation(
        ["method=fednh", "dataset=digits", "num_clients=3", "train.local_epochs=1", *overrides]
    )


def test_client_trains_the_encoder_with_the_prototypes_frozen():
    fed = fednh("dropout=none")
    sent = parameters_to_ndarrays(fed.parameters)
    slot = fed.strategy.slot
    client = fed.client(fed.nodes[1])
    returned, n, metrics = client.fit(sent, fed.strategy.fit_config(1))
    np.testing.assert_array_equal(returned[slot], sent[slot])  # the prototypes, bit for bit
    assert not np.array_equal(returned[0], sent[0])  # the encoder's first layer moved
    scale = slot + 1
    assert returned[scale] != sent[scale]  # s is learned (train_scale: true)
    # the report: per class, the mean of the normalised features of its samples
    arrays = payload.unpack(metrics)
    counts = fed.run.data.partition.counts[1]
    np.testing.assert_array_equal(arrays["class_counts"], counts)
    assert arrays["class_counts"].sum() == n
    idx = client.data.indices
    with torch.no_grad():
        client.model.eval()
        z = client.model.encoder(client.data.x[idx])
    z = z / z.norm(dim=1, keepdim=True)
    for c in range(10):
        rows = z[client.data.y[idx] == c]
        want = rows.mean(dim=0).numpy() if len(rows) else np.zeros(z.shape[1])
        np.testing.assert_allclose(arrays["feature_means"][c], want, atol=1e-5)
    frozen = client.fit(sent, {**fed.strategy.fit_config(1), "train_scale": False})[0]
    np.testing.assert_array_equal(frozen[scale], sent[scale])


def test_two_rounds_move_reported_prototypes_and_keep_them_unit():
    fed = fednh("dropout=none")
    slot = fed.strategy.slot
    before = parameters_to_ndarrays(fed.parameters)[slot]
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["rejected"] == 0 and record["clients"]["succeeded"] == 3
    after = parameters_to_ndarrays(fed.parameters)[slot]
    np.testing.assert_allclose(np.linalg.norm(after, axis=1), 1.0, atol=1e-5)
    held = fed.run.data.partition.counts.sum(axis=0) > 0
    assert np.all(np.any(after != before, axis=1) == held)
    assert 0 <= record["test"]["accuracy"] <= 1


def reply(fed, means, counts, parameters=None):
    metrics = payload.pack({"feature_means": means, "class_counts": counts})
    return FitRes(
        status=OK,
        parameters=parameters or fed.parameters,
        num_examples=int(counts.sum()),
        metrics=metrics,
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, 5.0])
def test_a_bad_report_never_reaches_the_prototypes(bad):
    """A reply whose class means hold NaN/Inf or break the bound 1 is rejected whole;
    the honest client's report alone moves the prototypes, and a prototype row a client
    altered in its parameters is replaced by the server's."""
    fed = fednh("dropout=none")
    slot = fed.strategy.slot
    fed.strategy.begin_round(1)
    fed.strategy.configure_fit(
        server_round=1, parameters=fed.parameters, client_manager=fed.manager
    )
    sent = parameters_to_ndarrays(fed.parameters)
    dim = sent[slot].shape[1]
    counts = np.zeros(10, dtype=np.int64)
    counts[0] = 4
    honest = np.zeros((10, dim), dtype=np.float32)
    honest[0, 0] = 0.5
    broken = honest.copy()
    broken[0, 1] = bad
    tampered = [a.copy() for a in sent]
    tampered[slot][:] = 7.0
    results = [
        (fed.nodes[0], reply(fed, honest, counts, ndarrays_to_parameters(tampered))),
        (fed.nodes[1], reply(fed, broken, counts)),
    ]
    new, _ = fed.strategy.aggregate_fit(1, results, [])
    assert fed.strategy.round_log.rejected == 1
    got = parameters_to_ndarrays(new)[slot]
    # class 0 moves towards e_0 by ρ = 0.9; the others keep theirs
    want = sent[slot].astype(np.float64).copy()
    e0 = np.eye(dim)[0]
    want[0] = 0.9 * want[0] + 0.1 * e0
    want[0] /= np.linalg.norm(want[0])
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.all(np.isfinite(got))


def test_personal_model_is_the_locally_trained_one():
    fed = fednh("dropout=none")
    sent = parameters_to_ndarrays(fed.parameters)
    client = fed.client(fed.nodes[0])
    config = fed.strategy.fit_config(1)
    trained, _, _ = client.fit(sent, config)
    assert not np.array_equal(trained[0], sent[0])
    personal = client.personal_model(sent, config)  # the received global model is sent
    first = next(iter(personal.state_dict().values())).numpy()
    np.testing.assert_array_equal(first, trained[0])
