"""The registry refuses identity claims that would crash the strategy or hijack a client:
a partition id outside the federation, a missing or non-integer one, a bad sample count,
undecodable label counts, and an id (or device) a connected node already serves. Where
it assigns clients to nodes itself, it asks nothing until a method reads an answer."""

from __future__ import annotations

import pytest
from flwr.common import FitIns, GetPropertiesRes, Parameters
from flwr.server import SimpleClientManager

from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.runtimes.in_process import OK, InProcessNode
from fedimb.core import protocol
from tests.unit.test_base_strategy import make_strategy


class CraftedNode(InProcessNode):
    """A node that answers the identity query with whatever ``props`` says."""

    def __init__(self, cid: str, props: dict):
        super().__init__(cid, -1)
        self.props = props
        self.asked = 0

    def get_properties(self, ins, timeout, group_id):
        self.asked += 1
        return GetPropertiesRes(status=OK, properties=dict(self.props))


def federation(*extra: InProcessNode, honest: int = 3):
    """A registry of capacity 3 and a manager with ``honest`` nodes for partitions 0..
    plus ``extra``."""
    manager = SimpleClientManager()
    nodes = [InProcessNode(f"honest-{i}", i) for i in range(honest)]
    for node in [*nodes, *extra]:
        manager.register(node)
    return ClientRegistry(capacity=3), manager, nodes


@pytest.mark.parametrize(
    "props, why",
    [
        ({"partition_id": 99, "num_examples": 10}, "partition id 99 is outside 0..2"),
        ({"partition_id": 3, "num_examples": 10}, "partition id 3 is outside 0..2"),
        ({"partition_id": -7, "num_examples": 10}, "partition id -7 is outside 0..2"),
        ({"num_examples": 10}, "no partition id"),
        ({"partition_id": "0", "num_examples": 10}, "partition id '0' is not an integer"),
        ({"partition_id": 0.0, "num_examples": 10}, "partition id 0.0 is not an integer"),
        ({"partition_id": True, "num_examples": 10}, "partition id True is not an integer"),
        ({"partition_id": "\nFEDIMB-EVENT " + "x" * 100, "num_examples": 10}, "is not an integer"),
        ({"partition_id": 1}, "no num_examples"),
        ({"partition_id": 1, "num_examples": -1}, "num_examples -1 is not a non-negative integer"),
        (
            {"partition_id": 1, "num_examples": 1.5},
            "num_examples 1.5 is not a non-negative integer",
        ),
        (
            {"partition_id": 1, "num_examples": "10"},
            "num_examples '10' is not a non-negative integer",
        ),
        ({"partition_id": -1, "num_examples": 10}, "own data (partition id -1) but no device key"),
        ({"partition_id": -1, "num_examples": 10, "device_key": 5}, "no device key"),
        (
            {"partition_id": 1, "num_examples": 10, "array:label_counts": b"not an array"},
            "label counts cannot be decoded",
        ),
    ],
)
def test_a_bad_claim_is_refused_with_one_line_and_the_honest_clients_stay(props, why):
    intruder = CraftedNode("intruder", props)
    registry, manager, nodes = federation(intruder)
    registry.refresh(manager)
    assert registry.partition_ids() == [0, 1, 2]
    assert [registry.proxy(pid).inner for pid in range(3)] == nodes
    assert registry.partition_of(intruder) is None
    assert why in registry.refused["intruder"] and "\n" not in registry.refused["intruder"]
    assert len(registry.refused["intruder"]) < 120
    assert registry.take_refusals() == [f"node intruder refused: {registry.refused['intruder']}"]
    assert registry.take_refusals() == []  # reported once


def test_a_second_node_claiming_a_live_nodes_id_never_replaces_it_and_takes_it_once_free():
    intruder = CraftedNode("intruder", {"partition_id": 0, "num_examples": 10})
    registry, manager, nodes = federation(intruder)
    registry.refresh(manager)
    registry.refresh(manager)
    assert registry.proxy(0).inner is nodes[0] and registry.partition_of(intruder) is None
    assert intruder.asked == 1  # a refused node is not asked again while no node leaves
    assert registry.refused == {"intruder": "partition id 0 is already served by node honest-0"}
    assert len(registry.take_refusals()) == 1
    # the holder disconnects: the id is free again, so the waiting node (e.g. a restarted one)
    # gets it
    manager.unregister(nodes[0])
    registry.refresh(manager)
    assert registry.proxy(0).inner is intruder and registry.partition_ids() == [0, 1, 2]
    assert registry.refused == {}


