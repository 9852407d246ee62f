"""Wiring of the label-skew baselines: each client's loss uses its own label counts and
the hyperparameter from the fit instruction; FedBABU keeps its head fixed and fine-tunes
the part it is told."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.losses import (
    logit_calibration_loss,
    relaxed_balanced_softmax_loss,
    restricted_softmax_logits,
)


def prepared_client(method: str, *overrides: str):
    fed = InProcessFederation(
        [f"method={method}", "num_clients=4", "train.local_epochs=1", "dropout=none", *overrides]
    )
    client = fed.client(fed.nodes[1])
    client.set_parameters(parameters_to_ndarrays(fed.parameters))
    config = fed.strategy.fit_config(1)
    client.before_training(config)
    idx = client.data.indices[:32]
    return fed, client, config, client.data.x[idx], client.data.y[idx]


def test_balanced_softmax_client_uses_local_counts():
    _, client, _, x, y = prepared_client("bsm_fedavg")
    expected = relaxed_balanced_softmax_loss(client.model(x), y, client.data.label_counts, eps=0.0)
    assert client.loss(x, y).item() == pytest.approx(expected.item())


def test_fedrs_client_restricts_missing_classes_with_configured_alpha():
    _, client, config, x, y = prepared_client("fedrs", "method.client.alpha=0.3")
    assert config["alpha"] == 0.3
    logits = restricted_softmax_logits(client.model(x), client.data.label_counts, 0.3)
    assert client.loss(x, y).item() == pytest.approx(nn.functional.cross_entropy(logits, y).item())


def test_fedlc_client_calibrates_with_configured_tau():
    _, client, config, x, y = prepared_client("fedlc", "method.client.tau=0.5")
    expected = logit_calibration_loss(client.model(x), y, client.data.label_counts, 0.5)
    assert client.loss(x, y).item() == pytest.approx(expected.item())


def test_fedprox_adds_the_proximal_gradient():
    _, client, config, x, y = prepared_client("fedprox", "method.client.mu=2.0")
    with torch.no_grad():
        for p in client.model.parameters():
            p.add_(0.01)
    params = list(client.model.parameters())
    client.model.zero_grad()
    nn.functional.cross_entropy(client.model(x), y).backward()
    plain = [p.grad.clone() for p in params]
    client.after_backward()
    for p, g in zip(params, plain):  # gradient of mu/2 ||w - w_t||^2 is mu (w - w_t) = 2.0 * 0.01
        torch.testing.assert_close(p.grad, g + 2.0 * 0.01, rtol=1e-4, atol=1e-6)


def test_fedprox_keeps_local_models_closer_to_the_global_model():
    distances = {}
    for mu in (0.0, 1.0):
        fed, client, config, _, _ = prepared_client("fedprox", f"method.client.mu={mu}")
        start = parameters_to_ndarrays(fed.parameters)
        trained, _, _ = client.fit(start, config)
        distances[mu] = sum(float(((a - b) ** 2).sum()) for a, b in zip(trained, start))
    assert distances[1.0] < distances[0.0]


def test_fedbabu_never_changes_the_head():
    fed = InProcessFederation(
        [
            "method=fedbabu",
            "num_clients=3",
            "num_rounds=2",
            "train.local_epochs=1",
            "dropout=none",
            "method.strategy.finetune_every=2",
        ]
    )
    model = fed.run.new_model()
    head_keys = [i for i, k in enumerate(model.state_dict()) if k.startswith("head.")]
    body_keys = [i for i, k in enumerate(model.state_dict()) if k.startswith("encoder.")]
    initial = parameters_to_ndarrays(fed.parameters)
    record1 = fed.round(1)
    after = parameters_to_ndarrays(fed.parameters)
    assert all(np.array_equal(initial[i], after[i]) for i in head_keys)
    assert any(not np.array_equal(initial[i], after[i]) for i in body_keys)
    assert "finetuned_accuracy" not in record1.get("extra", {})
    record2 = fed.round(2)  # a fine-tuning round: every client fine-tunes its head and tests it
    assert record2["extra"]["finetuned_clients"] == 3
    assert 0 <= record2["extra"]["finetuned_accuracy"] <= 1
    assert all(
        np.array_equal(initial[i], parameters_to_ndarrays(fed.parameters)[i]) for i in head_keys
    )


@pytest.mark.parametrize("part, trained", [("full", {"encoder", "head"}), ("head", {"head"})])
def test_fedbabu_finetuning_trains_the_part_it_is_told(part, trained):
    fed = InProcessFederation(
        ["method=fedbabu", "num_clients=3", "train.local_epochs=1", "dropout=none"]
    )
    client = fed.client(fed.nodes[0])
    start = parameters_to_ndarrays(fed.parameters)
    config = {**fed.strategy.fit_config(1), "finetune_epochs": 2, "finetune_part": part}
    _, _, metrics = client.evaluate(start, config)
    tuned = client.get_parameters({})
    names = list(client.model.state_dict())
    changed = {
        names[i].split(".")[0]
        for i, (a, b) in enumerate(zip(start, tuned))
        if not np.array_equal(a, b)
    }
    assert changed == trained
    assert set(metrics) == {"finetuned_accuracy", "finetuned_macro_f1"}
