"""A fixed simplex equiangular tight frame (ETF) as the classifier (neural collapse:
Papyan et al., PNAS 2020; used as a fixed classifier by Yang et al., NeurIPS 2022 and
FedETF, Li et al., ICCV 2023).

W = sqrt(C/(C−1))·U·(I_C − (1/C)·1 1ᵀ), U ∈ R^{d×C} with orthonormal columns: C unit
columns with pairwise cosine −1/(C−1). The model option ``etf_classifier`` puts a
learnable linear projection and an L2 normalisation after the encoder and the ETF,
scaled by a learnable temperature β, as the head (FedETF's projection layer and
feature normalisation).

The ETF is the same in every process without travelling: U comes from a generator
seeded by the seed the model was built with (``torch.initial_seed()``, which
:func:`fedimb.core.models.build_model` sets to the run's training seed), and W is a
non-persistent buffer, so it is in no ``state_dict``, never averaged and costs no bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from fedimb.core.errors import ConfigError
from fedimb.core.models.base import EncoderHeadNet

#: the keys of the option's value and what each must be
OPTION_KEYS = ("projection_dim", "temperature")


def etf_from_basis(u: torch.Tensor) -> torch.Tensor:
    """sqrt(C/(C−1))·U·(I_C − (1/C)·1 1ᵀ) for U (d × C) with orthonormal columns
    (the simplex ETF as FedETF defines it, after Papyan et al.)."""
    num_classes = u.shape[1]
    centring = torch.eye(num_classes, dtype=u.dtype) - 1.0 / num_classes
    return (num_classes / (num_classes - 1)) ** 0.5 * u @ centring


def simplex_etf(dim: int, num_classes: int, generator: torch.Generator) -> torch.Tensor:
    """The d × C simplex ETF of :func:`etf_from_basis`, U the orthonormal Q factor of a
    Gaussian d × C matrix drawn from ``generator``."""
    if num_classes < 2 or dim < num_classes:
        raise ConfigError(
            f"a simplex ETF needs at least 2 classes and dimension d >= C, got d={dim}, "
            f"C={num_classes}"
        )
    gaussian = torch.randn(dim, num_classes, generator=generator, dtype=torch.float64)
    u, _ = torch.linalg.qr(gaussian)
    return etf_from_basis(u).float()


class L2Normalize(nn.Module):
    """Rows scaled to unit Euclidean norm (FedETF: the normalised feature h/‖h‖)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


class ProjectedEncoder(nn.Module):
    """``backbone`` → learnable linear ``projection`` → L2 normalisation."""

    def __init__(self, backbone: nn.Module, feature_dim: int, dim: int):
        super().__init__()
        self.backbone = backbone
        self.projection = nn.Linear(feature_dim, dim)
        self.normalize = L2Normalize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.normalize(self.projection(self.backbone(x)))