def test_a_restarted_node_gets_its_id_back():
    registry, manager, nodes = federation()
    registry.refresh(manager)
    manager.unregister(nodes[1])
    back = InProcessNode("honest-1-restarted", 1)
    manager.register(back)
    registry.refresh(manager)
    assert registry.proxy(1).inner is back and registry.refused == {}


def test_a_second_node_with_the_same_device_data_is_refused():
    device = {"partition_id": -1, "device_key": "pi-a", "num_examples": 40}
    first, copy = CraftedNode("pi", device), CraftedNode("pi-copy", device)
    registry, manager, nodes = federation(first, copy, honest=2)
    registry.refresh(manager)
    assert registry.partition_ids() == [0, 1, 2] and registry.proxy(2).inner is first
    assert registry.refused == {"pi-copy": "its data is already served by node pi"}


@pytest.mark.parametrize("claim", [0, 99, None])
def test_the_strategy_survives_bad_claims_and_notes_them_in_the_round_log(claim):
    strategy, manager, nodes = make_strategy(
        "dropout=none", "runtime.client_ids=claimed", num_clients=3
    )
    props = {"num_examples": 10} if claim is None else {"partition_id": claim, "num_examples": 10}
    manager.register(CraftedNode("intruder", props))
    params = strategy.initialize_parameters(manager)
    instructions = strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    assert [
        proxy.inner for proxy, _ in instructions
    ] == nodes  # partition 0's instructions go to its own node
    assert [m for m in strategy.round_log.messages if m.startswith("node intruder refused: ")]


# ------------------------------------------------------------ clients assigned to nodes
class CountingNode(InProcessNode):
    """An in-process node with a Flower-like node id that counts what it is asked."""

    def __init__(self, node_id: int, answers_as: int | None = None):
        super().__init__(f"n{node_id}", -1)
        self.node_id = node_id
        self.answers_as = answers_as
        self.asked: list[dict] = []

    def get_properties(self, ins, timeout, group_id):
        self.asked.append(dict(ins.config))
        pid = (
            ins.config[protocol.ASSIGNED_PARTITION] if self.answers_as is None else self.answers_as
        )
        return GetPropertiesRes(
            status=OK, properties={"partition_id": pid, "num_examples": 10 + pid}
        )


def assigned_federation(node_ids, capacity=3, answers_as=None):
    manager = SimpleClientManager()
    nodes = [CountingNode(n, (answers_as or {}).get(n)) for n in node_ids]
    for node in nodes:
        manager.register(node)
    registry = ClientRegistry(capacity=capacity, assigned=True)
    registry.refresh(manager)
    return registry, manager, nodes


def test_assigned_clients_follow_the_node_ids_and_no_node_is_asked():
    registry, _, nodes = assigned_federation([2**63 + 5, 7, 2**40])
    assert registry.partition_ids() == [0, 1, 2]
    assert [registry.proxy(pid).inner.node_id for pid in range(3)] == [7, 2**40, 2**63 + 5]
    assert all(node.asked == [] for node in nodes)


def test_nodes_beyond_the_clients_stay_idle_and_a_new_node_takes_a_free_id():
    registry, manager, nodes = assigned_federation([30, 10, 20, 40])
    assert registry.partition_ids() == [0, 1, 2]
    assert registry.partition_of(nodes[3]) is None  # node 40: a fourth node, no client
    manager.unregister(nodes[0])  # node 30 (client 2) leaves
    registry.refresh(manager)
    assert registry.proxy(2).inner is nodes[3]


def test_every_instruction_names_the_assigned_client_in_a_copy():
    registry, _, nodes = assigned_federation([3, 1, 2])
    ins = FitIns(Parameters(tensors=[], tensor_type=""), {"lr": 0.1})
    seen = []
    for node in nodes:
        node.fit = lambda ins, timeout, group_id, seen=seen: seen.append(dict(ins.config))
    for pid in range(3):
        registry.proxy(pid).fit(ins, None, 0)
    assert [c[protocol.ASSIGNED_PARTITION] for c in seen] == [0, 1, 2]
    assert ins.config == {"lr": 0.1}  # the shared instruction is untouched


