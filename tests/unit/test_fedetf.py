"""FedETF: the balanced feature loss on toys worked out by hand, the projection and
normalisation before the fixed ETF, an ETF that no training changes, the local
adaptation as personal model, and two rounds in process."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays
from torch import nn

from clients.fedetf import (
    FedETFClient,
    balanced_feature_loss,
    log_class_counts,
    require_etf_model,
)
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.errors import ConfigError
from fedimb.core.models import EncoderHeadNet
from fedimb.core.models.etf import etf_from_basis, with_etf_classifier
from tests.conftest import PERSONAL_DIGITS, personal_rounds

METHOD = ["method=fedetf", "method.client.adapt_rounds=2", "method.client.adapt_epochs=1"]
COMMON = [*PERSONAL_DIGITS, *METHOD]


def test_absent_classes_count_as_one():
    assert torch.allclose(log_class_counts([2, 0, 1]), torch.tensor([math.log(2), 0.0, 0.0]))


def test_balanced_feature_loss_by_hand():
    # counts (2, 0, 1) -> log n = (ln 2, 0, 0)
    # sample 1: z = (0, 0, 0), y = 0: −log(2 / (2 + 1 + 1)) = ln 2
    # sample 2: z = (0, ln 3, 0), y = 2: shifted (ln 2, ln 3, 0): −log(1 / (2 + 3 + 1)) = ln 6
    z = torch.tensor([[0.0, 0.0, 0.0], [0.0, math.log(3), 0.0]])
    loss = balanced_feature_loss(z, torch.tensor([0, 2]), log_class_counts([2, 0, 1]))
    assert loss.item() == pytest.approx((math.log(2) + math.log(6)) / 2, rel=1e-6)


def toy_model() -> EncoderHeadNet:
    """Identity backbone on 3 inputs, projection = I (no bias), W = the ETF of the
    standard basis (diagonal 2/√6, off-diagonal −1/√6), β = √6."""
    model = with_etf_classifier(
        EncoderHeadNet(nn.Flatten(), 3, 3), {"projection_dim": 3, "temperature": 1.0}
    )
    with torch.no_grad():
        model.encoder.projection.weight.copy_(torch.eye(3))
        model.encoder.projection.bias.zero_()
        model.head.temperature.fill_(math.sqrt(6))
    model.head.etf = etf_from_basis(torch.eye(3))
    return model


def test_projection_normalisation_and_etf_logits_by_hand():
    model = toy_model()
    x = torch.tensor([[3.0, 4.0, 0.0]])
    # h = (3, 4, 0) / 5 = (0.6, 0.8, 0); hᵀW·√6 = (1.2 − 0.8, −0.6 + 1.6, −0.6 − 0.8)
    assert torch.allclose(model.encoder(x), torch.tensor([[0.6, 0.8, 0.0]]), atol=1e-6)
    assert torch.allclose(model(x), torch.tensor([[0.4, 1.0, -1.4]]), atol=1e-5)
    assert torch.allclose(model.encoder(5 * x), model.encoder(x), atol=1e-6)  # scale-free


def test_client_loss_is_the_balanced_loss_of_the_etf_logits():
    client = object.__new__(FedETFClient)
    client.model = toy_model()
    client.log_counts = log_class_counts([2, 0, 1])
    loss = client.loss(torch.tensor([[3.0, 4.0, 0.0]]), torch.tensor([1]))
    # shifted logits (0.4 + ln 2, 1, −1.4): −log(e / (2e^0.4 + e + e^−1.4))
    expected = -math.log(math.e / (2 * math.exp(0.4) + math.e + math.exp(-1.4)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_a_model_without_the_etf_head_is_one_line():
    with pytest.raises(ConfigError, match="etf_classifier"):
        require_etf_model(EncoderHeadNet(nn.Flatten(), 3, 3))


def test_training_never_changes_the_etf_but_moves_temperature_and_projection():
    fed = InProcessFederation(COMMON + ["num_rounds=2"])
    client = fed.client(fed.nodes[0])
    etf = client.model.head.etf.clone()
    weights = parameters_to_ndarrays(fed.parameters)
    new_weights, _, _ = client.fit(weights, fed.strategy.fit_config(1))
    assert torch.equal(client.model.head.etf, etf)
    assert len(new_weights) == len(weights) == len(client.model.state_dict())
    keys = list(client.model.state_dict())
    moved = {k for k, a, b in zip(keys, weights, new_weights) if not np.allclose(a, b)}
    assert {"head.temperature", "encoder.projection.weight"} <= moved


def test_local_adaptation_fine_tunes_etf_and_projection_on_a_copy():
    fed = InProcessFederation(COMMON + ["num_rounds=2", "method.client.adapt_local_epochs=0"])
    client = fed.client(fed.nodes[0])
    etf = client.model.head.etf.clone()
    weights = parameters_to_ndarrays(fed.parameters)
    personal = client.personal_model(weights, fed.strategy.fit_config(1))
    assert torch.equal(client.model.head.etf, etf)  # the client's own ETF stays fixed
    assert not torch.allclose(personal.head.etf, etf)
    state = personal.state_dict()
    for key, array in zip(client.model.state_dict(), weights):
        changed = not np.allclose(state[key].numpy(), array)
        # with no local-training pass only the projection is fine-tuned (besides the ETF)
        assert changed == key.startswith("encoder.projection."), key


def test_two_rounds_in_process_with_personal_evaluation():
    _, record = personal_rounds(METHOD)
    assert 0 <= record["extra"]["T_r"] <= 1
