"""SCAFFOLD, FedDyn, MOON, FedNova, FedAvgM against their papers' formulas and, with one
client and plain SGD, against the update a plain PyTorch loop computes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from clients.moon import contrastive_loss
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.aggregate import ServerMomentum, fednova_normaliser, fednova_update
from fedimb.core.models import get_weights, set_weights
from fedimb.core.training import TrainConfig, seeded_generator, train_cross_entropy

ONE_CLIENT = [
    "dataset=digits",
    "num_clients=1",
    "dropout=none",
    "partition=iid",
    "train.local_epochs=1",
    "train.momentum=0.0",
    "train.weight_decay=0.0",
    "train.batch_size=200",
]


def plain_loop(fed, weights, server_round, after_backward=None, model=None):
    """The client's local training done by a plain loop: same data, order and steps."""
    model = model or fed.run.new_model()
    set_weights(model, weights)
    cfg = fed.cfg
    idx = torch.from_numpy(fed.run.data.partition.indices[0])
    x, y = (
        torch.from_numpy(fed.run.data.dataset.x_train),
        torch.from_numpy(fed.run.data.dataset.y_train),
    )
    hp = TrainConfig.from_mapping(cfg.train)
    generator = seeded_generator(int(cfg.seed), server_round, 0)
    result = train_cross_entropy(model, x, y, idx, hp, generator, after_backward)
    return get_weights(model), result.steps


def assert_close(a_list, b_list, tol=1e-6):
    for a, b in zip(a_list, b_list):
        np.testing.assert_allclose(a, b, atol=tol, rtol=0)


@pytest.mark.parametrize("method", ["scaffold", "fednova", "fedavg"])
def test_one_client_reduces_to_plain_sgd(method):
    fed = InProcessFederation([f"method={method}", *ONE_CLIENT])
    x0 = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    y1, steps = plain_loop(fed, x0, 1)
    assert_close(parameters_to_ndarrays(fed.parameters), y1)
    x1 = parameters_to_ndarrays(fed.parameters)
    fed.round(2)  # SCAFFOLD: c = c_i after round 1, so the correction c - c_i vanishes
    y2, _ = plain_loop(fed, x1, 2)
    assert_close(parameters_to_ndarrays(fed.parameters), y2)


def test_scaffold_control_variates_follow_option_ii():
    fed = InProcessFederation(["method=scaffold", *ONE_CLIENT])
    x0 = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    y1, steps = plain_loop(fed, x0, 1)
    lr = float(fed.cfg.train.lr)
    index = fed.strategy.param_index
    expected = [
        (x0[i] - y1[i]) / (steps * lr) for i in index
    ]  # c_i+ = c_i - c + (x - y)/(K lr), c = c_i = 0
    stored = fed.client(fed.nodes[0]).load_state("scaffold_control")
    assert_close([stored[f"c{j}"] for j in range(len(index))], expected, tol=1e-4)
    assert_close(fed.strategy.control, expected, tol=1e-4)  # c += |S|/N mean(delta c), |S| = N = 1


def test_scaffold_gradient_mean_control_under_adam_is_the_mean_local_gradient():
    # Under Adam (x - y)/(K lr) is no gradient estimate; control=gradient_mean keeps the
    # mean uncorrected gradient.
    fed = InProcessFederation(
        [
            "method=scaffold",
            *ONE_CLIENT,
            "train.optimizer=adam",
            "train.lr=0.001",
            "method.client.control=gradient_mean",
        ]
    )
    x0 = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    model = fed.run.new_model()
    sums = [torch.zeros_like(p) for p in model.parameters()]

    def record():
        for total, p in zip(sums, model.parameters()):
            total.add_(p.grad)

    y1, steps = plain_loop(fed, x0, 1, after_backward=record, model=model)
    assert_close(
        parameters_to_ndarrays(fed.parameters), y1
    )  # c = c_i = 0: no correction in round 1
    expected = [(total / steps).numpy() for total in sums]
    stored = fed.client(fed.nodes[0]).load_state("scaffold_control")
    assert_close([stored[f"c{j}"] for j in range(len(expected))], expected)
    displacement = max(
        float(np.abs((x0[i] - y1[i]) / (steps * 0.001)).max()) for i in fed.strategy.param_index
    )
    assert (
        max(float(np.abs(e).max()) for e in expected) < displacement / 3
    )  # the option II formula would be far off