def test_answers_are_asked_once_when_read_and_must_name_the_assigned_client():
    registry, _, nodes = assigned_federation([1, 2, 3], answers_as={3: 0})
    infos = registry.infos([0, 1, 2])
    assert {p: i.num_examples for p, i in infos.items()} == {0: 10, 1: 11}
    assert registry.partition_ids() == [0, 1]  # client 2's node answered as client 0
    assert registry.refused == {"n3": "answers as client 0, but serves client 2"}
    registry.infos([0, 1])
    assert [len(node.asked) for node in nodes] == [1, 1, 1]  # asked once each
    assert nodes[0].asked[0][protocol.ASSIGNED_PARTITION] == 0


class FlakyNode(InProcessNode):
    """A node whose first properties query fails (its ClientApp is still starting)."""

    def __init__(self, cid: str, pid: int):
        super().__init__(cid, pid)
        self.asked = 0

    def get_properties(self, ins, timeout, group_id):
        self.asked += 1
        if self.asked == 1:
            raise TimeoutError("still loading its data")
        return super().get_properties(ins, timeout, group_id)


def test_a_node_that_did_not_answer_is_asked_again_though_nobody_joined():
    flaky = FlakyNode("flaky", 2)
    registry, manager, _ = federation(flaky, honest=2)
    registry.refresh(manager)
    assert registry.partition_ids() == [0, 1]
    registry.refresh(manager)
    assert registry.partition_ids() == [0, 1, 2] and flaky.asked == 2
    registry.refresh(manager)
    assert flaky.asked == 2  # settled: nobody is asked again


# ------------------------------------------------------------ nodes that rejoin (deployment)
class RejoiningManager(SimpleClientManager):
    """A client manager at which ``late`` (re)connects on the ``polls``-th look at how
    many nodes are connected: a node restarting while the round waits for it."""

    def __init__(self, late: InProcessNode | None = None, polls: int = 0):
        super().__init__()
        self.late, self.polls = late, polls

    def num_available(self) -> int:
        self.polls -= 1
        if self.late is not None and self.polls == 0:
            self.register(self.late)
        return super().num_available()


def sampled_in_round_2(rejoin_timeout: float | None, comes_back: bool):
    """Clients sampled in round 2 after client 2's node left following round 1 (under a
    runtime without ``rejoin_timeout`` where it is None)."""
    runtime = (
        ["runtime=in_process"]
        if rejoin_timeout is None
        else [
            "runtime=deployment",
            f"runtime.rejoin_timeout={rejoin_timeout}",
        ]
    )
    strategy, _, nodes = make_strategy("dropout=none", *runtime, num_clients=3)
    manager = RejoiningManager(nodes[2] if comes_back else None, polls=3)
    for node in nodes:
        manager.register(node)
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    manager.unregister(nodes[2])
    manager.polls = 3
    strategy.begin_round(2)
    instructions = strategy.configure_fit(server_round=2, parameters=params, client_manager=manager)
    return sorted(strategy.registry.partition_of(p) for p, _ in instructions), strategy


def test_a_round_waits_for_a_node_that_rejoins_when_asked_to():
    assert sampled_in_round_2(rejoin_timeout=300, comes_back=True)[0] == [0, 1, 2]
    # by default a round takes whoever is connected
    assert sampled_in_round_2(rejoin_timeout=0, comes_back=True)[0] == [0, 1]
    # and so does one under a runtime that has no such setting
    assert sampled_in_round_2(rejoin_timeout=None, comes_back=True)[0] == [0, 1]


def test_a_node_that_does_not_rejoin_in_time_is_noted():
    sampled, strategy = sampled_in_round_2(rejoin_timeout=0.1, comes_back=False)
    assert sampled == [0, 1]
    assert strategy.round_log.messages == [
        "1 of 3 clients not connected after waiting up to 0.1 s (runtime.rejoin_timeout) "
        "for their nodes to rejoin"
    ]


def test_a_null_connect_timeout_waits_for_every_node_without_a_limit(monkeypatch):
    from fedimb.app.nodes import registry

    class Arriving:
        """A client manager whose nodes connect one per check."""

        def __init__(self):
            self.checks = 0

        def num_available(self):
            self.checks += 1
            return self.checks

    monkeypatch.setattr(registry.time, "sleep", lambda seconds: None)
    manager = Arriving()
    registry.wait_for_nodes(manager, 5, None)
    assert manager.checks == 5  # it stopped when the fifth node connected, not at a clock
