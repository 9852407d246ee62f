"""FedDecorr client (Shi et al., "Towards Understanding and Mitigating Dimensional
Collapse in Heterogeneous Federated Learning", ICLR 2023, §4): cross-entropy plus
β·L_FedDecorr on the batch's representations z = f(x) (the encoder's output), which keeps
them from collapsing into a few dimensions under label skew. The server is FedAvg's.

With Ẑ the batch z-scored per dimension and K = ẐᵀẐ / N its correlation matrix (N the
batch size, d the representation size), the two forms (setting ``loss_form``):

- ``paper``: L = ‖K‖²_F / d², the regulariser as §4 writes it (population standard
  deviation, so diag K = 1: the diagonal adds the constant 1/d and no gradient).
- ``authors_code``: what the authors' ``FedDecorrLoss`` computes: Ẑ with the unbiased
  variance, the mean of the squared off-diagonal entries of ẐᵀẐ (not divided by N),
  divided by N, i.e. ((N − 1)² / N)·mean_{i≠j} K_ij². Its gradient is exactly
  (N − 1)²/N · d/(d − 1) times the paper form's (the unbiased Ẑ is sqrt((N − 1)/N) times
  the population one; up to the variance guard), and the authors' β values (0.1; 0.05
  on CIFAR-100) were tuned with it.

A batch of one sample has no correlation: the term is 0 there (as in the authors' code).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clients.base_settings import setting
from clients.base_shared import AveragingClient
from fedimb.core.errors import at_least, one_of

PAPER, AUTHORS_CODE = "paper", "authors_code"
#: z-scoring's guard against a dimension with zero variance
EPS = 1e-8


def decorrelation_loss(z: torch.Tensor) -> torch.Tensor:
    """‖K‖²_F / d² for the correlation matrix K of the rows of ``z`` (batch × d), §4."""
    n, d = z.shape
    if n < 2:
        return z.sum() * 0.0
    centred = z - z.mean(dim=0)
    standardised = centred / torch.sqrt(centred.pow(2).mean(dim=0) + EPS)
    correlation = standardised.T @ standardised / n
    return correlation.pow(2).sum() / d**2


def authors_decorrelation_loss(z: torch.Tensor) -> torch.Tensor:
    """((N − 1)² / N)·mean_{i≠j} K_ij², the authors' code's form (unbiased variance)."""
    n, d = z.shape
    if n < 2:
        return z.sum() * 0.0
    centred = z - z.mean(dim=0)
    standardised = centred / torch.sqrt(centred.var(dim=0) + EPS)
    gram = standardised.T @ standardised
    off_diagonal = ~torch.eye(d, dtype=torch.bool, device=z.device)
    return gram[off_diagonal].pow(2).mean() / n


LOSS_FORMS = {PAPER: decorrelation_loss, AUTHORS_CODE: authors_decorrelation_loss}


class FedDecorrClient(AveragingClient):
    """FedAvg's client with the decorrelation term added to its loss."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        beta: float = setting(at_least(0))  # β, the weight of the decorrelation term
        loss_form: str = setting(one_of(*LOSS_FORMS))  # paper | authors_code

    def loss(self, x, y):
        z = self.model.encoder(x)
        loss = nn.functional.cross_entropy(self.model.head(z), y)
        return loss + self.settings.beta * LOSS_FORMS[self.settings.loss_form](z)
