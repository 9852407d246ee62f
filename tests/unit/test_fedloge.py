"""FedLoGe: the SSE-C objective and its gradient, the sparse ETF (its first Adam step and
its default column norm), the three losses with detached heads, the global (GA-FR) and
local (LA-FR) realignments worked out by hand, the local head in Context.state, and two
rounds in process."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from clients.fedloge import (
    LOCAL_HEAD,
    MASKED_LOGIT,
    SSE_CLASSIFIER,
    FedLoGeClient,
    RealignedPersonalHead,
    local_realignment,
)
from fedimb.app.configuration.compose import compose
from fedimb.core import payload
from fedimb.core.errors import ConfigError
from fedimb.core.models.etf import simplex_etf, sparse_etf_objective, sparse_simplex_etf
from strategies.fedloge import global_realignment
from tests.conftest import PERSONAL_DIGITS, personal_rounds

METHOD = ["method=fedloge", "method.strategy.sse_steps=200"]
COMMON = [*PERSONAL_DIGITS, *METHOD]


def test_sse_objective_and_gradient_by_hand():
    # columns w0 = (1, 0), w1 = (0, 2): norms 1, 2; cosine 0, arccos 0 = π/2; target
    # norm 0.1 (the authors' util/etf_methods.py)
    # value: (1 − 0.1)² + (2 − 0.1)² − π/2 = 0.81 + 3.61 − π/2 = 4.42 − π/2
    # gradient: norm term 2(‖w‖ − 0.1)·ŵ = 1.8·(1, 0) and 3.8·(0, 1); angle term, slope
    # 1/sqrt(1 − 0²)/C = 1/2, for each ordered pair (c, j): (ŵ_j − cos·ŵ_c)/‖w_c‖ on w_c
    # and (ŵ_c − cos·ŵ_j)/‖w_j‖ on w_j: w0 gets 2·½·(0, 1) = (0, 1), w1 gets 2·½·(1, 0)/2
    # = (0.5, 0); so w0 → (1.8, 1), w1 → (0.5, 3.8) (columns)
    value, grad = sparse_etf_objective(np.array([[1.0, 0.0], [0.0, 2.0]]), 0.1)
    assert value == pytest.approx(4.42 - math.pi / 2)
    assert np.allclose(grad, [[1.8, 0.5], [1.0, 3.8]])


def test_the_first_adam_step_moves_every_kept_entry_by_the_rate():
    # Adam's first step is lr·m̂/(sqrt(v̂) + eps) with m̂ = g, v̂ = g²: lr·sign(g) for
    # every entry with |g| ≫ eps, here 1e-4 (the authors' rate); zeros stay zero
    start = sparse_simplex_etf(16, 4, 0.5, 0, torch.Generator().manual_seed(0), lr=1e-4, norm=0.1)
    moved = sparse_simplex_etf(16, 4, 0.5, 1, torch.Generator().manual_seed(0), lr=1e-4, norm=0.1)
    kept = start != 0
    assert int(kept.sum()) == 16 * 4 - 32  # int(0.5 · 16 · 4) entries set to zero
    assert torch.allclose((moved - start)[kept].abs(), torch.full((32,), 1e-4), rtol=1e-3)
    assert torch.all(moved[~kept] == 0)


def test_the_default_sse_c_has_the_authors_column_norm():
    # the YAML defaults (10000 Adam steps, lr 1e-4, target norm 0.1, sparsity 0.6) on
    # the digits CNN's 64 features and 10 classes: every column ends at norm ≈ 0.1, as
    # the authors' sse_c.log reports for theirs ("Norm Mean: 0.10024")
    s = compose(["method=fedloge"]).method.strategy
    w = sparse_simplex_etf(
        64,
        10,
        s.sparsity,
        s.sse_steps,
        torch.Generator().manual_seed(0),
        lr=s.sse_lr,
        norm=s.sse_norm,
    )
    assert torch.allclose(w.norm(dim=0), torch.full((10,), 0.1), atol=0.002)
    cosine = (w / w.norm(dim=0)).T @ (w / w.norm(dim=0))
    assert cosine.fill_diagonal_(-1).max() < 0  # still pairwise obtuse


def test_without_sparsity_or_steps_it_is_the_simplex_etf():
    w = sparse_simplex_etf(8, 3, 0.0, 0, torch.Generator().manual_seed(5), lr=1e-4, norm=0.1)
    assert torch.allclose(w, simplex_etf(8, 3, torch.Generator().manual_seed(5)), atol=1e-6)


def test_a_sparsity_that_empties_a_class_is_one_line():
    with pytest.raises(ConfigError, match="all zeros"):
        sparse_simplex_etf(2, 2, 0.75, 0, torch.Generator().manual_seed(0), lr=1e-4, norm=0.1)


def test_global_realignment_by_hand():
    # rows (3, 4) and (0, 2) to norm 1.7: (3, 4)·1.7/5 and (0, 2)·1.7/2
    realigned = global_realignment(np.array([[3.0, 4.0], [0.0, 2.0]]), 1.7)
    assert np.allclose(realigned, [[1.02, 1.36], [0.0, 1.7]])


def linear(weight, bias) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def test_local_realignment_and_personal_logits_by_hand():
    aux = linear([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [0.5, 0.0, 0.0])
    local = linear([[3.0, 4.0], [0.0, 0.5], [1.0, 0.0]], [0.0, 1.0, 0.0])
    # rows of aux scaled by the local rows' norms 5, 0.5, 1; aux bias kept
    realigned = local_realignment(aux, local)
    assert torch.allclose(realigned.weight, torch.tensor([[5.0, 0.0], [0.0, 0.5], [1.0, 1.0]]))
    assert torch.allclose(realigned.bias, torch.tensor([0.5, 0.0, 0.0]))
    head = RealignedPersonalHead(aux, local, torch.tensor([False, False, True]))
    f = torch.tensor([[1.0, 2.0]])
    # local (3 + 8, 1 + 1, ·) + realigned (5 + 0.5, 1, ·); class 2 masked
    assert torch.allclose(head(f), torch.tensor([[16.5, 3.0, MASKED_LOGIT]]))


class Features(nn.Module):
    """A linear encoder whose gradient tells which losses reach it."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(2, 2, bias=False)
        with torch.no_grad():
            self.layer.weight.copy_(torch.eye(2))

    def forward(self, x):
        return self.layer(x)


