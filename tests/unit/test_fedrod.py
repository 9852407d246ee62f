"""FedRoD: both heads' losses on a two-sample toy worked out by hand, which gradient each
part gets, the P-head staying on (and persisting in) the client, and personal evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from clients.fedrod import (
    STATE,
    WEIGHT,
    PersonalizedModel,
    balanced_risk_loss,
    personal_risk_loss,
)
from fedimb.app.runtimes.in_process import InProcessFederation
from tests.conftest import PERSONAL_DIGITS

# two samples, three classes; the client holds n = (2, 1, 0)
COUNTS = [2, 1, 0]
G = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0]])  # generic logits
P = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # personal logits
Y = torch.tensor([0, 1])

COMMON = [*PERSONAL_DIGITS, "method=fedrod"]


def test_balanced_risk_hand_values():
    # −log(n_y e^{g_y} / Σ_c n_c e^{g_c}); class 2 (n = 0) gets no mass
    # sample 1: 2e / (2e + 1)   -> log(1 + 1/(2e))
    # sample 2: e / (2 + e)      -> log(1 + 2/e)   (its g_2 = 2 does not count)
    expected = (math.log1p(1 / (2 * math.e)) + math.log1p(2 / math.e)) / 2
    assert balanced_risk_loss(G, Y, COUNTS).item() == pytest.approx(expected, rel=1e-6)


def test_personal_risk_is_cross_entropy_of_the_summed_logits():
    # g + p: sample 1 (1, 0, 1), y = 0 -> log((2e + 1)/e) = log(2 + 1/e)
    #        sample 2 (1, 1, 2), y = 1 -> log((2e + e²)/e) = log(2 + e)
    expected = (math.log(2 + 1 / math.e) + math.log(2 + math.e)) / 2
    assert personal_risk_loss(G, P, Y).item() == pytest.approx(expected, rel=1e-6)


def test_the_personal_risk_moves_only_the_personal_head():
    g = G.clone().requires_grad_(True)
    p = P.clone().requires_grad_(True)
    personal_risk_loss(g, p, Y).backward()
    assert g.grad is None
    # ∂/∂p of the mean CE: (softmax(g + p) − onehot(y)) / 2
    s1 = torch.tensor([math.e, 1.0, math.e]) / (2 * math.e + 1)
    s2 = torch.tensor([math.e, math.e, math.e**2]) / (2 * math.e + math.e**2)
    expected = torch.stack([s1 - torch.tensor([1.0, 0, 0]), s2 - torch.tensor([0, 1.0, 0])]) / 2
    torch.testing.assert_close(p.grad, expected)


def test_personal_model_predicts_with_both_heads():
    encoder = nn.Identity()
    generic, personal = nn.Linear(2, 3), nn.Linear(2, 3)
    with torch.no_grad():
        generic.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        generic.bias.zero_()
        personal.weight.zero_()
        personal.bias.copy_(torch.tensor([0.0, 0.0, -5.0]))
    x = torch.tensor([[2.0, 1.0]])
    # generic (2, 1, 3) + personal (0, 0, −5) = (2, 1, −2): the personal head flips the argmax
    torch.testing.assert_close(
        PersonalizedModel(encoder, generic, personal)(x), torch.tensor([[2.0, 1.0, -2.0]])
    )


def test_p_head_stays_on_the_client_and_persists_across_rounds():
    fed = InProcessFederation([*COMMON, "num_rounds=2"])
    shapes = [a.shape for a in parameters_to_ndarrays(fed.parameters)]
    node = fed.nodes[0]
    assert fed.client(node).load_state(STATE) is None
    client = fed.client(node)
    start = client.personal_head(fed.strategy.fit_config(1))  # a copy of the initial G-head
    torch.testing.assert_close(start.weight, client.fresh_model().head.weight)
    fed.round(1)
    first = fed.client(node).load_state(STATE)
    assert np.any(first[WEIGHT] != 0)  # trained away from its zero start
    # what the server holds is body + G-head only: the same arrays as before, no P-head
    assert [a.shape for a in parameters_to_ndarrays(fed.parameters)] == shapes
    client = fed.client(node)
    sent, _, _ = client.fit(parameters_to_ndarrays(fed.parameters), fed.strategy.fit_config(2))
    assert [a.shape for a in sent] == shapes
    p_weight = fed.client(node).load_state(STATE)[WEIGHT]
    assert not any(a.shape == p_weight.shape and np.array_equal(a, p_weight) for a in sent)
    second = fed.client(node).load_state(STATE)
    assert not np.array_equal(first[WEIGHT], second[WEIGHT])  # trained on from round 1
    personal = fed.client(node).personal_head(fed.strategy.fit_config(3))
    np.testing.assert_array_equal(personal.weight.detach().numpy(), second[WEIGHT])


def test_a_zero_p_head_starts_the_personal_model_as_the_generic_one():
    fed = InProcessFederation([*COMMON, "num_rounds=1", "method.client.personal_head_init=zeros"])
    start = fed.client(fed.nodes[0]).personal_head(fed.strategy.fit_config(1))
    assert not start.weight.detach().any() and not start.bias.detach().any()
    assert fed.round(1)["clients"]["succeeded"] == 3


def test_in_the_client_the_empirical_risk_reaches_only_the_p_head():
    fed = InProcessFederation([*COMMON, "num_rounds=1"])
    client = fed.client(fed.nodes[0])
    config = fed.strategy.fit_config(1)
    client.set_parameters(parameters_to_ndarrays(fed.parameters))
    client.receive(config)
    client.before_training(config)
    client.model.zero_grad(set_to_none=True)  # the process's model may hold older gradients
    idx = client.data.indices[:8]
    client.loss(client.data.x[idx], client.data.y[idx])  # L^BR not back-propagated here
    client.after_step()  # the P-head's step on L^ER
    assert all(p.grad is None for p in client.model.parameters())
    assert all(p.grad is not None for p in client.p_head.parameters())


def test_two_rounds_with_personal_evaluation():
    fed = InProcessFederation([*COMMON, "num_rounds=2"])
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["succeeded"] == 3 and record["clients"]["rejected"] == 0
        assert math.isfinite(record["train"]["train_loss"])
    extra = record["extra"]
    assert 0 <= extra["T_p"] <= 1 and 0 <= extra["T_r"] <= 1 and "T_l" in extra
    # the personal model is not the generic one: its global-test F1 differs from T_g's
    assert extra["T_r"] != pytest.approx(extra["T_g"], abs=1e-9)
