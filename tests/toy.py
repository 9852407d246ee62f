"""A two-parameter classifier and a client around it, for hand-computed update rules."""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import Context, RecordDict
from torch import nn

from fedimb.core.data.client_data import ClientData


class TwoParameters(nn.Module):
    """logits = (w_0·x, w_1·x) for a scalar input x: two classes, two parameters."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x * self.w


def toy_client(client_class, x: np.ndarray, y: np.ndarray):
    """``client_class`` on the samples (x, y) with a :class:`TwoParameters` model."""
    context = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    data = ClientData(
        partition_id=0,
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        indices=torch.arange(len(y)),
        num_classes=2,
        label_counts=np.bincount(y, minlength=2),
    )
    return client_class(
        context=context, data=data, model=TwoParameters(), device=torch.device("cpu")
    )