def test_client_loss_sums_three_cross_entropies_and_only_sse_reaches_the_encoder():
    client = object.__new__(FedLoGeClient)
    client.model = nn.Module()
    client.model.encoder = Features()
    client.model.head = linear([[2.0, 0.0], [0.0, 0.0]], [-1.0, 0.0])  # logits (1, 0)
    client.local = linear([[0.0, 0.0], [0.0, 0.0]], [0.0, math.log(3)])  # logits (0, ln 3)
    client.sse = torch.eye(2)  # logits f = (1, 0)
    x, y = torch.tensor([[1.0, 0.0]]), torch.tensor([0])
    loss = client.loss(x, y)
    # SSE-C and auxiliary: −log(e/(e + 1)) each; local: −log(1/(1 + 3)) = log 4
    expected = 2 * math.log1p(math.exp(-1)) + math.log(4)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()
    # only the SSE-C term reaches the encoder (the auxiliary head's would double the
    # first row): d/dW of CE((Wx)·I, 0) = (p − e_0) xᵀ
    p = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    expected_grad = torch.outer(p - torch.tensor([1.0, 0.0]), x[0])
    assert torch.allclose(client.model.encoder.layer.weight.grad, expected_grad, atol=1e-6)


def test_rounds_in_process_keep_the_local_head_and_realign_both_heads():
    fed, _ = personal_rounds(METHOD)
    config = fed.strategy.fit_config(3)
    sse = payload.unpack(config)[SSE_CLASSIFIER]
    assert sse.shape == (10, 64)  # C × d, sent with every instruction
    client = fed.client(fed.nodes[0])
    assert client.load_state(LOCAL_HEAD)["weight"].shape == (10, 64)
    weights = parameters_to_ndarrays(fed.parameters)
    realigned = fed.strategy.evaluation_weights(fed.parameters)
    i = fed.strategy.head_weight
    assert np.allclose(np.linalg.norm(realigned[i], axis=1), 1.7, atol=1e-5)
    assert np.allclose(realigned[i + 1], weights[i + 1])  # the bias is kept
    personal = client.personal_model(weights, config)
    absent = np.asarray(client.data.label_counts) == 0
    logits = personal(client.data.x[:4])
    assert absent.any() and torch.all(logits[:, torch.from_numpy(absent)] == MASKED_LOGIT)
