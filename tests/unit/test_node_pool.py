"""Fewer simulation nodes than clients (``runtime.nodes``): every client is served by a
node borrowed for one instruction, no node serves two at once, the first discovery waits
for the pool's nodes only, and a pool is refused where a node's Context would carry one
client's state to another."""

from __future__ import annotations

import threading

import pytest
from flwr.common import FitIns, FitRes, Parameters
from flwr.server import SimpleClientManager

from fedimb.app.configuration import compose as config
from fedimb.app.configuration.runtime_rules import POOL_NODES, node_count
from fedimb.app.nodes.node_proxy import ClientFailure
from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.runtimes.node_pool import NodePool, PooledRegistry, client_registry
from fedimb.cli.launch.flower_run import federation_config
from fedimb.core import protocol
from fedimb.core.errors import ConfigError
from tests.unit.test_base_strategy import make_strategy
from tests.unit.test_registry import CountingNode

EMPTY = Parameters(tensors=[], tensor_type="")


class BusyNode(CountingNode):
    """A node whose fit records the client it served and, while ``gate`` is closed, waits."""

    def __init__(self, node_id: int, gate: threading.Event | None = None):
        super().__init__(node_id)
        self.gate = gate
        self.served: list[int] = []
        self.busy = 0
        self.most_busy = 0

    def fit(self, ins, timeout, group_id):
        self.busy += 1
        self.most_busy = max(self.most_busy, self.busy)
        if self.gate is not None:
            self.gate.wait(10)
        self.served.append(ins.config[protocol.ASSIGNED_PARTITION])
        self.busy -= 1
        return FitRes(status=None, parameters=EMPTY, num_examples=1, metrics={})


def pooled_federation(node_ids, capacity=5, gate=None):
    manager = SimpleClientManager()
    nodes = [BusyNode(n, gate) for n in node_ids]
    for node in nodes:
        manager.register(node)
    registry = PooledRegistry(len(nodes), capacity)
    registry.refresh(manager)
    return registry, manager, nodes


