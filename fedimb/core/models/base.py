"""The encoder/head contract every model follows, and parameter conversion."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class EncoderHeadNet(nn.Module):
    """A classifier split into ``encoder(x) -> features`` and ``head(features) -> logits``.

    ``head`` is the final linear layer: methods that treat the classifier separately
    (prototypes, FedBABU, FedConcat, LG-FedAvg) rely on this split.
    """

    def __init__(self, encoder: nn.Module, feature_dim: int, num_classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(feature_dim, num_classes)
        self.feature_dim = feature_dim
        self.num_classes = num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def flat_size(module: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Number of features ``module`` produces for one input of ``input_shape``."""
    with torch.no_grad():
        was_training = module.training
        module.eval()
        out = module(torch.zeros(1, *input_shape))
        module.train(was_training)
    return int(out.reshape(1, -1).shape[1])


def get_weights(model: nn.Module) -> list[np.ndarray]:
    """All parameters and buffers in ``state_dict`` order, as numpy arrays (copies)."""
    return [t.detach().cpu().numpy().copy() for t in model.state_dict().values()]


def set_weights(model: nn.Module, weights: list[np.ndarray]) -> None:
    """Load arrays produced by :func:`get_weights`; shapes must match exactly."""
    state = model.state_dict()
    if len(weights) != len(state):
        raise ValueError(f"expected {len(state)} arrays, got {len(weights)}")
    new_state = {}
    for (name, ref), arr in zip(state.items(), weights):
        if tuple(arr.shape) != tuple(ref.shape):
            raise ValueError(f"{name}: expected shape {tuple(ref.shape)}, got {tuple(arr.shape)}")
        new_state[name] = torch.as_tensor(np.asarray(arr), dtype=ref.dtype)
    model.load_state_dict(new_state, strict=True)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def trainable_indices(model) -> list[int]:
    """Positions of the trainable parameters in the model's state_dict order."""
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    return [i for i, key in enumerate(model.state_dict()) if key in names]
