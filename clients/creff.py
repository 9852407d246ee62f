"""CReFF client (Shang et al., "Federated Learning on Heterogeneous and Long-Tailed Data via
Classifier Re-training with Federated Features", IJCAI 2022, §4; authors' code
shangxinyi/CReFF-FL). Local training is FedAvg's. Before it, with the received global
model's encoder (in evaluation mode) and the server's re-trained classifier φ̃ (sent
beside the model), the client computes for each class c it holds the gradient of the
cross-entropy of φ̃ on real features of class c, w.r.t. φ̃'s weight and bias: the mean
over ``gradient_repeats`` random batches of ``real_batch`` samples of the class (the
authors' code: 10 batches of 32). These "real feature gradients" go to the server with
the model; the server matches its federated features to them (:mod:`strategies.creff`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import nn

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.core import payload, protocol
from fedimb.core.errors import at_least
from fedimb.core.schema import DOWN, FEATURE_DIM, MAX_CLASS, NUM_CLASSES, UP, PayloadSpec
from fedimb.core.training import seeded_generator

#: the batches of the gradients are drawn apart from the training's shuffle
GRADIENT_STREAM = 1

#: server -> client: the classifier re-trained on the federated features (weight, bias)
RETRAINED_WEIGHT = "retrained_weight"
RETRAINED_BIAS = "retrained_bias"
#: client -> server: per class it holds, the real feature gradient w.r.t. weight and bias
GRADIENT_CLASSES = "gradient_classes"
GRADIENT_WEIGHTS = "gradient_weights"
GRADIENT_BIASES = "gradient_biases"
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(RETRAINED_WEIGHT, DOWN, "float", (NUM_CLASSES, FEATURE_DIM)),
    PayloadSpec(RETRAINED_BIAS, DOWN, "float", (NUM_CLASSES,)),
    PayloadSpec(
        GRADIENT_CLASSES,
        UP,
        "integer",
        ("k",),
        nonnegative=True,
        bound=MAX_CLASS,
        required=True,
        unique=True,  # one row per class: a repeated class would count twice in g_c
    ),
    PayloadSpec(GRADIENT_WEIGHTS, UP, "float", ("k", NUM_CLASSES, FEATURE_DIM), required=True),
    # d CE / d bias is a mean of softmax(z) − onehot(y): every entry lies in [−1, 1]
    PayloadSpec(GRADIENT_BIASES, UP, "float", ("k", NUM_CLASSES), bound=1.0, required=True),
)


def real_feature_gradients(
    encoder: nn.Module,
    weight: torch.Tensor,
    bias: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    batch: int,
    repeats: int,
    generator: torch.Generator,
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Per class c in ``y``: the mean over ``repeats`` random batches (up to ``batch``
    samples of class c each) of ∇_(W, b) CE(W·encoder(x) + b, c)."""
    encoder.eval()
    weight = weight.detach().clone().requires_grad_(True)
    bias = bias.detach().clone().requires_grad_(True)
    out = {}
    for c in torch.unique(y).tolist():
        members = torch.nonzero(y == c).flatten()
        grad_w, grad_b = torch.zeros_like(weight), torch.zeros_like(bias)
        for _ in range(repeats):
            pick = members[torch.randperm(len(members), generator=generator)[:batch]]
            with torch.no_grad():
                features = encoder(x[pick])
            labels = torch.full((len(pick),), c, dtype=torch.int64, device=features.device)
            loss = nn.functional.cross_entropy(features @ weight.T + bias, labels)
            gw, gb = torch.autograd.grad(loss, [weight, bias])
            grad_w, grad_b = grad_w + gw / repeats, grad_b + gb / repeats
        out[int(c)] = (grad_w, grad_b)
    return out


class CReFFClient(BaseClient):
    """FedAvg's local training; reports the real feature gradients of its classes."""

    needs_linear_head = True  # the server re-trains the head as a linear layer

    @dataclasses.dataclass(frozen=True)
    class Settings:
        real_batch: int = setting(at_least(1, integer=True))  # samples per class batch
        gradient_repeats: int = setting(at_least(1, integer=True))  # batches averaged

    def before_training(self, config):
        """The gradients under the received model, before it trains (authors' order)."""
        arrays = payload.unpack(config)
        head = self.model.head
        weight = torch.as_tensor(arrays.get(RETRAINED_WEIGHT, head.weight.detach().cpu().numpy()))
        bias = torch.as_tensor(arrays.get(RETRAINED_BIAS, head.bias.detach().cpu().numpy()))
        x = self.data.x[self.data.indices].to(self.device)
        y = self.data.y[self.data.indices].to(self.device)
        self.gradients = real_feature_gradients(
            self.model.encoder,
            weight.to(self.device, torch.float32),
            bias.to(self.device, torch.float32),
            x,
            y,
            self.settings.real_batch,
            self.settings.gradient_repeats,
            seeded_generator(
                int(config.get(protocol.SEED, 0)),
                int(config.get(protocol.SERVER_ROUND, 0)),
                self.data.partition_id,
                GRADIENT_STREAM,
            ),
        )

    def after_training(self, config, result):
        classes = sorted(self.gradients)
        return payload.pack(
            {
                GRADIENT_CLASSES: np.asarray(classes, dtype=np.int64),
                GRADIENT_WEIGHTS: np.stack(
                    [self.gradients[c][0].cpu().numpy() for c in classes]
                ).astype(np.float32),
                GRADIENT_BIASES: np.stack(
                    [self.gradients[c][1].cpu().numpy() for c in classes]
                ).astype(np.float32),
            }
        )
