"""The clients that stand in front of a method's client when a run injects a fault
(:mod:`fedimb.app.faults`) or an attack (:mod:`fedimb.app.attacks`) into it: each
misbehaves as its ``kind`` says and passes everything else to the method's client."""

from __future__ import annotations

import time

import numpy as np
from flwr.client import NumPyClient

from fedimb.app.attacks import (
    FIT_KINDS,
    PROPERTIES_KINDS,
    crafted_fit,
    crafted_properties,
    forged_message,
)
from fedimb.core import payload, protocol

#: the size of the injected unknown payload array (float32 values: 8 MiB)
OVERSIZED_PAYLOAD = 2 * 1024 * 1024


class WrappedClient(NumPyClient):
    """A method's client behind a deliberate misbehaviour (``kind``, by client ``pid`` in
    ``rounds``, all when empty): what a subclass does not override goes to the method's."""

    def __init__(self, inner: NumPyClient, kind: str, pid: int, rounds: frozenset[int]):
        self.inner = inner
        self.kind = kind
        self.pid = pid
        self.rounds = rounds

    def get_properties(self, config):
        return self.inner.get_properties(config)

    def get_parameters(self, config):
        return self.inner.get_parameters(config)

    def evaluate(self, parameters, config):
        return self.inner.evaluate(parameters, config)


class AttackingClient(WrappedClient):
    """A method's client whose answers ``kind`` crafts (:func:`~fedimb.app.attacks.crafted_fit`,
    :func:`~fedimb.app.attacks.crafted_properties`)."""

    def __init__(
        self,
        inner: NumPyClient,
        kind: str,
        pid: int,
        rounds: frozenset[int],
        variant: str,
        scale: float,
        claim,
    ):
        super().__init__(inner, kind, pid, rounds)
        self.variant = variant
        self.scale = scale
        self.claim = claim

    def get_properties(self, config):
        props = self.inner.get_properties(config)
        return (
            crafted_properties(self.kind, self.variant, self.claim, props)
            if self.kind in PROPERTIES_KINDS
            else props
        )

    def fit(self, parameters, config):
        server_round = int(config.get(protocol.SERVER_ROUND, 0))
        if self.kind not in FIT_KINDS or (self.rounds and server_round not in self.rounds):
            return self.inner.fit(parameters, config)
        if self.kind == "forged_event":
            raise RuntimeError(forged_message(self.pid, server_round))
        received = [np.array(p, copy=True) for p in parameters]
        weights, num_examples, metrics = self.inner.fit(parameters, config)
        return crafted_fit(
            self.kind,
            self.variant,
            self.scale,
            received,
            list(weights),
            num_examples,
            dict(metrics),
        )


class FaultyClient(WrappedClient):
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
