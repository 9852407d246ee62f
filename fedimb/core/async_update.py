"""The server steps of asynchronous aggregation, on lists of arrays (one model each).

FedBuff (Nguyen et al., AISTATS 2022, Algorithm 1, lines 11-15): client k's update
Delta_k = y_k - x_{tau_k} (its model less the global model it started from) is weighted by
s(t - tau_k); once K updates are buffered the server steps
x <- x + eta_g * sum_k n_k s_k Delta_k / sum_k n_k. The paper divides by K; fedimb weighs
by sample counts as FedAvg does, which is the paper's rule where the counts are equal.
fedimb computes it as the method's weighted average of the *rebased* models
x + s_k Delta_k (:func:`rebased`), so that the method's own checks and average apply, then
takes the server step (:func:`mixed`).

FedAsync (Xie et al., 2019, Algorithm 1, line 9 and §3): x <- (1 - alpha_t) x + alpha_t y
with alpha_t = alpha * s(t - tau): the arriving model itself is mixed in (:func:`mixed`).

A fresh update (staleness 0, s = 1) is kept as the client sent it and a step of 1 adopts
the average as it is, so that FedBuff with K = all clients, every client at once and no
delay is FedAvg to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Model = list[np.ndarray]


def _floating(array: np.ndarray) -> bool:
    return bool(np.issubdtype(array.dtype, np.floating))


def rebased(current: Model, start: Model, model: Model, factor: float) -> Model:
    """``current + factor * (model - start)`` for floating arrays (integer buffers such as
    batch counters: the client's); ``model`` itself where it started from ``current`` with
    a factor of 1."""
    if factor == 1.0 and start is current:
        return model
    return [
        (c + factor * (m - s)).astype(c.dtype, copy=False) if _floating(c) else m
        for c, s, m in zip(current, start, model)
    ]


def mixed(current: Model, target: Model, weight: float) -> Model:
    """``current + weight * (target - current)`` for floating arrays (``target``'s integer
    arrays); ``target`` itself for a weight of 1."""
    if weight == 1.0:
        return target
    return [
        (c + weight * (t - c)).astype(c.dtype, copy=False) if _floating(c) else t
        for c, t in zip(current, target)
    ]


def participation_factors(applied: np.ndarray, clients: Sequence[int], sizes: Sequence[int]):
    """fedimb's participation balance (docs/asynchronous.md): each buffered client's update
    weighted by 1 / (1 + the updates of it applied so far), scaled so that the buffer's
    sample-weighted mean factor is 1: a fast client that arrives often counts less per
    update, a slow one (under label skew, often the holder of rare classes) more."""
    raw = 1.0 / (1.0 + applied[list(clients)].astype(float))
    sizes_ = np.asarray(sizes, dtype=float)
    return raw * sizes_.sum() / float(np.dot(raw, sizes_))


def fedasync_balance(applied: np.ndarray, client: int) -> float:
    """FedAsync's counterpart: alpha_t scaled by (1 + mean applied) / (1 + this client's
    applied), at most 1, so that a client ahead of the mean mixes in less."""
    return float(min(1.0, (1.0 + applied.mean()) / (1.0 + applied[client])))
