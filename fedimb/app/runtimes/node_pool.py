"""A pool of the simulation's virtual nodes, for a federation with more clients than nodes.

Flower's simulation engine keeps a Context per virtual node and, every 0.1 s, asks its
state for a message to each of them; with one node per client that work (and the nodes'
registration before round 1) grows with the idle population. Where the server assigns
clients to nodes (``runtime.client_ids=assigned``) and clients keep their state on disk
(``runtime.client_state=disk``), any node can serve any client, so the simulation starts
``runtime.nodes`` of them and every instruction borrows a free node for as long as its
reply takes. A node serves one client at a time; which node it is plays no part in the
result (the instruction names the client, whose state is read from disk), so a pooled run
repeats a run with one node per client to the last bit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.app.configuration.runtime_rules import assigns_clients, node_count
from fedimb.app.nodes.node_proxy import LabelledProxy, node_order
from fedimb.app.nodes.registry import ClientRegistry, wait_for_nodes


def client_registry(cfg) -> ClientRegistry:
    """The run's registry: a :class:`PooledRegistry` where the runtime starts fewer nodes
    than clients (:func:`~fedimb.app.configuration.runtime_rules.node_count`)."""
    clients, nodes = int(cfg.num_clients), node_count(cfg)
    # a node's first answer includes starting its ClientApp: allow the connect timeout
    timeout = cfg.runtime.get("connect_timeout")
    if nodes < clients:
        return PooledRegistry(nodes, clients, query_timeout=timeout)
    return ClientRegistry(query_timeout=timeout, capacity=clients, assigned=assigns_clients(cfg))


class NoFreeNode(TimeoutError):
    """No node of the pool became free within an instruction's timeout."""


class NodePool:
    """The connected nodes, each lent to one instruction at a time."""

    def __init__(self) -> None:
        self._nodes: dict[str, ClientProxy] = {}
        self._free: list[ClientProxy] = []  # in node order: the lowest free node is lent first
        self._changed = threading.Condition()

    def update(self, connected: Iterable[ClientProxy]) -> None:
        """The nodes connected now: new ones become free, departed ones are lent no more."""
        current = {proxy.cid: proxy for proxy in connected}
        with self._changed:
            lent = set(self._nodes) - {p.cid for p in self._free}
            self._nodes = current
            self._free = sorted(
                (p for cid, p in current.items() if cid not in lent), key=node_order
            )
            self._changed.notify_all()

    def __len__(self) -> int:
        return len(self._nodes)

    @contextmanager
    def borrow(self, timeout: float | None) -> Iterator[ClientProxy]:
        """A free node, waited for up to ``timeout`` seconds (None: no limit), given back
        when the block ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self._free:
                left = None if deadline is None else deadline - time.monotonic()
                if not self._nodes or (left is not None and left <= 0):
                    raise NoFreeNode(
                        f"none of the {len(self._nodes)} nodes of the pool was free within "
                        f"{timeout} s"
                        if self._nodes
                        else "no node of the pool is connected"
                    )
                self._changed.wait(left)
            node = self._free.pop(0)
        try:
            yield node
        finally:
            with self._changed:
                if node.cid in self._nodes:
                    self._free.append(node)
                    self._free.sort(key=node_order)
                self._changed.notify()


class PooledProxy(ClientProxy):
    """Client ``partition_id`` as the server's round loop sees it: every call goes to a
    node borrowed from ``pool`` (:class:`~fedimb.app.nodes.node_proxy.LabelledProxy` wraps it and
    names the client in each instruction)."""

    def __init__(self, pool: NodePool, partition_id: int):
        super().__init__(f"pooled-client-{partition_id}")
        self.pool = pool
        #: the node the current call went to (failures name it)
        self.lent_node: int | str = "(none free)"

    def _call(self, method: str, ins, timeout: float | None, group_id):
        started = time.monotonic()
        self.lent_node = "(none free)"
        with self.pool.borrow(timeout) as node:
            self.lent_node = getattr(node, "node_id", node.cid)
            left = None if timeout is None else max(timeout - (time.monotonic() - started), 0.0)
            return getattr(node, method)(ins, left, group_id)

    def get_properties(self, ins, timeout, group_id):
        return self._call("get_properties", ins, timeout, group_id)

    def get_parameters(self, ins, timeout, group_id):
        return self._call("get_parameters", ins, timeout, group_id)

    def fit(self, ins, timeout, group_id):
        return self._call("fit", ins, timeout, group_id)

    def evaluate(self, ins, timeout, group_id):
        return self._call("evaluate", ins, timeout, group_id)

    def reconnect(self, ins, timeout, group_id):
        return self._call("reconnect", ins, timeout, group_id)


class PooledRegistry(ClientRegistry):
    """The registry of a federation whose ``nodes`` nodes serve ``capacity`` clients: every
    client is a :class:`PooledProxy` of one pool, held from the first node's arrival to the
    end of the run (a client refused for a bad answer stays out; with no node left, every
    call fails and is counted as the client's failure)."""

    def __init__(self, nodes: int, capacity: int, query_timeout: float | None = None):
        super().__init__(query_timeout=query_timeout, capacity=capacity, assigned=True)
        self.nodes = nodes
        self.pool = NodePool()

    def refresh(
        self, client_manager: ClientManager, wait_for: int = 0, timeout: float | None = None
    ) -> None:
        """The pool lends the nodes connected now (after waiting, as
        :meth:`ClientRegistry.refresh` does); the clients join with the first node."""
        wait_for_nodes(client_manager, wait_for, timeout)
        proxies = client_manager.all()
        if proxies.keys() == self._settled:
            return
        self.pool.update(proxies.values())
        if len(self.pool) and not self._proxies:
            for pid in range(self.capacity or 0):
                proxy = PooledProxy(self.pool, pid)
                self._proxies[pid] = LabelledProxy(proxy, pid, self.fit_replies, assigned=True)
                self._hold(proxy.cid, pid)
        self._settled = set(proxies)