class ETFClassifier(nn.Module):
    """logits = β·hᵀW with W the fixed ETF (a non-persistent buffer ``etf``) and β a
    learnable temperature (a parameter, averaged like any other).

    Code written for a linear head reads ``weight`` (β·Wᵀ, C × d) and ``bias`` (zeros):
    ``functional.linear(h, weight, bias)`` gives the same logits; what trains the head
    as a module (its parameters) trains β alone, since W is fixed."""

    etf: torch.Tensor

    def __init__(self, dim: int, num_classes: int, temperature: float, generator: torch.Generator):
        super().__init__()
        self.register_buffer("etf", simplex_etf(dim, num_classes, generator), persistent=False)
        self.temperature = nn.Parameter(torch.tensor(float(temperature)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.temperature * (h @ self.etf)

    @property
    def weight(self) -> torch.Tensor:
        return self.temperature * self.etf.T

    @property
    def bias(self) -> torch.Tensor:
        return torch.zeros(self.etf.shape[1], device=self.etf.device, dtype=self.etf.dtype)

    def unfreeze(self) -> None:
        """Make W a trainable parameter (FedETF's local adaptation fine-tunes it): only
        for a personal copy, which never travels, since W is then in its state_dict."""
        self.etf = nn.Parameter(self.etf.detach().clone())


def check_etf_option(key: str, value: Any) -> None:
    """One-line ``ConfigError`` unless ``value`` is ``{projection_dim: int >= 2,
    temperature: float > 0}``."""
    if not isinstance(value, Mapping) or set(value) != set(OPTION_KEYS):
        raise ConfigError(f"{key} must be a mapping with exactly the keys {', '.join(OPTION_KEYS)}")
    dim, temperature = value["projection_dim"], value["temperature"]
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
        raise ConfigError(f"{key}.projection_dim must be an integer >= 2, got {dim!r}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or temperature <= 0
    ):
        raise ConfigError(f"{key}.temperature must be a number > 0, got {temperature!r}")


def with_etf_classifier(model: EncoderHeadNet, value: Mapping[str, Any]) -> EncoderHeadNet:
    """``model``'s encoder, a projection to ``projection_dim`` features and their L2
    normalisation as the encoder; the fixed ETF scaled by the learnable temperature
    (initially ``temperature``) as the head. ``projection_dim`` must be at least the
    number of classes (one line otherwise)."""
    dim, num_classes = int(value["projection_dim"]), model.num_classes
    if dim < num_classes:
        raise ConfigError(
            f"method.model_options.etf_classifier.projection_dim must be >= the number of "
            f"classes ({num_classes}) for a simplex ETF, got {dim}"
        )
    generator = torch.Generator().manual_seed(torch.initial_seed())
    encoder = ProjectedEncoder(model.encoder, model.feature_dim, dim)
    wrapped = EncoderHeadNet(encoder, dim, num_classes)
    # replaces the linear head the constructor made (``head`` is declared nn.Linear)
    wrapped.add_module(
        "head", ETFClassifier(dim, num_classes, float(value["temperature"]), generator)
    )
    return wrapped


def sparse_etf_objective(weights: np.ndarray, norm: float) -> tuple[float, np.ndarray]:
    """FedLoGe's SSE-C objective Σ_c (‖w_c‖ − norm)² − mean_c arccos(max_{c'≠c} cos(w_c,
    w_c')) (columns w_c; the cosine clamped to ±0.99999, as in the authors'
    ``util/etf_methods.py``, where ``norm`` is 0.1) and its gradient."""
    num_classes = weights.shape[1]
    norms = np.linalg.norm(weights, axis=0)
    unit = weights / norms
    cosine = unit.T @ unit
    np.fill_diagonal(cosine, -np.inf)
    nearest = cosine.argmax(axis=1)
    best = cosine[np.arange(num_classes), nearest]
    clamped = np.clip(best, -0.99999, 0.99999)
    value = float(((norms - norm) ** 2).sum() - np.arccos(clamped).mean())
    grad = 2 * (norms - norm) * unit
    # d(−arccos t)/dt = 1/sqrt(1 − t²), zero where the clamp holds t
    slope = np.where(clamped == best, 1 / np.sqrt(1 - clamped**2), 0.0) / num_classes
    for c, j in enumerate(nearest):  # d cos(a, b)/d a = (û_b − cos·û_a)/‖a‖, and back
        grad[:, c] += slope[c] * (unit[:, j] - best[c] * unit[:, c]) / norms[c]
        grad[:, j] += slope[c] * (unit[:, c] - best[c] * unit[:, j]) / norms[j]
    return value, grad


def sparse_simplex_etf(
    dim: int,
    num_classes: int,
    sparsity: float,
    steps: int,
    generator: torch.Generator,
    *,
    lr: float,
    norm: float,
) -> torch.Tensor:
    """FedLoGe's static sparse ETF (SSE-C, as the authors' training script builds it,
    ``util/etf_methods.py`` ``gen_sparse_ETF``): the simplex ETF with a random
    ``sparsity`` share of its d·C entries set to zero, the others then adjusted by
    ``steps`` Adam steps (``lr``, β = (0.9, 0.999)) on :func:`sparse_etf_objective`:
    columns of norm ``norm`` as far apart as the zeros allow. The zeros stay zero."""
    etf = simplex_etf(dim, num_classes, generator).double().numpy()
    zeros = torch.randperm(dim * num_classes, generator=generator)[
        : int(sparsity * dim * num_classes)
    ].numpy()
    flat = np.ones(dim * num_classes)
    flat[zeros] = 0.0
    mask = flat.reshape(dim, num_classes)
    if not mask.any(axis=0).all():
        raise ConfigError(f"a sparsity of {sparsity} leaves a class of the sparse ETF all zeros")
    weights, first, second = etf * mask, np.zeros_like(etf), np.zeros_like(etf)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, steps + 1):
        grad = sparse_etf_objective(weights, norm)[1] * mask
        first = beta1 * first + (1 - beta1) * grad
        second = beta2 * second + (1 - beta2) * grad**2
        update = first / (1 - beta1**step) / (np.sqrt(second / (1 - beta2**step)) + eps)
        weights = weights - lr * update
    return torch.from_numpy(weights * mask).float()
