"""Omniscient attacks on robust aggregation (``fault.kind=alie|ipm``): the attackers send
models crafted from the round's honest updates, which a server-side wrapper makes.

Both attacks were designed against Byzantine-robust rules (median, trimmed mean, Krum,
Bulyan) and need the round's honest updates. They are run here as the robust-aggregation
literature evaluates its rules: with omniscient attackers, the worst case, who know every
honest update of the round. So the attack is made on the server, by a wrapper installed
only where the configuration asks for it (:func:`fedimb.app.faults.injection.server_class` picks
:class:`OmniscientServer`, which puts :class:`OmniscientStrategy` in front of the run's
strategy); the round loop has no attack branch. The attackers' clients train honestly;
before the strategy aggregates a round of ``fault.rounds`` (every round when empty), the
fit result of each client of ``fault.clients`` (by partition id, the strategy's registry)
is replaced by ``w_sent + u``: ``w_sent`` the model the attacker was sent, ``u`` the
crafted update made from the other clients' updates ``w_client − w_sent`` of the round
(the attackers' own honest replies are not among them). The attacker's reply keeps its
own ``num_examples`` and metrics; integer arrays (BatchNorm's counter) keep its own values.

- ``alie`` (A Little Is Enough; Baruch, Baruch & Goldberg, NeurIPS 2019): u = μ − z·σ,
  μ and σ the coordinate-wise mean and (sample, ddof = 1, as ``torch.std``) standard
  deviation of the honest updates, z = z_max of the paper: s = ⌊n/2 + 1⌋ − f,
  z = Φ⁻¹((n − s)/n), n the round's updates (honest and attacking), f the attackers among
  them; ``fault.scale`` sets z instead.
- ``ipm`` (inner-product manipulation; Xie, Koyejo & Gupta, UAI 2020, "Fall of
  Empires"): u = −ε · mean of the honest updates, ε = ``fault.scale`` (default 0.1, the
  paper's small ε that defeats Krum-type rules; against the coordinate-wise median the
  paper's attack needs a large ε instead, ε ≫ 1: set ``fault.scale``).

:func:`alie_update` and :func:`ipm_update` are pure numpy, so a test checks their values
on hand-made updates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from flwr.common import FitRes, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy
from omegaconf import DictConfig

from fedimb.app.server.round_loop import FedImbServer
from fedimb.app.server.wrapped_strategy import WrappedStrategy

logger = logging.getLogger(__name__)

#: ``fault.scale`` of ``ipm`` when left null (``alie``'s null scale: z = z_max)
IPM_EPSILON = 0.1

Update = Sequence[np.ndarray]  # one client's update, array by array


def alie_z(num_updates: int, num_attackers: int) -> float:
    """z_max of ALIE: s = ⌊n/2 + 1⌋ − f, z = Φ⁻¹((n − s)/n) (n updates, f attacking);
    defined while the attackers are a minority (s >= 1)."""
    from scipy.stats import norm  # imported where an ALIE run needs it

    n, f = int(num_updates), int(num_attackers)
    s = n // 2 + 1 - f  # ⌊n/2 + 1⌋ for an integer n
    if f < 1 or s < 1:
        raise ValueError(
            f"ALIE's z_max needs 1 <= f attackers < n/2 + 1 of the n updates (got f = {f} "
            f"of n = {n}): set fault.scale (z) instead"
        )
    return float(norm.ppf((n - s) / n))


def _layers(honest_updates: Sequence[Update]) -> list[np.ndarray]:
    """The honest updates stacked array by array, in float64: (k, *shape) each."""
    if not honest_updates:
        raise ValueError("no honest update to craft from")
    return [
        np.stack([np.asarray(u[j], dtype=np.float64) for u in honest_updates])
        for j in range(len(honest_updates[0]))
    ]


def alie_update(
    honest_updates: Sequence[Update], num_attackers: int, z: float | None = None
) -> list[np.ndarray]:
    """ALIE's update μ − z·σ (float64, array by array) from the honest updates; z: z_max
    of n = honest + ``num_attackers`` updates when None. σ is the sample standard deviation
    (ddof = 1; 0 for a single honest update)."""
    z = alie_z(len(honest_updates) + num_attackers, num_attackers) if z is None else float(z)
    return [
        layer.mean(axis=0) - z * (layer.std(axis=0, ddof=1) if len(layer) > 1 else 0.0)
        for layer in _layers(honest_updates)
    ]


def ipm_update(honest_updates: Sequence[Update], epsilon: float) -> list[np.ndarray]:
    """IPM's update −ε · mean of the honest updates (float64, array by array)."""
    return [-float(epsilon) * layer.mean(axis=0) for layer in _layers(honest_updates)]


def _floating(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating)


