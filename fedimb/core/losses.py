"""Label-skew aware classification losses (pure torch, no Flower)."""

from __future__ import annotations

import torch
from torch import nn

Tensor = torch.Tensor


def _as_counts(class_counts, like: Tensor) -> Tensor:
    return torch.as_tensor(class_counts, dtype=like.dtype, device=like.device)


def smoothed_prior(class_counts, eps: float, like: Tensor | None = None) -> Tensor:
    """ReBaFL eq. 10: p̂(c) = (1 − eps)·n_c/n + eps/C."""
    counts = _as_counts(class_counts, like if like is not None else torch.zeros(0))
    if counts.sum() <= 0:
        raise ValueError("class_counts must contain at least one sample")
    return (1.0 - eps) * counts / counts.sum() + eps / counts.numel()


def prior_adjusted_logits(logits: Tensor, prior: Tensor) -> Tensor:
    """logits + log prior; classes with zero prior get -inf (no probability mass, no
    gradient), so softmax(z + log p) = p·e^z / Σ p·e^z (ReBaFL eqs. 8–9)."""
    log_prior = torch.log(prior.clamp_min(torch.finfo(prior.dtype).tiny))
    log_prior = torch.where(prior > 0, log_prior, torch.full_like(log_prior, float("-inf")))
    return logits + log_prior


def relaxed_balanced_softmax_loss(
    logits: Tensor, targets: Tensor, class_counts, eps: float
) -> Tensor:
    """ReBaFL eq. 9 with the smoothed prior of eq. 10, averaged over the batch.

    ``eps = 1`` is the plain cross-entropy (uniform prior); ``eps = 0`` is the balanced
    softmax (Ren et al. 2020), where classes with zero count get no probability mass.
    """
    prior = smoothed_prior(class_counts, float(eps), like=logits)
    return nn.functional.cross_entropy(prior_adjusted_logits(logits, prior), targets)


def restricted_softmax_logits(logits: Tensor, class_counts, alpha: float) -> Tensor:
    """FedRS (Li & Zhan, KDD 2021), restricted softmax: the logits of classes the client
    does not hold are scaled by ``alpha`` in [0, 1]; held classes are unchanged. The
    paper scales w_c·h; our head has a bias, so we scale the whole logit."""
    present = _as_counts(class_counts, logits) > 0
    scale = torch.where(
        present, torch.ones_like(logits[0]), torch.full_like(logits[0], float(alpha))
    )
    return logits * scale


def logit_calibration_loss(logits: Tensor, targets: Tensor, class_counts, tau: float) -> Tensor:
    """FedLC (Zhang et al., ICML 2022), calibrated loss: cross-entropy of the logits
    z_c − τ·n_c^(−1/4), with the normaliser over all classes (the common implementation).

    Classes with zero count use n_c = 1e-8 (the common implementation convention), which
    pushes them down by about 100·τ, i.e. they get practically no probability mass.
    """
    counts = _as_counts(class_counts, logits).clamp_min(1e-8)
    return nn.functional.cross_entropy(logits - float(tau) * counts.pow(-0.25), targets)


def masked_kl_divergence(
    student_logits: Tensor, teacher_logits: Tensor, keep: Tensor, tau: float = 1.0
) -> Tensor:
    """τ²·(1/N)·Σ_n Σ_{c kept} p_n(c)·log(p_n(c) / q_n(c)): the distillation KL from the
    teacher's p to the student's q, each the softmax of the logits divided by τ taken over
    the classes ``keep`` marks (N × C, or C for every sample) alone; N is the batch size
    (PyTorch's ``KLDivLoss(reduction="batchmean")``, as FedNTD's and FedVLS's authors use).
    The teacher gets no gradient; a sample with no kept class contributes 0.

    FedNTD keeps every class but the sample's label (the not-true classes), FedVLS the
    classes the client has no sample of (its vacant classes, τ = 1).
    """
    keep = torch.as_tensor(keep, dtype=torch.bool, device=student_logits.device)
    keep = keep.expand_as(student_logits)
    # a finite stand-in for −∞: exp() of it is 0, and no inf − inf poisons a gradient
    low = torch.finfo(student_logits.dtype).min / 2
    log_q = torch.log_softmax((student_logits / tau).masked_fill(~keep, low), dim=1)
    with torch.no_grad():
        log_p = torch.log_softmax((teacher_logits / tau).masked_fill(~keep, low), dim=1)
    terms = (log_p.exp() * (log_p - log_q)).masked_fill(~keep, 0.0)
    return tau**2 * terms.sum() / student_logits.shape[0]


def relaxed_contrastive_terms(
    features: Tensor, labels: Tensor, *, tau: float, threshold: float, hard_negatives: int
) -> tuple[Tensor, Tensor]:
    """FedRCL's two per-anchor terms on one batch of features (Seo et al., CVPR 2024), as
    the authors' ``CLLoss`` computes them with FedRCL's configuration (skynbe/FedRCL,
    ``utils/loss.py``, ``configs/client/fedrcl.yaml``), on s_ij, the cosine similarities
    of the rows of ``features`` (batch × d, flattened past the first dimension).

    - Supervised contrastive term: the positive is the *least* similar sample of the
      anchor's class, the anchor itself counted (s_ii = 1, so it is the positive only
      when no other sample of its class is in the batch); the negatives are the
      ``hard_negatives`` *most* similar samples of other classes (fewer if the batch has
      fewer). ℓ_i = −log(e^{s_ip/τ} / (e^{s_ip/τ} + Σ_n e^{s_in/τ})); 0 without negatives.
    - Divergence penalty: q_i, the least similar other sample of the anchor's class, is a
      negative against the anchor itself when q_i ≥ ``threshold``; otherwise (and when
      the class has no other sample) it is replaced by similarity −1. ℓ_i =
      log(1 + e^{(q_i − s_ii)/τ}); a replaced one is the constant log(1 + e^{−2/τ}).
    """
    flat = nn.functional.normalize(features.flatten(1), dim=1)
    sim = flat @ flat.T
    n = sim.shape[0]
    same = labels[:, None] == labels[None, :]
    own = torch.eye(n, dtype=torch.bool, device=sim.device)
    positive = sim.masked_fill(~same, float("inf")).topk(1, dim=1, largest=False).values
    negatives = sim.masked_fill(same, float("-inf")).topk(min(hard_negatives, n), dim=1).values
    logits = torch.cat([positive, negatives], dim=1) / tau
    contrastive = -torch.log_softmax(logits, dim=1)[:, 0]
    partner = sim.masked_fill(~same | own, float("inf")).topk(1, dim=1, largest=False).values[:, 0]
    over = torch.isfinite(partner) & (partner >= threshold)
    negative = torch.where(over, partner, torch.full_like(partner, -1.0))
    penalty = nn.functional.softplus((negative - sim.diagonal()) / tau)
    return contrastive, penalty


def relaxed_contrastive_loss(
    features: Tensor,
    labels: Tensor,
    *,
    tau: float,
    threshold: float,
    beta: float,
    hard_negatives: int,
) -> Tensor:
    """FedRCL's loss on one level of features: the batch mean of the supervised
    contrastive term plus β times the batch mean of the divergence penalty
    (:func:`relaxed_contrastive_terms`)."""
    contrastive, penalty = relaxed_contrastive_terms(
        features, labels, tau=tau, threshold=threshold, hard_negatives=hard_negatives
    )
    return contrastive.mean() + beta * penalty.mean()
