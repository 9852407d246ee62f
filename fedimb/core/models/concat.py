"""FedConcat's final model: K frozen encoders side by side and one linear classifier."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from fedimb.core import payload
from fedimb.core.models.base import EncoderHeadNet, set_weights


class ConcatEncoder(nn.Module):
    """Concatenates the features of several encoders: (N, ...) -> (N, K·d)."""

    def __init__(self, encoders: list[nn.Module]):
        super().__init__()
        self.parts = nn.ModuleList(encoders)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([encoder(x) for encoder in self.parts], dim=1)


def concatenated_model(
    template: EncoderHeadNet, encoder_weights: list[list[np.ndarray]]
) -> EncoderHeadNet:
    """An :class:`EncoderHeadNet` whose encoder is K copies of ``template.encoder`` loaded
    with ``encoder_weights`` (one list of arrays per encoder, in state_dict order) and
    whose head is a fresh linear layer on the K·d concatenated features."""
    parts = []
    for weights in encoder_weights:
        encoder = copy.deepcopy(template.encoder)
        set_weights(encoder, weights)
        parts.append(encoder)
    return EncoderHeadNet(
        ConcatEncoder(parts), template.feature_dim * len(parts), template.num_classes
    )


def split_model_weights(
    template: EncoderHeadNet, weights: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Full-model arrays (state_dict order) -> (encoder arrays, head arrays)."""
    keys = list(template.state_dict())
    encoder = [w for k, w in zip(keys, weights) if k.startswith("encoder.")]
    head = [w for k, w in zip(keys, weights) if k.startswith("head.")]
    if len(encoder) + len(head) != len(weights):
        raise ValueError("weights do not match the model's encoder/head split")
    return encoder, head


#: the prefix of the K frozen encoders' arrays, ``encoder.<k>.<j>`` (server -> client)
ENCODERS = "encoder."


def encoders_to_payload(encoder_weights: list[list[np.ndarray]]) -> dict:
    """The K encoders' weights as named payload arrays ``encoder.<k>.<j>``."""
    return payload.pack(
        {f"{ENCODERS}{k}.{j}": w for k, ws in enumerate(encoder_weights) for j, w in enumerate(ws)}
    )


def encoders_from_arrays(arrays: dict[str, np.ndarray]) -> list[list[np.ndarray]]:
    """The K encoders' weights back from :func:`encoders_to_payload`'s arrays."""
    grouped: dict[int, dict[int, np.ndarray]] = {}
    for key, value in arrays.items():
        if key.startswith(ENCODERS):
            k, j = key[len(ENCODERS) :].split(".")
            grouped.setdefault(int(k), {})[int(j)] = value
    return [[grouped[k][j] for j in sorted(grouped[k])] for k in sorted(grouped)]