def _reply_update(sent: list[np.ndarray] | None, res: FitRes) -> list[np.ndarray] | None:
    """The float arrays of a reply minus those of the model it was sent (float64); None
    for a reply the strategy would reject anyway (another layout, undecodable, NaN/Inf)."""
    if sent is None:
        return None
    try:
        arrays = parameters_to_ndarrays(res.parameters)
    except Exception:  # a malformed reply of another fault: not an honest update
        return None
    if [(a.shape, a.dtype) for a in arrays] != [(b.shape, b.dtype) for b in sent]:
        return None
    update = [a.astype(np.float64) - b for a, b in zip(arrays, sent) if _floating(b)]
    return update if all(np.isfinite(u).all() for u in update) else None


def _crafted_model(sent: list[np.ndarray], update: list[np.ndarray], own: FitRes) -> list:
    """``sent`` + ``update`` in its float arrays (their dtypes), the attacker's own values
    (else the sent ones) in the others."""
    try:
        arrays = parameters_to_ndarrays(own.parameters)
    except Exception:
        arrays = []
    same = [(a.shape, a.dtype) for a in arrays] == [(b.shape, b.dtype) for b in sent]
    crafted, floats = [], iter(update)
    for j, base in enumerate(sent):
        if _floating(base):
            crafted.append((base.astype(np.float64) + next(floats)).astype(base.dtype))
        else:
            crafted.append(arrays[j] if same else base)
    return crafted


class OmniscientStrategy(WrappedStrategy):
    """The run's strategy (``inner``) behind an omniscient attack: its ``aggregate_fit``
    receives the attackers' replies replaced by the crafted models (:meth:`crafted`);
    every other hook and attribute, read or set, is the strategy's."""

    own = frozenset({"inner", "kind", "attackers", "rounds", "scale"})

    def __init__(self, inner: Strategy, fault: DictConfig):
        kind = str(fault.kind)
        scale = fault.get("scale")
        super().__init__(inner)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "attackers", frozenset(int(c) for c in fault.clients or []))
        object.__setattr__(self, "rounds", frozenset(int(r) for r in fault.rounds or []))
        object.__setattr__(
            self,
            "scale",
            float(scale) if scale is not None else (IPM_EPSILON if kind == "ipm" else None),
        )

    def __repr__(self) -> str:
        return f"fault.kind={self.kind} (clients {sorted(self.attackers)}) around {self.inner!r}"

    def aggregate_fit(self, server_round, results, failures):
        return self.inner.aggregate_fit(server_round, self.crafted(server_round, results), failures)

    def crafted(
        self, server_round: int, results: list[tuple[ClientProxy, FitRes]]
    ) -> list[tuple[ClientProxy, FitRes]]:
        """``results`` with each attacker's reply replaced by its crafted model, in the
        attack's rounds; the honest replies as they came."""
        if self.rounds and server_round not in self.rounds:
            return results
        registry, sent = self.inner.registry, self.inner.sent_models
        pids = [registry.partition_of(proxy) for proxy, _ in results]
        attacking = [i for i, pid in enumerate(pids) if pid in self.attackers]
        if not attacking:
            return results
        bases = [sent[pids[i]] for i in attacking if pids[i] in sent]
        shapes = [b.shape for b in bases[0] if _floating(b)] if bases else []
        honest: list[list[np.ndarray]] = []
        for pid, (_, res) in zip(pids, results):
            update = None if pid in self.attackers else _reply_update(sent.get(pid), res)
            if update is not None and [a.shape for a in update] == shapes:
                honest.append(update)
        if not honest:
            self.inner.round_log.note(
                f"fault.kind={self.kind}: no honest update to craft from; the attackers' "
                "replies go as they came"
            )
            return results
        update = (
            alie_update(honest, len(attacking), self.scale)
            if self.kind == "alie"
            else ipm_update(honest, float(self.scale or IPM_EPSILON))
        )
        out = list(results)
        for i in attacking:
            proxy, res = results[i]
            base = sent.get(pids[i])
            if base is None or [b.shape for b in base if _floating(b)] != shapes:
                continue
            model = _crafted_model(base, update, res)
            out[i] = (
                proxy,
                FitRes(
                    status=res.status,
                    parameters=ndarrays_to_parameters(model),
                    num_examples=res.num_examples,
                    metrics=res.metrics,
                ),
            )
        logger.info(
            "round %s: fault.kind=%s: %s attacker(s) crafted from %s honest update(s)",
            server_round,
            self.kind,
            len(attacking),
            len(honest),
        )
        return out


class OmniscientServer(FedImbServer):
    """The round loop of a run with ``fault.kind=alie|ipm``: fedimb's, over the run's
    strategy behind :class:`OmniscientStrategy`."""

    def __init__(
        self, strategy: Strategy, max_workers: int | None = None, overlap_evaluation: bool = True
    ):
        fault = strategy.run.cfg.fault  # type: ignore[attr-defined]
        super().__init__(OmniscientStrategy(strategy, fault), max_workers, overlap_evaluation)
