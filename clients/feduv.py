"""FedUV client (Son et al., "FedUV: Uniformity and Variance for Heterogeneous Federated
Learning", CVPR 2024): cross-entropy plus two regularisers that make local training under
label skew behave as if the client's data were IID. The server is FedAvg's.

The terms follow the authors' code (sonhamin/FedUV, ``algs/feduv.py``: ``UVReg`` and
``train_net_feduv``), on one batch of N samples, C classes:

- classifier variance, on p = softmax(h(z)) (N × C): s_c the standard deviation of
  column c over the batch (unbiased, no epsilon) and γ = 1/√C, the standard deviation of
  a column of the C × C identity (one-hot outputs of C samples, one per class):
  L_V = (1/C)·Σ_c max(0, γ − s_c). A classifier that answers almost the same
  distribution for every sample (biased to the client's few classes) is penalised.
- hyperspherical uniformity, on the encoder's features z (the classifier's input):
  d_ij = ‖z_i − z_j‖² over the pairs i < j, σ = the median of the non-zero d_ij
  (``torch.median``: the lower middle value for an even count; not detached, so it is
  differentiated too): L_U = mean_{i<j} exp(−d_ij / σ), a Gaussian potential whose
  bandwidth follows the batch (no log, unlike Wang & Isola's uniformity loss). The code
  uses the raw features; ``normalize_features`` puts them on the unit sphere first.

loss = CE + variance_weight·L_V + uniformity_weight·L_U. Where the authors' code would
give NaN, a term is defined instead: a batch of one sample has no spread and no pair
(both terms 0; their loader drops the short last batch, ours keeps it), and a batch whose
features all coincide has L_U = 1 (every kernel value is 1) with no gradient. Every
layer trains, with the run's optimiser built afresh each round (no momentum carried over),
as ``train_net_feduv`` builds its SGD each round.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clients.base_settings import setting
from clients.base_shared import AveragingClient
from fedimb.core.errors import at_least


def variance_threshold(num_classes: int) -> float:
    """γ = 1/√C: the unbiased standard deviation of a column of the C × C identity (one 1
    and C − 1 zeros: variance ((1 − 1/C)² + (C − 1)/C²)/(C − 1) = 1/C), which the authors'
    code computes as ``torch.eye(C).std(dim=0).mean()``."""
    return num_classes**-0.5


def classifier_variance_loss(logits: torch.Tensor) -> torch.Tensor:
    """L_V = (1/C)·Σ_c max(0, γ − std_batch(softmax(logits))_c) (``UVReg``'s std term)."""
    n, c = logits.shape
    if n < 2:
        return logits.sum() * 0.0
    spread = torch.softmax(logits, dim=1).std(dim=0)
    return torch.relu(variance_threshold(c) - spread).mean()


def uniformity_loss(features: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """L_U = mean_{i<j} exp(−‖z_i − z_j‖² / σ), σ the median of the non-zero squared
    distances (``UVReg``'s unif term); ``normalize`` first scales each z_i to norm 1."""
    z = features.reshape(features.shape[0], -1)
    if z.shape[0] < 2:
        return z.sum() * 0.0
    if normalize:
        z = nn.functional.normalize(z, dim=1)
    distances = torch.pdist(z, p=2).pow(2)
    apart = distances[distances != 0]
    # all pairs coincide: every kernel value is 1 whatever σ, so any σ gives the limit
    bandwidth = torch.median(apart) if apart.numel() else distances.new_ones(())
    return torch.exp(-distances / bandwidth).mean()


class FedUVClient(AveragingClient):
    """FedAvg's client with the variance and uniformity terms added to its loss."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        # the weight of L_V (the authors' --std_coeff)
        variance_weight: float = setting(at_least(0))
        # the weight of L_U (the authors' --unif_coeff)
        uniformity_weight: float = setting(at_least(0))
        # L2-normalise the features before L_U (the authors' code does not)
        normalize_features: bool = setting()

    def loss(self, x, y):
        z = self.model.encoder(x)
        logits = self.model.head(z)
        s = self.settings
        return (
            nn.functional.cross_entropy(logits, y)
            + s.variance_weight * classifier_variance_loss(logits)
            + s.uniformity_weight * uniformity_loss(z, s.normalize_features)
        )
