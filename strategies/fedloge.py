"""FedLoGe server (Xiao et al., ICLR 2024), as the authors' code runs it.

It builds the static sparse ETF classifier SSE-C once, from the run's training seed
(:func:`fedimb.core.models.etf.sparse_simplex_etf`: the simplex ETF with a ``sparsity``
share of zeros, the rest adjusted by ``sse_steps`` Adam steps of rate ``sse_lr`` towards
columns of norm ``sse_norm``, as the authors' ``util/etf_methods.py``, which their
``fedloge.py`` imports), and sends it with every instruction: it is fixed, so nothing is
aggregated for it. The model (encoder and global auxiliary head) is averaged as in
FedAvg. The global model the server tests is the global adaptive feature realignment
(GA-FR, authors' ``globaltest_calibra``): every row of the auxiliary head rescaled to
the norm ``realign_norm`` (bias kept), so that the head's norms, which grow with the
classes' frequencies, no longer favour the frequent classes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from clients.fedloge import PAYLOADS, SSE_CLASSIFIER
from fedimb.core import payload
from fedimb.core.errors import ConfigError, at_least
from fedimb.core.models.etf import sparse_simplex_etf
from fedimb.core.settings import setting
from strategies.base.averaging import AveragingStrategy


def global_realignment(weight: np.ndarray, norm: float) -> np.ndarray:
    """GA-FR: each row w_c of the auxiliary head's weight scaled to ``norm``/‖w_c‖."""
    rows = np.linalg.norm(weight, axis=1, keepdims=True)
    return weight * (norm / np.maximum(rows, 1e-12))


def share_below_one(key: str, value) -> None:
    """A setting rule: a share in [0, 1) (a fully sparse ETF has no directions)."""
    at_least(0)(key, value)
    if value >= 1:
        raise ConfigError(f"{key} must be below 1, got {value!r}")


class FedLoGeStrategy(AveragingStrategy):
    """FedAvg; SSE-C to every client; the GA-FR head for the server's test."""

    payloads = PAYLOADS

    @dataclasses.dataclass(frozen=True)
    class Settings:
        sparsity: float = setting(share_below_one)
        sse_steps: int = setting(at_least(0, integer=True))
        sse_lr: float = setting(at_least(0, strict=True))
        sse_norm: float = setting(at_least(0, strict=True))
        realign_norm: float = setting(at_least(0))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        model = run.new_model()
        generator = torch.Generator().manual_seed(int(run.seed))
        self.sse = (
            sparse_simplex_etf(
                model.feature_dim,
                model.num_classes,
                float(s.sparsity),
                int(s.sse_steps),
                generator,
                lr=float(s.sse_lr),
                norm=float(s.sse_norm),
            )
            .T.numpy()
            .astype(np.float32)
        )
        self.realign_norm = float(s.realign_norm)
        self.head_weight = list(model.state_dict()).index("head.weight")

    def fit_config(self, server_round):
        return {**super().fit_config(server_round), **payload.pack({SSE_CLASSIFIER: self.sse})}

    def evaluation_weights(self, parameters):
        weights = list(super().evaluation_weights(parameters))
        i = self.head_weight
        weights[i] = global_realignment(weights[i], self.realign_norm).astype(weights[i].dtype)
        return weights
