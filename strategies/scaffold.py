"""SCAFFOLD server (Karimireddy et al., ICML 2020, Algorithm 1).

The server control variate c (one array per trainable parameter) travels to clients as
named payloads ``control.<j>``; clients return their control-variate change as
``control_delta.<j>``. With S the participants and N all clients (Algorithm 1,
lines 16–17): x ← x + η_g·mean_{i∈S}(y_i − x) and c ← c + |S|/N·mean_{i∈S}(Δc_i).

``weighting``: ``uniform`` averages the models uniformly over the participants and
c ← c + 1/N·Σ_{i∈S} Δc_i, as the paper does (its objective weights the clients equally);
``samples`` weights the models by their sample counts, as FedAvg and many public
implementations do, and then c ← c + Σ_{i∈S} n_i/n·Δc_i (n the samples of all N clients),
so that c tracks the gradient of the same sample-weighted objective the model follows.
Buffers (e.g. BatchNorm statistics) are averaged like the parameters. Each Δc_i is checked
against its declaration (:data:`clients.scaffold.PAYLOADS`: the parameter's
shape, finite, entries within ``CONTROL_BOUND``) before it is read, and a c that is not
finite is never adopted.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clients.scaffold import CONTROL, CONTROL_DELTA, PAYLOADS
from fedimb.core import payload, protocol
from fedimb.core.errors import one_of
from fedimb.core.models import trainable_indices
from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate


class ScaffoldStrategy(BaseStrategy):
    """Stochastic controlled averaging."""

    payloads = PAYLOADS
    checkpoint_attributes = ("control",)

    @dataclasses.dataclass(frozen=True)
    class Settings:
        server_lr: float = setting()
        weighting: str = setting(one_of("uniform", "samples"))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.server_lr = float(s.server_lr)
        self.weighting = s.weighting
        initial = run.initial_weights()
        self.param_index = trainable_indices(run.new_model())
        self.control = [np.zeros_like(initial[i], dtype=np.float32) for i in self.param_index]
        self._samples_of: tuple[int, ...] | None = None  # the clients _samples_total counts
        self._samples_total = 0

    def fit_config(self, server_round):
        return {
            **super().fit_config(server_round),
            **payload.pack({protocol.indexed(CONTROL, j): c for j, c in enumerate(self.control)}),
        }

    def control_shares(self, updates: list[ClientUpdate]) -> list[float]:
        """Each participant's share of its Δc_i in c (Algorithm 1, line 17): 1/N with
        uniform weighting; with sample weighting n_i / Σ_j n_j over all N clients, so that
        c stays the same weighted mean of the c_i as the one the model average follows."""
        if self.weighting == "uniform":
            return [1.0 / self.run.num_clients] * len(updates)
        total = self.connected_samples()
        return [u.num_examples / max(total, 1) for u in updates]

    def connected_samples(self) -> int:
        """n: the training samples of every connected client, as each counts them. The
        server holds the partitions, so it counts them itself (once per set of connected
        clients): asking every client would cost a message to every idle device. A
        device with its own data is taken at its word."""
        pids = tuple(self.registry.partition_ids())
        if self._samples_of != pids:
            own = [p for p in pids if self.registry.has_own_data(p)]
            held = sorted(set(pids) - set(own))
            self._samples_total = sum(
                int(self.run.client_label_counts(p).sum()) for p in held
            ) + sum(info.num_examples for info in self.registry.infos(own).values())
            self._samples_of = pids
        return self._samples_total

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        x = self.current_weights
        base = (
            [u.num_examples for u in updates]
            if self.weighting == "samples"
            else np.ones(len(updates))
        )
        mean = self.average_models(
            [u.arrays for u in updates], self.aggregation_weights(updates, base)
        )
        if mean is None:  # too few updates for the aggregation rule: model and c stay
            return None
        new = []
        for g, m in zip(x, mean):
            value = g + self.server_lr * (m.astype(np.float64) - g)
            new.append(
                np.rint(value).astype(g.dtype)
                if np.issubdtype(g.dtype, np.integer)
                else value.astype(g.dtype)
            )
        shares = self.control_shares(updates)
        deltas = self.bounded_control_deltas(updates)
        self.adopt_control(
            [
                (
                    self.control[j]
                    + sum(w * delta[j].astype(np.float64) for w, delta in zip(shares, deltas))
                ).astype(np.float32)
                for j in range(len(self.control))
            ]
        )
        self.round_log.extra["control_norm"] = float(
            np.sqrt(sum(float((c.astype(np.float64) ** 2).sum()) for c in self.control))
        )
        return new

    def bounded_control_deltas(self, updates: list[ClientUpdate]) -> list[list[np.ndarray]]:
        """Each client's Δc_i (all layers), its L2 norm at most ``influence.statistic_ratio``
        times the others' median: a delta within the declared bound (1e6) is finite but
        would still move c, which every client adds to each gradient step."""
        count = len(self.control)
        deltas = [
            [u.payload[protocol.indexed(CONTROL_DELTA, j)] for j in range(count)] for u in updates
        ]
        flat = [np.concatenate([d.ravel() for d in delta]) for delta in deltas]
        bounded = self.bounded_vectors([u.partition_id for u in updates], flat, "control_delta")
        out = []
        for vector, delta in zip(bounded, deltas):
            sizes = np.cumsum([d.size for d in delta])[:-1]
            out.append([p.reshape(d.shape) for p, d in zip(np.split(vector, sizes), delta)])
        return out

    def adopt_control(self, control: list[np.ndarray]) -> None:
        """The new server control variate, unless it is not finite: it is broadcast to
        every client, so the previous one is kept (and the round log says why)."""
        if all(np.all(np.isfinite(c)) for c in control):
            self.control = control
        else:
            self.round_log.note("server control variate not finite: previous one kept")
