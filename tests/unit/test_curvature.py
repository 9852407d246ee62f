"""Hessian-vector products and the largest Hessian eigenvalue against the full Hessian."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedimb.core.curvature import hessian_vector_product, top_hessian_eigenvalue


def tiny_problem():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    x, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    return model, x, y


def full_hessian(model, x, y) -> np.ndarray:
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]

    def loss(flat):
        w, b = (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))
        return nn.functional.cross_entropy(x @ w.T + b, y)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return torch.autograd.functional.hessian(loss, flat).numpy()


def test_hessian_vector_product_matches_the_full_hessian():
    model, x, y = tiny_problem()
    vector = [torch.randn_like(p) for p in model.parameters()]
    product = torch.cat(
        [h.reshape(-1) for h in hessian_vector_product(model, x, y, vector)]
    ).numpy()
    expected = full_hessian(model, x, y) @ torch.cat([v.reshape(-1) for v in vector]).numpy()
    np.testing.assert_allclose(product, expected, atol=1e-5)


def test_top_eigenvalue_is_the_largest_of_the_full_hessian():
    model, x, y = tiny_problem()
    eigenvalues = np.linalg.eigvalsh(full_hessian(model, x, y))
    assert top_hessian_eigenvalue(model, x, y, iterations=200) == pytest.approx(
        np.abs(eigenvalues).max(), abs=1e-4
    )
