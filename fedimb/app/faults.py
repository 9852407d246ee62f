"""Deliberate faults, for the fault matrix (tests and ``benchmarks/faults.py``).

``fault.kind`` makes the clients ``fault.clients`` misbehave in ``fault.rounds`` (every
round when empty), whatever the method: raise in fit, return NaN weights, weights of
the wrong shape, an unknown and oversized named array, or no answer for
``fault.hang_seconds``; ``server`` makes the server loop itself raise. The same switch
injects the crafted-client attacks of :mod:`fedimb.app.attacks`. Off by default
(``fault.kind: none``); a real run never needs it.
"""

from __future__ import annotations

import time

import numpy as np
from flwr.client import NumPyClient
from omegaconf import DictConfig

from fedimb.app import attacks
from fedimb.core import payload, protocol
from fedimb.core.errors import ConfigError

KINDS = ("none", "raise", "nan", "shape", "payload", "hang", "server") + attacks.KINDS

#: the size of the injected unknown payload array (float32 values: 8 MiB)
OVERSIZED_PAYLOAD = 2 * 1024 * 1024


class FaultyClient(attacks.WrappedClient):
    """A method's client that misbehaves in :meth:`fit` as ``kind`` says."""

    def __init__(
        self, inner: NumPyClient, kind: str, pid: int, rounds: frozenset[int], hang_seconds: float
    ):
        super().__init__(inner, kind, pid, rounds)
        self.hang_seconds = hang_seconds

    def fit(self, parameters, config):
        server_round = int(config.get(protocol.SERVER_ROUND, 0))
        if self.rounds and server_round not in self.rounds:
            return self.inner.fit(parameters, config)
        if self.kind == "raise":
            raise RuntimeError(
                f"injected fault: client {self.pid} raises in fit (round {server_round})"
            )
        if self.kind == "hang":
            time.sleep(self.hang_seconds)
        weights, num_examples, metrics = self.inner.fit(parameters, config)
        weights = list(weights)
        if self.kind == "nan":
            weights[0] = np.full_like(weights[0], np.nan)
        elif self.kind == "shape":
            weights[0] = weights[0].reshape(-1)[:-1]
        elif self.kind == "payload":
            metrics = {
                **metrics,
                **payload.pack({"injected": np.ones(OVERSIZED_PAYLOAD, dtype=np.float32)}),
            }
        return weights, num_examples, metrics


def check(fault: DictConfig, cfg: DictConfig | None = None) -> None:
    """One-line errors for a malformed ``fault`` section (and, given the run's ``cfg``,
    an attack its method never gives the chance to make)."""
    if str(fault.kind) not in KINDS:
        raise ConfigError(f"fault.kind must be one of {', '.join(KINDS)}, got {fault.kind!r}")
    for key in ("clients", "rounds"):
        values = list(fault.get(key) or [])
        if not all(isinstance(v, int) and v >= 0 for v in values):
            raise ConfigError(f"fault.{key} must be a list of integers >= 0, got {values!r}")
    if cfg is not None:
        attacks.check(
            fault, str(cfg.method.get("name")), str((cfg.get("normalize") or {}).get("name"))
        )
    else:
        attacks.check(fault)


def server_fault(cfg: DictConfig, server_round: int) -> None:
    """Raise in the server loop when the run injects ``fault.kind=server`` into this round."""
    fault = cfg.get("fault")
    if (
        fault is not None
        and fault.kind == "server"
        and (not fault.rounds or server_round in fault.rounds)
    ):
        raise RuntimeError(f"injected fault: the server raises in round {server_round}")


def inject(cfg: DictConfig, pid: int, client: NumPyClient) -> NumPyClient:
    """``client``, wrapped in a :class:`FaultyClient` when the run injects a fault into it."""
    fault = cfg.get("fault")
    if fault is None or fault.kind in ("none", "server") or pid not in set(fault.clients or []):
        return client
    rounds = frozenset(fault.rounds or [])
    if fault.kind in attacks.KINDS:
        return attacks.AttackingClient(
            client, str(fault.kind), pid, rounds, *attacks.settings(fault)
        )
    return FaultyClient(client, str(fault.kind), pid, rounds, float(fault.hang_seconds))
