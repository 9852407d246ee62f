"""Deliberate faults, for the fault matrix (tests and ``benchmarks/faults.py``).

``fault.kind`` makes the clients ``fault.clients`` misbehave in ``fault.rounds`` (every
round when empty), whatever the method: raise in fit, return NaN weights, weights of
the wrong shape, an unknown and oversized named array, or no answer for
``fault.hang_seconds``; ``server`` makes the server loop itself raise. The same switch
injects the crafted-client attacks of :mod:`fedimb.app.faults.attacks`. Off by default
(``fault.kind: none``); a real run never needs it.

A fault is a wrapper that the runtimes install only where the configuration asks for
one: :func:`client_factory` puts a misbehaving client (:mod:`fedimb.app.faults.clients`)
in front of the method's, :func:`server_class` picks a round loop that raises, or one
whose strategy receives the omniscient attackers' crafted models
(:mod:`fedimb.app.faults.omniscient`). The round loop and the client's construction
have no fault branch.
"""

from __future__ import annotations

from collections.abc import Callable

from flwr.app import Context
from flwr.client import NumPyClient
from omegaconf import DictConfig

from fedimb.app.faults import attacks
from fedimb.app.faults.clients import AttackingClient, FaultyClient, LabelFlippingClient
from fedimb.app.faults.method_attacks import declaring_methods, method_attacks
from fedimb.app.faults.omniscient import OmniscientServer
from fedimb.app.server.phases import PhaseClock
from fedimb.app.server.round_loop import FedImbServer
from fedimb.core.errors import ConfigError

KINDS = ("none", "raise", "nan", "shape", "payload", "hang", "server") + attacks.KINDS
#: the kinds that leave every client as it is (the server misbehaves, or attacks for them)
SERVER_KINDS = ("none", "server") + attacks.OMNISCIENT_KINDS


def check(fault: DictConfig, cfg: DictConfig) -> None:
    """One-line errors for a malformed ``fault`` section, or an attack the run's method
    never gives the chance to make (a method's own attacks are declared by its client:
    :mod:`~fedimb.app.faults.method_attacks`)."""
    kind = str(fault.kind)
    own = {} if kind in KINDS else method_attacks(cfg)
    if kind not in own and kind not in KINDS:
        elsewhere = declaring_methods()
        if kind in elsewhere:
            raise ConfigError(
                f"fault.kind={kind} needs method {' or '.join(elsewhere[kind])}, "
                f"got {cfg.method.get('name')!r}"
            )
        raise ConfigError(
            f"fault.kind must be one of {', '.join([*KINDS, *elsewhere])}, got {fault.kind!r}"
        )
    for key in ("clients", "rounds"):
        values = list(fault.get(key) or [])
        if not all(isinstance(v, int) and v >= 0 for v in values):
            raise ConfigError(f"fault.{key} must be a list of integers >= 0, got {values!r}")
    attacks.check(
        fault,
        own.get(kind),
        str((cfg.get("normalize") or {}).get("name")),
        int(cfg.num_clients) if cfg.get("num_clients") is not None else None,
    )


ClientFactory = Callable[[DictConfig, Context, int, PhaseClock | None], NumPyClient]


def client_factory(cfg: DictConfig, factory: ClientFactory) -> ClientFactory:
    """``factory`` itself, or where the run injects a fault or an attack into clients, a
    factory whose clients :func:`inject` wraps."""
    fault = cfg.get("fault")
    if fault is None or fault.kind in SERVER_KINDS:
        return factory

    def faulty_factory(
        cfg: DictConfig, context: Context, pid: int, clock: PhaseClock | None = None
    ) -> NumPyClient:
        return inject(cfg, pid, factory(cfg, context, pid, clock))

    return faulty_factory


def inject(cfg: DictConfig, pid: int, client: NumPyClient) -> NumPyClient:
    """``client``, wrapped in a :class:`~fedimb.app.faults.clients.FaultyClient` (or an
    :class:`~fedimb.app.faults.clients.AttackingClient`, a
    :class:`~fedimb.app.faults.clients.LabelFlippingClient`) when the run injects a fault
    into it."""
    fault = cfg.get("fault")
    if fault is None or fault.kind in SERVER_KINDS or pid not in set(fault.clients or []):
        return client
    rounds = frozenset(fault.rounds or [])
    if fault.kind in attacks.DATA_KINDS:
        return LabelFlippingClient(client, str(fault.kind), pid, rounds)
    own = None if fault.kind in KINDS else method_attacks(cfg).get(str(fault.kind))
    if fault.kind in attacks.KINDS or own is not None:
        return AttackingClient(
            client, str(fault.kind), pid, rounds, *attacks.settings(fault, own), attack=own
        )
    return FaultyClient(client, str(fault.kind), pid, rounds, float(fault.hang_seconds))


class FaultyServer(FedImbServer):
    """The round loop of a run with ``fault.kind=server``: it raises at the start of the
    rounds ``fault.rounds`` (every round when empty)."""

    def run_round(
        self, server_round: int, timeout: float | None = None, overlap: bool = False
    ) -> dict | None:
        fault = self.strategy.run.cfg.fault
        if not fault.rounds or server_round in fault.rounds:
            raise RuntimeError(f"injected fault: the server raises in round {server_round}")
        return super().run_round(server_round, timeout, overlap)


def server_class(cfg: DictConfig) -> type[FedImbServer]:
    """The round loop the run's configuration asks for: :class:`FaultyServer` where it
    injects ``fault.kind=server``, :class:`~fedimb.app.faults.omniscient.OmniscientServer`
    where it asks for ``alie`` or ``ipm``, else
    :class:`~fedimb.app.server.round_loop.FedImbServer`."""
    fault = cfg.get("fault")
    if fault is not None and fault.kind == "server":
        return FaultyServer
    if fault is not None and fault.kind in attacks.OMNISCIENT_KINDS:
        return OmniscientServer
    return FedImbServer
