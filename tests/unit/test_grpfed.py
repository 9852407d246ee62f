"""GRP-FED and the personalisation baselines: losses, state, aggregation, evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from clients.grpfed import (
    STATE,
    DivergedPersonalModel,
    discriminator_cross_entropy,
    discriminator_loss,
    regularizer_loss,
)
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.aggregate import adaptive_q, loss_power_weights, weighted_average

COMMON = [
    "dataset=digits",
    "num_clients=4",
    "train.local_epochs=1",
    "dropout=none",
    "partition=quantity",
    "evaluation.local_test_fraction=0.2",
    "evaluation.personal=true",
]


class ConstantD(nn.Module):
    """D(f) = sigmoid(c) for every feature."""

    def __init__(self, logit: float):
        super().__init__()
        self.logit = logit

    def forward(self, f):
        return torch.full((len(f), 1), self.logit)


def test_discriminator_and_regulariser_signs_follow_algorithm_1():
    f = torch.zeros(3, 4)
    d = ConstantD(math.log(3.0))  # D = 0.75
    # L_D = log(1 - D(f^g)) + log D(f^l); L_R = log(1 - D(f^l))
    assert float(discriminator_loss(d, f, f)) == pytest.approx(math.log(0.25) + math.log(0.75))
    assert float(regularizer_loss(d, f)) == pytest.approx(math.log(0.25))
    # minimising L_D makes D call global features true and personal ones false
    lin = nn.Linear(1, 1)
    fg, fl = torch.ones(8, 1), -torch.ones(8, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        discriminator_loss(lin, fg, fl).backward()
        opt.step()
    assert torch.sigmoid(lin(fg)).min() > 0.9 and torch.sigmoid(lin(fl)).max() < 0.1
    # minimising L_R over the personal features makes D call them more "true" (fools D)
    d = nn.Linear(1, 1)
    with torch.no_grad():
        d.weight.fill_(1.0)
        d.bias.zero_()
    feats = torch.full((8, 1), -0.5, requires_grad=True)
    regularizer_loss(d, feats).backward()
    with torch.no_grad():
        moved = feats - 1.0 * feats.grad
        assert torch.all(d(moved) > d(feats))


def test_personal_extractor_and_discriminator_persist_across_rounds():
    fed = InProcessFederation(["method=grpfed", *COMMON])
    node = fed.nodes[0]
    fed.round(1)
    first = dict(fed.client(node).load_state(STATE))
    fed.round(2)
    second = fed.client(node).load_state(STATE)
    assert set(first) == set(second)
    assert any(
        not np.array_equal(first[k], second[k]) for k in first
    )  # trained further, not re-initialised
    # round 2 started from round 1's state: a client built now restores exactly round 2's arrays
    client = fed.client(node)
    encoder, _ = client._personal_parts(fed.strategy.fit_config(3))
    restored = [t.numpy() for t in encoder.state_dict().values()]
    np.testing.assert_array_equal(restored[0], second["a0"])


def test_grpfed_server_weights_and_q():
    fed = InProcessFederation(["method=grpfed", *COMMON])
    s = fed.strategy
    record = fed.round(1)
    assert record["extra"]["q"] == 10.0  # round 1 keeps q_0
    sigma1 = s.sigma
    record = fed.round(2)
    assert s.q == pytest.approx(adaptive_q(10.0, sigma1, s.sigma, 0.5))
    assert record["extra"]["loss_std"] == pytest.approx(s.sigma)
    assert {"T_g", "T_p", "T_r", "T_l"} <= set(record["extra"])
    tp, tr = record["extra"]["T_p"], record["extra"]["T_r"]
    assert record["extra"]["T_l"] == pytest.approx(2 * tp * tr / (tp + tr))
    assert record["extra"]["T_g"] == pytest.approx(record["test"]["macro_f1"])


def test_grpfed_aggregates_by_loss_power():
    # hand-made losses, which the server's replay of the clients' training would refuse
    fed = InProcessFederation(["method=grpfed", *COMMON, "method.strategy.replay_training=false"])
    s = fed.strategy
    s.begin_round(1)
    instructions = s.configure_fit(
        server_round=1, parameters=fed.parameters, client_manager=fed.manager
    )
    from flwr.common import FitRes, ndarrays_to_parameters

    from fedimb.app.runtimes.in_process import OK

    base = parameters_to_ndarrays(fed.parameters)
    results = []
    for (proxy, _), loss, shift in zip(instructions[:2], (1.0, 2.0), (1.0, 3.0)):
        arrays = [a + shift for a in base]
        results.append(
            (
                proxy,
                FitRes(
                    status=OK,
                    parameters=ndarrays_to_parameters(arrays),
                    num_examples=5,
                    metrics={"train_loss": loss},
                ),
            )
        )
    new, _ = s.aggregate_fit(1, results, [])
    expected = weighted_average(
        [[a + 1.0 for a in base], [a + 3.0 for a in base]], loss_power_weights([1.0, 2.0], 10.0)
    )
    for a, b in zip(parameters_to_ndarrays(new), expected):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_global_only_methods_use_the_global_model_as_personal_model():
    fed = InProcessFederation(["method=fedavg", *COMMON])
    record = fed.round(1)
    # personal model == global model: the mean of per-client global-test F1 equals the server's
    assert record["extra"]["T_r"] == pytest.approx(record["extra"]["T_g"], abs=1e-9)


@pytest.mark.parametrize("method", ["lg_fedavg", "local"])
def test_local_only_methods_ensemble_for_the_global_test(method):
    fed = InProcessFederation([f"method={method}", *COMMON])
    record = fed.round(1)
    assert record["test"]["accuracy"] > 0 and record["extra"]["T_g"] == record["test"]["macro_f1"]
    sent = [a.shape for a in parameters_to_ndarrays(fed.parameters)]
    if method == "local":
        assert sent == [] and record["bytes"]["up"] < 10_000  # no model leaves a client
    else:
        assert sent == [(10, 64), (10,)]  # only the (mlp's) head is global


def test_local_models_keep_training_on_their_own():
    fed = InProcessFederation(["method=local", *COMMON])
    node = fed.nodes[1]
    fed.round(1)
    first = fed.client(node).load_state("local_model")
    fed.round(2)
    second = fed.client(node).load_state("local_model")
    assert any(not np.array_equal(first[k], second[k]) for k in first)


def test_pfedme_and_perfedavg_personal_models_differ_from_the_global_model():
    for method, state in (("pfedme", "pfedme_personal"), ("perfedavg", None)):
        fed = InProcessFederation([f"method={method}", *COMMON])
        fed.round(1)
        client = fed.client(fed.nodes[0])
        global_weights = parameters_to_ndarrays(fed.parameters)
        personal = client.personal_model(global_weights, fed.strategy.fit_config(2))
        personal_weights = [t.detach().numpy() for t in personal.state_dict().values()]
        assert any(not np.allclose(a, b) for a, b in zip(global_weights, personal_weights)), method
        if state:
            assert client.load_state(state) is not None


def grpfed_updates(fed, pids_losses_shifts):
    from strategies.base import ClientUpdate

    base = parameters_to_ndarrays(fed.parameters)
    return [
        ClientUpdate(pid, [a + shift for a in base], 5, {"train_loss": loss})
        for pid, loss, shift in pids_losses_shifts
    ]


def test_lambda_over_all_clients_keeps_the_rest_on_the_global_model():
    fed = InProcessFederation(
        [
            "method=grpfed",
            *COMMON,
            "method.strategy.lambda_over=all",
            "method.strategy.q0=1",
            "influence.loss_ratio=null",  # hand-made losses above the received model's
        ]
    )
    s = fed.strategy
    s.current_weights = parameters_to_ndarrays(fed.parameters)
    s.last_loss = {1: 2.0, 2: 4.0}  # seen in earlier rounds
    new = s.aggregate(3, grpfed_updates(fed, [(0, 1.0, 1.0), (3, 3.0, 3.0)]))
    # q = 1: lambda over the four known losses 1, 2, 4, 3 -> 1/10, 2/10, 4/10, 3/10
    # participants 0 and 3 get 0.1 and 0.3; the other 0.6 stays on the current model
    expected = [0.1 * (a + 1.0) + 0.3 * (a + 3.0) + 0.6 * a for a in s.current_weights]
    for a, b in zip(new, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert s.last_loss == {0: 1.0, 1: 2.0, 2: 4.0, 3: 3.0}


def test_q_bounds_clip_eq_2():
    fed = InProcessFederation(
        ["method=grpfed", *COMMON, "method.strategy.q_max=10.2", "influence.loss_ratio=null"]
    )
    s = fed.strategy
    s.current_weights = parameters_to_ndarrays(fed.parameters)
    s.sigma = 0.5  # the new losses 1 and 3 have sigma 1: eq. 2 gives 10 + 0.5 * 0.5 / 0.75 = 10.33
    s.aggregate(2, grpfed_updates(fed, [(0, 1.0, 0.0), (1, 3.0, 0.0)]))
    assert s.q == pytest.approx(10.2)
    with pytest.raises(Exception, match="q_min"):
        InProcessFederation(
            ["method=grpfed", *COMMON, "method.strategy.q_min=3", "method.strategy.q_max=2"]
        )


def test_loss_of_the_received_model_is_reported_and_aggregated():
    fed = InProcessFederation(["method=grpfed", *COMMON, "method.client.loss_at=received"])
    assert fed.strategy.loss_key == "initial_loss"
    client = fed.client(fed.nodes[0])
    client.set_parameters(parameters_to_ndarrays(fed.parameters))
    expected = client.local_loss()
    fit = fed.strategy.configure_fit(
        server_round=1, parameters=fed.parameters, client_manager=fed.manager
    )
    proxy, ins = next((p, i) for p, i in fit if fed.strategy.registry.partition_of(p) == 0)
    assert proxy.fit(ins, None, None).metrics["initial_loss"] == pytest.approx(expected)


def test_personal_extractor_resync_every_k_rounds():
    fed = InProcessFederation(["method=grpfed", *COMMON, "method.client.personal_resync_every=2"])
    node = fed.nodes[0]
    fed.round(1)
    client = fed.client(node)
    config = dict(fed.strategy.fit_config(2))
    assert int(client.load_state(STATE)["synced_round"]) == 1
    assert not client.resync_due(config)  # one round old
    config["server_round"] = 3
    assert client.resync_due(config)  # two rounds old: copy the global extractor again
    client.set_parameters(parameters_to_ndarrays(fed.parameters))
    encoder, _ = client._personal_parts(config, resync=True)
    for a, b in zip(encoder.state_dict().values(), client.model.encoder.state_dict().values()):
        assert torch.equal(a, b)
    config["personal_resync_every"] = 0
    assert not client.resync_due(config)


def train_discriminator(objective, steps: int = 2000) -> tuple[float, float]:
    """D(f) = sigmoid(w f + b) trained by SGD to call f = 1 true and f = -1 false."""
    torch.manual_seed(0)
    d = nn.Linear(1, 1)
    fg, fl = torch.ones(8, 1), -torch.ones(8, 1)
    opt = torch.optim.SGD(d.parameters(), lr=0.5)
    for _ in range(steps):
        opt.zero_grad()
        loss = objective(d, fg, fl)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(loss), float(d(fg).mean())


def test_eq_4_as_printed_has_no_lower_bound_and_cross_entropy_has():
    d = ConstantD(math.log(3.0))  # D = 0.75
    f = torch.zeros(3, 4)
    assert float(discriminator_cross_entropy(d, f, f)) == pytest.approx(
        -math.log(0.75) - math.log(0.25)
    )
    # same targets, but the printed loss keeps falling and D's logit grows by a constant step
    printed_loss, printed_logit = train_discriminator(discriminator_loss)
    ce_loss, ce_logit = train_discriminator(discriminator_cross_entropy)
    assert printed_loss < -1000 and printed_logit > 1000
    assert 0 <= ce_loss < 0.01 and 0 < ce_logit < 20


def test_a_diverged_personal_model_is_not_scored_and_the_round_says_why():
    fed = InProcessFederation(["method=grpfed", *COMMON])
    fed.round(1)
    client = fed.client(fed.nodes[0])
    state = dict(client.load_state(STATE))
    state["a0"] = np.full_like(state["a0"], np.nan)
    client.save_state(STATE, state)
    with pytest.raises(
        DivergedPersonalModel, match="client 0's personal extractor or discriminator is non-finite"
    ):
        client.personal_model(
            parameters_to_ndarrays(fed.parameters), dict(fed.strategy.fit_config(2))
        )
    record = fed.round(2)
    assert sorted(record["local"]["personal"]["accuracy"]) == [1, 2, 3]
    assert any(
        "personal evaluation: 1 clients failed" in m and "non-finite" in m
        for m in record["messages"]
    )


def test_the_server_replays_each_clients_training_and_finds_its_loss():
    fed = InProcessFederation(["method=grpfed", *COMMON])
    for server_round in (1, 2):
        record = fed.round(server_round)
        assert record["clients"]["rejected"] == 0
        # the same steps on the same samples in the same order: the loss to the last bit
        assert record["extra"]["influence.train_loss_replay_gap"] < 1e-6


@pytest.mark.parametrize("scale", [1.25, 100.0])
def test_a_training_loss_its_training_does_not_give_is_rejected(scale):
    fed = InProcessFederation(
        [
            "method=grpfed",
            *COMMON,
            "fault.kind=loss_skew",
            "fault.clients=[1]",
            f"fault.scale={scale}",
        ]
    )
    record = fed.round(1)
    assert record["clients"]["rejected"] == 1 and record["clients"]["succeeded"] == 3
    (message,) = record["messages"]
    assert "client 1 rejected" in message and "replayed by the server" in message
    assert record["extra"]["influence.train_loss_replay_gap"] == pytest.approx(1 - 1 / scale)


def test_without_the_replay_an_inflated_training_loss_is_only_bounded():
    fed = InProcessFederation(
        [
            "method=grpfed",
            *COMMON,
            "method.strategy.replay_training=false",
            "fault.kind=loss_skew",
            "fault.clients=[1]",
            "fault.scale=100",
        ]
    )
    record = fed.round(1)
    assert record["clients"]["rejected"] == 0 and record["clients"]["bounded"] == 1
