"""The fixed simplex-ETF classifier: its entries for C = 3 worked out by hand, its Gram
matrix, one ETF per seed in every build, and none of it in the state_dict."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from fedimb.core.errors import ConfigError
from fedimb.core.models import build_model, get_weights
from fedimb.core.models.etf import ETFClassifier, etf_from_basis, simplex_etf

OPTION = {"etf_classifier": {"projection_dim": 16, "temperature": 10.0}}


def test_etf_of_the_standard_basis_for_three_classes_by_hand():
    # U = (e1, e2, e3) in R^4: W = sqrt(3/2)·(I − J/3) over a zero row; the diagonal
    # entries are sqrt(3/2)·2/3 = sqrt(2/3), the others −sqrt(3/2)/3 = −1/sqrt(6)
    w = etf_from_basis(torch.eye(4, 3, dtype=torch.float64))
    d, o = math.sqrt(2 / 3), -1 / math.sqrt(6)
    expected = torch.tensor([[d, o, o], [o, d, o], [o, o, d], [0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(w, expected, atol=1e-12)
    # unit columns: 2/3 + 2·(1/6) = 1; pairwise cosine: 2·d·o + o² = −2/3 + 1/6 = −1/2
    gram = torch.tensor([[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]])
    assert torch.allclose(w.T @ w, gram.double(), atol=1e-12)


@pytest.mark.parametrize("dim,classes", [(3, 3), (8, 3), (64, 10)])
def test_a_drawn_etf_has_unit_columns_and_cosine_minus_one_over_c_minus_one(dim, classes):
    w = simplex_etf(dim, classes, torch.Generator().manual_seed(0))
    expected = torch.full((classes, classes), -1 / (classes - 1)).fill_diagonal_(1.0)
    assert w.shape == (dim, classes)
    assert torch.allclose(w.T @ w, expected, atol=1e-5)
    assert torch.allclose(w.sum(dim=1), torch.zeros(dim), atol=1e-5)  # columns sum to 0


def test_too_few_dimensions_for_the_classes_are_one_line():
    with pytest.raises(ConfigError, match="d >= C"):
        simplex_etf(2, 3, torch.Generator())
    with pytest.raises(ConfigError, match="projection_dim must be >= the number of classes"):
        build_model(
            {"name": "mlp"},
            (1, 8, 8),
            10,
            seed=0,
            options={"etf_classifier": {"projection_dim": 4, "temperature": 1.0}},
        )


@pytest.mark.parametrize(
    "value,message",
    [
        (16, "mapping"),
        ({"projection_dim": 16}, "mapping"),
        ({"projection_dim": 1, "temperature": 1.0}, "projection_dim"),
        ({"projection_dim": 16, "temperature": 0.0}, "temperature"),
    ],
)
def test_a_bad_option_value_is_one_line(value, message):
    with pytest.raises(ConfigError, match=message) as err:
        build_model({"name": "mlp"}, (1, 8, 8), 10, seed=0, options={"etf_classifier": value})
    assert "\n" not in str(err.value)


def _build(seed):
    return build_model({"name": "mlp"}, (1, 8, 8), 10, seed=seed, options=OPTION)


def test_same_seed_same_etf_other_seed_other_etf():
    first, second, other = _build(3), _build(3), _build(4)
    assert isinstance(first.head, ETFClassifier)
    assert torch.equal(first.head.etf, second.head.etf)
    assert not torch.allclose(first.head.etf, other.head.etf)


def test_the_etf_is_in_no_state_dict_and_costs_no_bytes():
    model = _build(0)
    assert not any("etf" in key for key in model.state_dict())
    assert "head.temperature" in model.state_dict()  # β travels and is averaged
    arrays = get_weights(model)
    assert sum(a.size for a in arrays) == sum(p.numel() for p in model.parameters())
    # a copy keeps it (evaluation copies of the model)
    assert torch.equal(copy.deepcopy(model).head.etf, model.head.etf)


def test_linear_head_readers_see_the_same_logits():
    head = ETFClassifier(5, 3, 2.5, torch.Generator().manual_seed(1))
    h = torch.randn(4, 5)
    assert head.weight.shape == (3, 5) and head.bias.shape == (3,)
    expected = 2.5 * h @ head.etf
    assert torch.allclose(head(h), expected, atol=1e-6)
    assert torch.allclose(nn.functional.linear(h, head.weight, head.bias), expected, atol=1e-6)
    assert [name for name, _ in head.named_parameters()] == ["temperature"]
