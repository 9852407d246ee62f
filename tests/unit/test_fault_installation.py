"""A fault is a wrapper the configuration installs: without one the runtimes build the
plain client and the plain round loop; with one, only the clients and rounds it names
misbehave."""

from __future__ import annotations

import pytest
from flwr.client import NumPyClient
from omegaconf import OmegaConf

from fedimb.app.faults import injection as faults
from fedimb.app.faults.clients import FaultyClient
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.app.server.round_loop import FedImbServer


class Honest(NumPyClient):
    pass


def honest_factory(cfg, context, pid, clock=None):
    return Honest()


def fault_cfg(kind: str, clients=(1,), rounds=()):
    return OmegaConf.create(
        {"fault": {"kind": kind, "clients": list(clients), "rounds": list(rounds)}}
    )


@pytest.mark.parametrize("cfg", [OmegaConf.create({}), fault_cfg("none")])
def test_without_a_fault_nothing_is_wrapped(cfg):
    assert faults.client_factory(cfg, honest_factory) is honest_factory
    assert faults.server_class(cfg) is FedImbServer


def test_a_client_fault_wraps_the_clients_it_names_only():
    cfg = OmegaConf.merge(fault_cfg("nan"), {"fault": {"hang_seconds": 1}})
    factory = faults.client_factory(cfg, honest_factory)
    assert isinstance(factory(cfg, None, 0), Honest)
    faulty = factory(cfg, None, 1)
    assert isinstance(faulty, FaultyClient) and isinstance(faulty.inner, Honest)
    assert faults.server_class(cfg) is FedImbServer


def test_a_server_fault_leaves_the_clients_alone_and_raises_in_its_rounds():
    assert faults.client_factory(fault_cfg("server"), honest_factory) is honest_factory
    fed = InProcessFederation(
        ["dataset=digits", "num_clients=2", "dropout=none", "fault.kind=server", "fault.rounds=[2]"]
    )
    assert isinstance(fed.server, faults.FaultyServer)
    fed.round(1)
    with pytest.raises(RuntimeError, match="injected fault: the server raises in round 2"):
        fed.round(2)
