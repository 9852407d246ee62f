"""FedLoGe client (Xiao et al., "FedLoGe: Joint Local and Generic Federated Learning
under Long-tailed Data", ICLR 2024), as the authors' code (ZackZikaiXiao/FedLoGe:
``fedloge.py``, ``util/update_baseline.py``) trains it.

Per mini-batch, with f the encoder's features: the encoder learns against the static
sparse ETF classifier SSE-C (a fixed C × d matrix S, logits f·Sᵀ, no bias; built once by
the server and sent with every instruction), by cross-entropy; the model's head, the
global auxiliary head, learns on the detached features by cross-entropy and is averaged
by the server; a local head, never sent, learns the same way and persists in
its client state. The three gradients are disjoint, so one optimiser over their sum
takes the authors' three steps.

The personal model is the local adaptive feature realignment (LA-FR, authors' code
``update_weights_norm_init`` and ``localtest``): logits l(f) + a(f), l the local head and
a the global auxiliary head whose class-c row is rescaled to the norm of the local
head's row c (bias kept); classes absent from the client's training data are masked.
The global model is the global realignment (GA-FR), applied by the server.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from fedimb.core import payload, protocol
from fedimb.core.errors import ConfigError
from fedimb.core.models import EncoderHeadNet, get_weights, set_weights
from fedimb.core.schema import DOWN, FEATURE_DIM, NUM_CLASSES, PayloadSpec

SSE_CLASSIFIER = "sse_classifier"  # server -> client: S, the static sparse ETF classifier
PAYLOADS = protocol.PERSONAL_PAYLOADS + (
    PayloadSpec(SSE_CLASSIFIER, DOWN, "float", (NUM_CLASSES, FEATURE_DIM)),
)
LOCAL_HEAD = "fedloge_local_head"  # client state: the local head's weight and bias
#: the logit of a class the client has never seen (the authors set its weights to −1e10)
MASKED_LOGIT = -1e9


def local_realignment(aux: nn.Linear, local: nn.Linear) -> nn.Linear:
    """LA-FR as the authors' code computes it: row c of the auxiliary head becomes
    w^a_c·‖w^l_c‖ (the global row, scaled by the norm of the local head's row c, which
    grows with the client's share of class c); the auxiliary bias is kept."""
    realigned = copy.deepcopy(aux)
    with torch.no_grad():
        realigned.weight.mul_(local.weight.norm(dim=1, keepdim=True))
    return realigned


class RealignedPersonalHead(nn.Module):
    """l(f) + LA-FR(a)(f), with the logits of the masked classes set to ``MASKED_LOGIT``."""

    def __init__(self, aux: nn.Linear, local: nn.Linear, absent: torch.Tensor):
        super().__init__()
        self.local = local
        self.realigned = local_realignment(aux, local)
        self.register_buffer("absent", absent, persistent=False)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        logits = self.local(f) + self.realigned(f)
        return logits.masked_fill(self.absent, MASKED_LOGIT)


class FedLoGeClient(PersonalEvaluation, BaseClient):
    """Encoder against SSE-C; global auxiliary head and local head on detached features."""

    trains_encoder_alone = True  # the encoder learns against SSE-C, apart from the head

    def local_head(self, config) -> nn.Linear:
        """The local head from its client state; a fresh linear layer (seeded by the run
        and the client) before the client's first round."""
        model: EncoderHeadNet = self.model
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(config.get(protocol.SEED, 0)) * 100003 + self.data.partition_id)
            head = nn.Linear(model.feature_dim, model.num_classes)
        stored = self.load_state(LOCAL_HEAD)
        if stored is not None:
            set_weights(head, [stored["weight"], stored["bias"]])
        return head.to(self.device)

    def before_training(self, config):
        sse = payload.unpack(config).get(SSE_CLASSIFIER)
        if sse is None:
            raise ConfigError("FedLoGe: the instruction carries no SSE-C (sse_classifier)")
        self.sse = torch.as_tensor(np.asarray(sse), dtype=torch.float32, device=self.device)
        self.local = self.local_head(config)

    def trainable_parameters(self):
        return [*self.model.parameters(), *self.local.parameters()]

    def loss(self, x, y):
        features = self.model.encoder(x)
        detached = features.detach()
        ce = nn.functional.cross_entropy
        return (
            ce(features @ self.sse.T, y)  # the encoder against SSE-C
            + ce(self.model.head(detached), y)  # the global auxiliary head
            + ce(self.local(detached), y)  # the local head
        )

    def after_training(self, config, result):
        weight, bias = get_weights(self.local)
        self.save_state(LOCAL_HEAD, {"weight": weight, "bias": bias})
        return {}

    def personal_model(self, parameters, config):
        """The received encoder with the LA-FR head (module docstring)."""
        self.set_parameters(parameters)
        absent = torch.as_tensor(np.asarray(self.data.label_counts) == 0, device=self.device)
        personal = copy.deepcopy(self.model)
        personal.add_module(
            "head", RealignedPersonalHead(personal.head, self.local_head(config), absent)
        )
        return personal.eval()
