"""FedRCL client (Seo et al., "Relaxed Contrastive Learning for Federated Learning", CVPR
2024): cross-entropy plus a supervised contrastive loss on the batch's features, relaxed
by a divergence penalty on same-class pairs that are too similar, which keeps local
training under label skew from collapsing each class onto a point. The server is
FedAvg's.

The loss follows the authors' code (skynbe/FedRCL: ``clients/rcl_client.py``,
``CLLoss`` in ``utils/loss.py``, defaults in ``configs/client/fedrcl.yaml``):

    L = CE(h(z), y) + weight · mean_l [ L_SCL(f_l) + β · L_div(f_l) ],

the two terms as :func:`fedimb.core.losses.relaxed_contrastive_terms` computes them,
each averaged over the batch, and the mean taken over the feature levels f_l.

Levels (``levels``). The authors apply the loss at every stage of their ResNet-18: the
stem and the four stages' outputs, each taken before its final ReLU and averaged over
its spatial positions. ``multi`` maps this onto any encoder: walking its modules in
order (nested ``nn.Sequential`` unpacked), a level is the input of every ``nn.ReLU``
(the pre-activation) and the output of every other module with submodules of its own (a
residual block, whose ReLU is inside it; the LSTM encoder); a feature map is averaged
over its positions. ResNet-8: the stem and the three blocks (one per stage); the CNNs:
each convolution and the dense layer; the MLP: each hidden layer. An encoder with none
(``mclr``) has one level, its output. ``encoder``: the encoder's output alone, the
features the head reads.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clients.base_settings import setting
from clients.base_shared import AveragingClient
from fedimb.core.errors import at_least, one_of
from fedimb.core.losses import relaxed_contrastive_loss

MULTI, ENCODER = "multi", "encoder"


def _units(module: nn.Module):
    """The modules a forward pass through ``module`` runs, nested Sequentials unpacked."""
    if isinstance(module, nn.Sequential):
        for child in module:
            yield from _units(child)
    else:
        yield module


def pooled(t: torch.Tensor) -> torch.Tensor:
    """A level's feature vector: a map (batch × channels × positions...) averaged over its
    positions (the authors' global average pooling); a vector as it is."""
    return t.flatten(2).mean(dim=2) if t.dim() > 2 else t


def level_features(encoder: nn.Module, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The ``multi`` levels of ``encoder`` on ``x`` (module docstring) and its output z,
    from one forward pass."""
    levels = []
    out = x
    for unit in _units(encoder):
        if isinstance(unit, nn.ReLU):
            levels.append(out.clone() if unit.inplace else out)
            out = unit(out)
        else:
            out = unit(out)
            if next(unit.children(), None) is not None:
                levels.append(out)
    if not levels:
        levels.append(out)
    return [pooled(t) for t in levels], out


class FedRCLClient(AveragingClient):
    """FedAvg's client with the relaxed contrastive loss added to its loss."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        tau: float = setting(at_least(0, strict=True))  # τ, the temperature
        threshold: float = setting(at_least(-1))  # λ: a same-class pair this similar is penalised
        beta: float = setting(at_least(0))  # β, the weight of the divergence penalty
        weight: float = setting(at_least(0))  # the weight of the whole contrastive loss
        hard_negatives: int = setting(at_least(1, integer=True))  # negatives per anchor
        levels: str = setting(one_of(MULTI, ENCODER))  # multi | encoder

    def loss(self, x, y):
        s = self.settings
        if s.levels == MULTI:
            levels, z = level_features(self.model.encoder, x)
        else:
            z = self.model.encoder(x)
            levels = [z]
        terms = [
            relaxed_contrastive_loss(
                f, y, tau=s.tau, threshold=s.threshold, beta=s.beta, hard_negatives=s.hard_negatives
            )
            for f in levels
        ]
        loss = nn.functional.cross_entropy(self.model.head(z), y)
        return loss + s.weight * torch.stack(terms).mean()
