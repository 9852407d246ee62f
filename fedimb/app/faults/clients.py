"""The clients that stand in front of a method's client when a run injects a fault
(:mod:`fedimb.app.faults.injection`) or an attack (:mod:`fedimb.app.faults.attacks`) into it: each
misbehaves as its ``kind`` says and passes everything else to the method's client."""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
from flwr.client import NumPyClient

from fedimb.app.faults.attacks import (
    FIT_KINDS,
    PROPERTIES_KINDS,
    crafted_fit,
    crafted_properties,
    forged_message,
    forged_output,
)
from fedimb.app.faults.method_attacks import FIT, PROPERTIES, MethodAttack
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
    """A method's client whose answers ``kind`` crafts
    (:func:`~fedimb.app.faults.attacks.crafted_fit`,
    :func:`~fedimb.app.faults.attacks.crafted_properties`)."""

    def __init__(
        self,
        inner: NumPyClient,
        kind: str,
        pid: int,
        rounds: frozenset[int],
        variant: str,
        scale: float,
        claim,
        attack: MethodAttack | None = None,
    ):
        super().__init__(inner, kind, pid, rounds)
        self.variant = variant
        self.scale = scale
        self.claim = claim
        self.attack = attack  # the method's own attack of this kind, where it is one

    def attacks(self, on: str, framework_kinds: tuple[str, ...]) -> bool:
        return self.attack.on == on if self.attack is not None else self.kind in framework_kinds

    def get_properties(self, config):
        props = self.inner.get_properties(config)
        if not self.attacks(PROPERTIES, PROPERTIES_KINDS):
            return props
        return crafted_properties(self.kind, self.variant, self.claim, props, self.attack)

    def fit(self, parameters, config):
        server_round = int(config.get(protocol.SERVER_ROUND, 0))
        if not self.attacks(FIT, FIT_KINDS) or (self.rounds and server_round not in self.rounds):
            return self.inner.fit(parameters, config)
        if self.kind == "forged_print":  # print and log the forged events, then raise them
            for line in forged_output(self.pid, server_round):
                print(line, flush=True)
                logging.getLogger(__name__).warning(line)
        if self.kind in ("forged_event", "forged_print"):
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
            self.attack,
        )


def flipped_labels(labels, num_classes: int):
    """The label-flipping map y -> C − 1 − y (C classes; numpy arrays and torch tensors):
    the label-flipping attack of Fang et al., "Local Model Poisoning Attacks to
    Byzantine-Robust Federated Learning" (USENIX Security 2020), also used as a baseline by
    Tolpegin et al., "Data Poisoning Attacks Against Federated Learning Systems" (ESORICS
    2020), whose own attack flips one source class to one target class instead."""
    return num_classes - 1 - labels


def label_flipped(data):
    """A client's :class:`~fedimb.core.data.client_data.ClientData` with its training
    labels flipped (:func:`flipped_labels`) and its label counts those of the flipped
    labels: its local test labels, and the labels tensor the process's other clients
    share, are left as they were (the flipped tensor is a copy)."""
    y = data.y.clone()
    y[data.indices] = flipped_labels(y[data.indices], data.num_classes)
    counts = np.asarray(data.label_counts)[::-1].copy()  # the map permutes the classes
    return dataclasses.replace(data, y=y, label_counts=counts)


class LabelFlippingClient(WrappedClient):
    """A method's client trained on flipped labels (``fault.kind=label_flip``): an honest
    client in every other way, whose data was poisoned. Its data is flipped once, when
    the wrapper is made (:func:`label_flipped`; a client is made for each message), so
    every hook of the method sees the flipped labels and their counts, in every round
    (the federated evaluation on the client's training split too; its local test split
    keeps its labels). The label counts it reports in its properties answer are those of
    its real data: the map permutes the classes, so the counts (and any other per-class
    array its client class names in ``class_histograms``) of the flipped labels, reversed."""

    def __init__(self, inner: NumPyClient, kind: str, pid: int, rounds: frozenset[int]):
        super().__init__(inner, kind, pid, rounds)
        data = getattr(inner, "data", None)
        if data is None or not hasattr(data, "indices"):
            raise TypeError(
                f"fault.kind={kind} needs a client that holds its data as ClientData "
                f"(clients.base.BaseClient), got {type(inner).__name__}"
            )
        inner.data = label_flipped(data)  # type: ignore[attr-defined]

    def get_properties(self, config):
        props = self.inner.get_properties(config)
        arrays = payload.unpack(props)
        real = {
            name: np.flip(arrays[name], axis=-1).copy()
            for name in getattr(type(self.inner), "class_histograms", (protocol.LABEL_COUNTS,))
            if name in arrays
        }
        return {**props, **payload.pack(real)} if real else props

    def fit(self, parameters, config):
        return self.inner.fit(parameters, config)


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
