"""FedRCL: the relaxed contrastive loss on a 4-sample batch worked out by hand, the feature
levels it is applied to, the client's loss, and two rounds in process."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from clients.fedrcl import FedRCLClient, level_features
from fedimb.core.losses import relaxed_contrastive_loss, relaxed_contrastive_terms
from fedimb.core.models import MODELS
from tests.conftest import checked_rounds

# Rows a, b, e of class 0 and c of class 1; scaled, so that only normalisation gives the
# unit vectors a = (1, 0), b = (.6, .8), e = (.8, .6), c = (0, 1). Cosine similarities:
# ab .6, ae .8, be .96, ac 0, bc .8, ec .6.
X = torch.tensor([[2.0, 0.0], [3.0, 4.0], [4.0, 3.0], [0.0, 0.5]])
Y = torch.tensor([0, 0, 0, 1])
TAU = 0.5


def softplus(v: float) -> float:
    return math.log1p(math.exp(v))


# Supervised contrastive term, τ = 0.5, 2 hard negatives. Positive: the least similar of the
# anchor's class, the anchor (1) included; negatives: the 2 most similar of other classes.
#   a: positive min(1, .6, .8) = .6, negative c 0:      log(1 + e^{(0 − .6)/.5})  = .263282
#   b: positive min(1, .6, .96) = .6, negative c .8:    log(1 + e^{(.8 − .6)/.5}) = .913015
#   e: positive min(1, .8, .96) = .8, negative c .6:    log(1 + e^{(.6 − .8)/.5}) = .513015
#   c: alone in its class, positive itself 1; negatives b .8 and e .6 (a's 0 is the third):
#      log(1 + e^{(.8 − 1)/.5} + e^{(.6 − 1)/.5}) = log(1 + e^{-.4} + e^{-.8})    = .751251
CONTRASTIVE = [
    softplus(-1.2),
    softplus(0.4),
    softplus(-0.4),
    math.log(1 + math.exp(-0.4) + math.exp(-0.8)),
]
# Divergence penalty, λ = .7: q, the least similar other sample of the class.
#   a: min(.6, .8) = .6 < λ and b: min(.6, .96) = .6 < λ: replaced by −1,
#      log(1 + e^{(−1 − 1)/.5}) = log(1 + e^{-4}) = .018150 each
#   e: min(.8, .96) = .8 ≥ λ: log(1 + e^{(.8 − 1)/.5}) = .513015
#   c: no other sample of class 1: −1 as well, .018150
PENALTY = [softplus(-4.0), softplus(-4.0), softplus(-0.4), softplus(-4.0)]


def test_the_two_terms_per_anchor_by_hand():
    contrastive, penalty = relaxed_contrastive_terms(X, Y, tau=TAU, threshold=0.7, hard_negatives=2)
    assert contrastive.tolist() == pytest.approx(CONTRASTIVE, rel=1e-5)
    assert penalty.tolist() == pytest.approx(PENALTY, rel=1e-5)


def test_one_hard_negative_keeps_only_the_most_similar_other_class_sample():
    contrastive, _ = relaxed_contrastive_terms(X, Y, tau=TAU, threshold=0.7, hard_negatives=1)
    # c against b (.8) alone: log(1 + e^{(.8 − 1)/.5}); the others had one negative already
    assert contrastive.tolist() == pytest.approx(CONTRASTIVE[:3] + [softplus(-0.4)], rel=1e-5)


def test_loss_is_the_batch_means_with_beta_on_the_penalty():
    loss = relaxed_contrastive_loss(X, Y, tau=TAU, threshold=0.7, beta=2.0, hard_negatives=2)
    # .610141 + 2 · .141866 = .893874
    expected = sum(CONTRASTIVE) / 4 + 2.0 * sum(PENALTY) / 4
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_a_pair_exactly_at_the_threshold_is_penalised():
    # two identical class-0 rows (similarity exactly 1) and a class-1 row orthogonal to them
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 0, 1])
    _, penalty = relaxed_contrastive_terms(x, y, tau=TAU, threshold=1.0, hard_negatives=2)
    # q = 1 ≥ λ = 1: log(1 + e^{(1 − 1)/.5}) = log 2; the class-1 row has no partner
    assert penalty.tolist() == pytest.approx([math.log(2), math.log(2), softplus(-4.0)], rel=1e-6)


def test_the_penalty_pushes_an_over_similar_pair_apart_and_leaves_the_rest():
    x = torch.tensor([[1.0, 0.1], [1.0, -0.1], [0.0, 1.0], [0.3, 1.0]], requires_grad=True)
    y = torch.tensor([0, 0, 1, 1])
    # class 0: cos = .99/1.01 ≈ .980 ≥ λ = .97, penalised; class 1: cos = 1/√1.09 ≈ .958 < λ,
    # replaced by −1 (a constant: no gradient)
    _, penalty = relaxed_contrastive_terms(x, y, tau=0.05, threshold=0.97, hard_negatives=2)
    penalty.sum().backward()
    grad = x.grad
    assert grad[2:].abs().max().item() == pytest.approx(0.0, abs=1e-6)
    moved = x.detach() - 0.01 * grad
    before = nn.functional.cosine_similarity(x[0:1], x[1:2]).item()
    after = nn.functional.cosine_similarity(moved[0:1], moved[1:2]).item()
    assert after < before


def test_one_class_has_no_contrastive_term_and_finite_gradients():
    x = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], requires_grad=True)
    loss = relaxed_contrastive_loss(
        x, torch.zeros(3, dtype=torch.long), tau=0.05, threshold=0.7, beta=1.0, hard_negatives=2
    )
    loss.backward()
    contrastive, _ = relaxed_contrastive_terms(
        x, torch.zeros(3, dtype=torch.long), tau=0.05, threshold=0.7, hard_negatives=2
    )
    assert contrastive.tolist() == [0.0, 0.0, 0.0]
    assert torch.isfinite(x.grad).all()


def _check_levels(model, x, widths):
    levels, z = level_features(model.encoder, x)
    assert [f.shape for f in levels] == [(len(x), w) for w in widths]
    assert torch.equal(z, model.encoder(x))
    return levels, z


def test_levels_of_the_mlp_are_its_hidden_layers_before_the_relu():
    torch.manual_seed(0)
    model = MODELS["mlp"]((1, 8, 8), 10).eval()
    x = torch.randn(5, 1, 8, 8)
    levels, z = _check_levels(model, x, [128, 64])
    first = model.encoder[1](x.flatten(1))
    assert torch.equal(levels[0], first) and levels[0].min() < 0  # the pre-activation
    assert torch.equal(torch.relu(levels[1]), z)


def test_levels_of_the_resnet_are_the_stem_and_each_block():
    torch.manual_seed(0)
    model = MODELS["resnet"]((3, 8, 8), 10).eval()
    x = torch.randn(5, 3, 8, 8)
    levels, z = _check_levels(model, x, [16, 16, 32, 64])
    stem = model.encoder[1](model.encoder[0](x)).mean(dim=(2, 3))  # batch norm, before ReLU
    assert torch.allclose(levels[0], stem, atol=1e-6) and levels[0].min() < 0
    assert torch.allclose(levels[-1], z, atol=1e-6)  # the last block pooled is the output


def test_levels_of_the_cnn_are_each_convolution_and_the_dense_layer():
    torch.manual_seed(0)
    model = MODELS["cnn28"]((1, 28, 28), 10).eval()
    _check_levels(model, torch.randn(3, 1, 28, 28), [16, 32, 128])


def test_an_encoder_without_activations_or_blocks_has_its_output_as_one_level():
    model = MODELS["mclr"]((1, 2, 2), 3)
    x = torch.arange(8.0).reshape(2, 1, 2, 2)
    levels, _ = _check_levels(model, x, [4])
    assert torch.equal(levels[0], x.flatten(1))
    lstm = MODELS["char_lstm"]((5,), 7)  # the LSTM encoder is one block: its output
    _check_levels(lstm, torch.randint(0, 7, (2, 5)), [128])


def _client(encoder: nn.Module, dim: int, **settings) -> FedRCLClient:
    client = object.__new__(FedRCLClient)
    model = nn.Module()
    model.encoder = encoder
    model.head = nn.Linear(dim, 2)
    nn.init.zeros_(model.head.weight)  # logits 0: cross-entropy log 2 for every sample
    nn.init.zeros_(model.head.bias)
    client.model = model
    values = dict(tau=TAU, threshold=0.7, beta=2.0, weight=3.0, hard_negatives=2)
    client.settings = FedRCLClient.Settings(**{**values, **settings})
    return client


def test_client_loss_is_cross_entropy_plus_weight_times_the_hand_value():
    identity = nn.Linear(2, 2)
    with torch.no_grad():
        identity.weight.copy_(torch.eye(2))
        identity.bias.zero_()
    for levels in ("multi", "encoder"):  # X ≥ 0: before and after the ReLU alike
        client = _client(nn.Sequential(identity, nn.ReLU()), 2, levels=levels)
        # log 2 + 3 · (.610141 + 2 · .141866) = 3.374815
        expected = math.log(2) + 3.0 * (sum(CONTRASTIVE) / 4 + 2.0 * sum(PENALTY) / 4)
        assert client.loss(X, Y).item() == pytest.approx(expected, rel=1e-5)


def test_client_loss_averages_the_levels():
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(6, 2)
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    pre1 = encoder[0](x)
    pre2 = encoder[2](torch.relu(pre1))
    kwargs = dict(tau=TAU, threshold=0.7, beta=2.0, hard_negatives=2)
    per_level = [relaxed_contrastive_loss(f, y, **kwargs).item() for f in (pre1, pre2)]
    assert per_level[0] != pytest.approx(per_level[1])
    multi = _client(encoder, 3, levels="multi").loss(x, y).item()
    assert multi == pytest.approx(math.log(2) + 3.0 * sum(per_level) / 2, rel=1e-5)
    last = relaxed_contrastive_loss(torch.relu(pre2), y, **kwargs).item()
    single = _client(encoder, 3, levels="encoder").loss(x, y).item()
    assert single == pytest.approx(math.log(2) + 3.0 * last, rel=1e-5)


@pytest.mark.parametrize("levels", ["multi", "encoder"])
def test_two_rounds_in_process(levels):
    checked_rounds(["method=fedrcl", f"method.client.levels={levels}"])