def fit_in_parallel(registry, pids, timeout=None) -> list[BaseException | None]:
    """Every client's fit at once, as the round loop's threads send them; each one's error."""
    errors: list[BaseException | None] = [None] * len(pids)

    def one(i, pid):
        try:
            registry.proxy(pid).fit(FitIns(EMPTY, {}), timeout, 0)
        except BaseException as err:  # noqa: BLE001 - the test reads it
            errors[i] = err

    threads = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(pids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_every_client_is_served_by_a_borrowed_node_one_instruction_at_a_time():
    gate = threading.Event()
    registry, _, nodes = pooled_federation([30, 10], capacity=5, gate=gate)
    assert registry.partition_ids() == [0, 1, 2, 3, 4]
    assert all(node.asked == [] for node in nodes)  # nothing asked before round 1
    timer = threading.Timer(0.3, gate.set)  # both nodes busy until then, three wait
    timer.start()
    assert fit_in_parallel(registry, [0, 1, 2, 3, 4]) == [None] * 5
    assert sorted(nodes[0].served + nodes[1].served) == [0, 1, 2, 3, 4]
    assert [node.most_busy for node in nodes] == [1, 1]
    assert all(registry.partition_of(registry.proxy(p)) == p for p in range(5))


def test_the_lowest_free_node_is_lent_first_and_given_back():
    registry, _, nodes = pooled_federation([30, 10, 20])
    for pid in (4, 2, 0):
        registry.proxy(pid).fit(FitIns(EMPTY, {}), None, 0)
    assert [node.served for node in nodes] == [[], [4, 2, 0], []]  # node 10, each time


def test_a_client_waiting_past_its_timeout_for_a_node_fails_naming_itself():
    gate = threading.Event()
    registry, _, nodes = pooled_federation([7], capacity=2, gate=gate)
    busy = threading.Thread(target=registry.proxy(0).fit, args=(FitIns(EMPTY, {}), None, 0))
    busy.start()
    while not nodes[0].busy:
        threading.Event().wait(0.01)
    (error,) = fit_in_parallel(registry, [1], timeout=0.2)
    gate.set()
    busy.join()
    assert isinstance(error, ClientFailure)
    assert "client 1 on node (none free): NoFreeNode: none of the 1 nodes" in str(error)


def test_a_failure_names_the_node_the_instruction_went_to():
    registry, _, nodes = pooled_federation([42])
    nodes[0].fit = lambda ins, timeout, group_id: (_ for _ in ()).throw(RuntimeError("boom"))
    with pytest.raises(ClientFailure, match="client 3 on node 42: .*boom"):
        registry.proxy(3).fit(FitIns(EMPTY, {}), None, 0)


def test_answers_are_asked_through_the_pool_and_must_name_the_client():
    registry, _, nodes = pooled_federation([1, 2], capacity=4)
    infos = registry.infos([0, 3])
    assert {p: i.num_examples for p, i in infos.items()} == {0: 10, 3: 13}
    assert sum(len(node.asked) for node in nodes) == 2


def test_a_pool_without_nodes_fails_every_call():
    pool = NodePool()
    with pytest.raises(TimeoutError, match="no node of the pool is connected"):
        with pool.borrow(None):
            pass


def test_a_departed_node_is_lent_no_more():
    registry, manager, nodes = pooled_federation([1, 2])
    manager.unregister(nodes[0])
    registry.refresh(manager)
    for pid in range(3):
        registry.proxy(pid).fit(FitIns(EMPTY, {}), None, 0)
    assert nodes[0].served == [] and nodes[1].served == [0, 1, 2]


def sim(*overrides: str, clients: int = 150):
    return config.compose(["runtime=simulation", f"num_clients={clients}", *overrides])


def test_auto_pools_where_any_node_can_serve_any_client():
    assert node_count(sim()) == POOL_NODES == federation_config(sim())["num-supernodes"]
    assert node_count(sim(clients=20)) == 20
    assert node_count(sim("runtime.client_ids=claimed")) == 150
    assert node_count(sim("runtime.client_state=memory")) == 150
    assert node_count(sim("runtime.ray_address=auto")) == 150  # auto state: memory there
    assert node_count(sim("runtime.nodes=7")) == 7
    assert node_count(config.compose(["runtime=in_process", "num_clients=150"])) == 150


@pytest.mark.parametrize(
    "overrides, why",
    [
        (["runtime.nodes=0"], "runtime.nodes must be auto or a whole number from 1 to"),
        (["runtime.nodes=151"], r"from 1 to num_clients \(150\), got 151"),
        (["runtime.nodes=2.5"], "got 2.5"),
        (["runtime.nodes=4", "runtime.client_state=memory"], "runtime.nodes=4 lends each node"),
        (["runtime.nodes=4", "runtime.client_ids=claimed"], "runtime.client_ids=assigned"),
    ],
)
def test_a_bad_number_of_nodes_is_one_line(overrides, why):
    with pytest.raises(ConfigError, match=why):
        sim(*overrides)


def test_the_registry_pools_only_with_fewer_nodes_than_clients():
    assert isinstance(client_registry(sim()), PooledRegistry)
    assert type(client_registry(sim(clients=20))) is ClientRegistry


def test_the_first_discovery_waits_for_the_pool_and_every_client_joins():
    strategy, manager, nodes = make_strategy(
        "runtime=simulation", "runtime.nodes=2", "dropout=none", num_clients=4
    )
    for node in nodes[2:]:
        manager.unregister(node)  # the simulation starts two nodes
    params = strategy.initialize_parameters(manager)
    instructions = strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    assert sorted(strategy.registry.partition_of(p) for p, _ in instructions) == [0, 1, 2, 3]
    assert strategy.registry.nodes == 2 and strategy.round_log.sampled == 4
