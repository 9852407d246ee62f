"""Curvature of a model's cross-entropy loss: exact Hessian-vector products by double
back-propagation and the largest Hessian eigenvalue by power iteration.

Per-FedAvg's HF variant needs the product; the largest eigenvalue λ_max bounds the
inner step size α of MAML-type updates (the paper assumes α ≤ 1/L, and
(I − αH)∇f points uphill along directions with α·λ > 1)."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def hessian_vector_product(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, vector: list[torch.Tensor]
) -> list[torch.Tensor]:
    """∇²f(w; x, y)·v for the mean cross-entropy f, by differentiating ⟨∇f, v⟩."""
    params = trainable(model)
    grads = torch.autograd.grad(nn.functional.cross_entropy(model(x), y), params, create_graph=True)
    dot = cast(torch.Tensor, sum((g * v.detach()).sum() for g, v in zip(grads, vector)))
    return [h.detach() for h in torch.autograd.grad(dot, params)]


def top_hessian_eigenvalue(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, iterations: int = 30, seed: int = 0
) -> float:
    """The Hessian eigenvalue of largest magnitude of the mean cross-entropy on (x, y),
    by power iteration from a seeded random vector (the Rayleigh quotient of the last
    iterate). The model is evaluated in its current mode."""
    params = trainable(model)
    generator = torch.Generator().manual_seed(seed)
    vector = [torch.randn(p.shape, generator=generator).to(p.device) for p in params]
    estimate = 0.0
    for _ in range(iterations):
        norm = torch.sqrt(cast(torch.Tensor, sum((v**2).sum() for v in vector)))
        vector = [v / norm for v in vector]
        product = hessian_vector_product(model, x, y, vector)
        estimate = float(sum((h * v).sum() for h, v in zip(product, vector)))
        vector = product
    return estimate