def test_scaffold_server_control_scales_with_participation():
    fed = InProcessFederation(
        [
            "method=scaffold",
            "dataset=digits",
            "num_clients=4",
            "dropout=none",
            "fraction_fit=0.5",
            "train.local_epochs=1",
        ]
    )
    fed.round(1)
    deltas = []
    for node in fed.nodes:
        stored = fed.client(node).load_state("scaffold_control")
        if stored is not None:  # the two clients that trained: delta = c_i+ - 0
            deltas.append(stored["c0"])
    assert len(deltas) == 2
    np.testing.assert_allclose(fed.strategy.control[0], 2 / 4 * np.mean(deltas, axis=0), atol=1e-6)


def test_feddyn_client_and_server_state():
    fed = InProcessFederation(
        [
            "method=feddyn",
            "dataset=digits",
            "num_clients=2",
            "dropout=none",
            "train.local_epochs=1",
            "method.client.alpha=0.1",
        ]
    )
    s = fed.strategy
    x0 = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    # client k's linear term: g_k = 0 - alpha (theta_k - theta_0); reconstruct theta_k from it
    thetas = []
    for node in fed.nodes:
        g = fed.client(node).load_state("feddyn_linear")["g0"]
        thetas.append(x0[0] - g / 0.1)
    h_expected = -0.1 * sum(t - x0[0] for t in thetas) / 2
    np.testing.assert_allclose(s.h[0], h_expected, atol=1e-5)
    np.testing.assert_allclose(
        parameters_to_ndarrays(fed.parameters)[0],
        np.mean(thetas, axis=0) - h_expected / 0.1,
        atol=1e-4,
    )
    fed.round(2)  # the state persists: round 2 starts from round 1's linear terms
    g2 = fed.client(fed.nodes[0]).load_state("feddyn_linear")["g0"]
    assert not np.allclose(g2, -0.1 * (thetas[0] - x0[0]))


def test_moon_contrastive_loss_hand_value():
    z = torch.tensor([[1.0, 0.0]])
    z_glob = torch.tensor([[1.0, 0.0]])  # cos 1
    z_prev = torch.tensor([[0.0, 1.0]])  # cos 0
    tau = 0.5
    expected = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0.0)))
    assert float(contrastive_loss(z, z_glob, z_prev, tau)) == pytest.approx(expected)


def test_moon_model_has_the_projection_head_and_keeps_the_previous_model():
    fed = InProcessFederation(
        ["method=moon", "dataset=digits", "num_clients=2", "dropout=none", "train.local_epochs=1"]
    )
    model = fed.run.new_model()
    assert model.feature_dim == 256 and model.head.in_features == 256
    fed.round(1)
    stored = fed.client(fed.nodes[0]).load_state("moon_previous")
    assert len(stored) == len(model.state_dict())


def test_fednova_normaliser_and_update():
    assert fednova_normaliser(10, 0.0) == 10
    rho, tau = 0.9, 3
    assert fednova_normaliser(tau, rho) == pytest.approx(
        sum((1 - rho ** (j + 1)) / (1 - rho) for j in range(tau))
    )
    g = [np.array([0.0])]
    # client 1: 2 steps moved to -2 (d = 1/step), client 2: 4 steps moved to -2
    # (d = 0.5/step); equal sizes
    out = fednova_update(g, [[np.array([-2.0])], [np.array([-2.0])]], [1, 1], [2, 4])
    # tau_eff = 3; x - 3 * (0.5*1 + 0.5*0.5) = -2.25
    np.testing.assert_allclose(out[0], [-2.25])


def test_fedavgm_hand_values_and_reduction_to_fedavg():
    opt = ServerMomentum(lr=1.0, momentum=0.0)
    np.testing.assert_allclose(opt.step([np.array([1.0])], [np.array([0.5])])[0], [0.5])
    opt = ServerMomentum(lr=1.0, momentum=0.5)
    x1 = opt.step([np.array([1.0])], [np.array([0.0])])[0]  # v = 1, x = 0
    x2 = opt.step([x1], [np.array([-1.0])])[0]  # v = 0.5*1 + 1 = 1.5, x = -1.5
    np.testing.assert_allclose([x1[0], x2[0]], [0.0, -1.5])


def test_fedavgm_one_client_matches_the_reference():
    fed = InProcessFederation(["method=fedavgm", *ONE_CLIENT])
    x0 = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    y1, _ = plain_loop(fed, x0, 1)
    assert_close(parameters_to_ndarrays(fed.parameters), y1)  # v = x0 - y1, x1 = x0 - v = y1
    x1 = parameters_to_ndarrays(fed.parameters)
    fed.round(2)
    y2, _ = plain_loop(fed, x1, 2)
    expected = [
        b - (0.9 * (a - b) + (b - c)) for a, b, c in zip(x0, x1, y2)
    ]  # x2 = x1 - (beta v1 + (x1 - y2))
    assert_close(parameters_to_ndarrays(fed.parameters), expected, tol=1e-5)
