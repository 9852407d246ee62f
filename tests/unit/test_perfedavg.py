"""Per-FedAvg (Fallah et al., NeurIPS 2020): the FO and HF updates against closed forms on
a two-parameter model, and a federation that must not collapse to one class."""

from __future__ import annotations

import numpy as np
import pytest

from clients.perfedavg import PerFedAvgClient
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.errors import ConfigError
from tests.toy import toy_client

# four copies of one sample (x = 1, class 0): every batch D, D', D'' has the same loss,
# f(w) = −log softmax(w)_0, ∇f = p − e_0, ∇²f = diag(p) − p pᵀ with p = softmax(w)
X = np.ones((4, 1), dtype=np.float32)
Y = np.zeros(4, dtype=np.int64)
W0 = np.array([0.3, 0.9])
ALPHA, BETA = 0.5, 0.1


def softmax(w):
    e = np.exp(w - w.max())
    return e / e.sum()


def grad(w):
    return softmax(w) - np.array([1.0, 0.0])


def hessian(w):
    p = softmax(w)
    return np.diag(p) - np.outer(p, p)


def one_step(variant: str) -> np.ndarray:
    client = toy_client(PerFedAvgClient, X, Y)
    config = {
        "local_epochs": 1,
        "batch_size": 4,
        "lr": BETA,
        "momentum": 0.0,
        "weight_decay": 0.0,
        "optimizer": "sgd",
        "seed": 0,
        "server_round": 1,
        "alpha": ALPHA,
        "variant": variant,
    }
    weights, _, _ = client.fit([W0.astype(np.float32)], config)
    return weights[0]


def test_first_order_step():
    inner = W0 - ALPHA * grad(W0)
    np.testing.assert_allclose(one_step("fo"), W0 - BETA * grad(inner), atol=1e-6)


def test_hessian_free_step_uses_the_exact_hessian_vector_product():
    inner = W0 - ALPHA * grad(W0)
    outer = grad(inner) - ALPHA * hessian(W0) @ grad(inner)
    np.testing.assert_allclose(one_step("hf"), W0 - BETA * outer, atol=1e-6)
    assert not np.allclose(one_step("hf"), one_step("fo"), atol=1e-4)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="variant"):
        InProcessFederation(["method=perfedavg", "dataset=digits", "method.client.variant=so"])
    with pytest.raises(ConfigError, match="alpha"):
        InProcessFederation(["method=perfedavg", "dataset=digits", "method.client.alpha=0"])


def test_default_alpha_does_not_collapse_the_global_model():
    # a small quantity-skew federation with GRP-FED's optimiser (SGD 5e-3, momentum 0.9):
    # with alpha = 0.01 (alpha * lambda_max > 1) the global model predicted one class
    # from round 7 (10% accuracy); with the default it kept learning (70% at round 10)
    fed = InProcessFederation(
        [
            "method=perfedavg",
            "dataset=mnist5k",
            "partition=quantity",
            "num_clients=10",
            "dropout=none",
            "num_rounds=8",
            "train.local_epochs=2",
            "train.batch_size=64",
            "train.lr=0.005",
            "train.momentum=0.9",
            "train.weight_decay=0",
            "seed=0",
        ]
    )
    for server_round in range(1, 9):
        record = fed.round(server_round)
    recalls = record["test"]["recall"]
    assert sum(r > 0 for r in recalls) >= 5, f"the global model predicts few classes: {recalls}"
    assert record["test"]["accuracy"] > 0.3
