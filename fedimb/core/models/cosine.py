"""A cosine classifier whose class weights are prototypes spread on the unit hypersphere:
logits = s·cos(z, p_c) (FedNH, Dai et al., AAAI 2023; a NormFace-style head).

The prototypes are the head's ``weight`` (C x d, like a linear layer's), so they travel
inside the model and a checkpoint keeps them; the scale s is a learnable scalar. A method
that keeps the prototypes fixed during local training (FedNH) leaves ``weight`` out of
its optimiser; one that trains them gets an ordinary cosine classifier.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from fedimb.core.errors import ConfigError, check_number
from fedimb.core.models.base import EncoderHeadNet

#: the head's parameter holding the prototypes, as ``state_dict`` names it in the model
PROTOTYPE_KEY = "head.weight"
#: iterations of the repulsion that spreads more prototypes than dimensions
SPREAD_STEPS = 500


def unit_rows(w: torch.Tensor) -> torch.Tensor:
    """Each row divided by its L2 norm (norms below 1e-12 count as 1e-12)."""
    return w / w.norm(dim=1, keepdim=True).clamp(min=1e-12)


@functools.lru_cache(maxsize=8)
def spread_on_sphere(num_classes: int, dim: int, seed: int) -> torch.Tensor:
    """C unit vectors in R^d spread uniformly over the sphere (FedNH's "uniformity"),
    drawn from a generator seeded with ``seed`` (cached: every model a run builds
    reuses them; callers copy).

    C <= d: orthonormal rows (pairwise cosine 0), the authors' code's choice (an
    orthogonal initialisation of the C x d matrix): the QR factor of a Gaussian d x C
    matrix, signs fixed by R's diagonal so that the draw alone decides the result.
    C > d (no orthonormal set exists; the authors' code then yields rows that are not
    unit): normalised Gaussian directions pushed apart by projected gradient steps on
    the log-sum-exp of the pairwise cosines (temperature 10), a smooth stand-in for the
    largest one; it reaches the best spread where that is known (3 in the plane at
    120°, 4 in space as a tetrahedron, 5 in the plane as a pentagon)."""
    generator = torch.Generator().manual_seed(int(seed))
    gaussian = torch.randn(dim, num_classes, generator=generator, dtype=torch.float64)
    if num_classes <= dim:
        q, r = torch.linalg.qr(gaussian)
        signs = torch.sign(torch.diagonal(r))
        signs[signs == 0] = 1.0
        return (q * signs).T.contiguous().float()
    w = unit_rows(gaussian.T.contiguous())
    diagonal = torch.eye(num_classes, dtype=torch.bool)
    for _ in range(SPREAD_STEPS):
        weights = torch.softmax((10.0 * (w @ w.T)).masked_fill(diagonal, -torch.inf).flatten(), 0)
        # the gradient of the log-sum-exp / 10 in W is 2·P·W (P the softmax weights)
        w = unit_rows(w - 0.02 * num_classes * (weights.reshape(num_classes, -1) @ w))
    return w.float()


class CosineHead(nn.Module):
    """logits = s·⟨z/‖z‖, p_c/‖p_c‖⟩ for every class c; ``weight`` holds the p_c (unit
    rows at initialisation), ``scale`` holds s."""

    def __init__(self, prototypes: torch.Tensor, scale: float):
        super().__init__()
        self.weight = nn.Parameter(prototypes.clone())
        self.scale = nn.Parameter(torch.tensor([float(scale)]))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.scale * unit_rows(z) @ unit_rows(self.weight).T


def check_scale(key: str, value) -> None:
    """The option's value, the initial scale s, must be a number above 0."""
    check_number(key, value, 0, strict=True)


def with_cosine_head(model: EncoderHeadNet, scale: float) -> EncoderHeadNet:
    """``model`` with its linear head replaced by a :class:`CosineHead` of initial scale
    ``scale``. The prototypes are drawn from a generator seeded with the seed the
    model's own initialisation was drawn from (``torch.initial_seed()``, which
    :func:`fedimb.core.models.build_model` sets from the training seed), so every
    process builds the same ones, whatever the backbone drew before."""
    seed = torch.initial_seed()
    prototypes = spread_on_sphere(model.num_classes, model.feature_dim, seed)
    model.head = CosineHead(prototypes, scale)  # type: ignore[assignment]  # any head module
    return model


def prototype_slot(model: nn.Module) -> int:
    """Position of the prototypes among the model's arrays (``state_dict`` order), for
    methods that replace them in an aggregate; a one-line error for a model without a
    cosine head."""
    if not isinstance(getattr(model, "head", None), CosineHead):
        raise ConfigError(
            "this method needs the cosine head: set method.model_options.cosine_head "
            "to the initial scale s"
        )
    return list(model.state_dict()).index(PROTOTYPE_KEY)
