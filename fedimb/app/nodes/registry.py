"""Which Flower node is which client.

Flower identifies nodes by random node ids; fedimb tracks clients by partition id, so that
runs are reproducible and restarted nodes are recognised. How a node becomes a client
depends on what the runtime can state up front (``runtime.client_ids``):

- ``claimed`` (a deployment's nodes, which hold their own partition or data): every new
  node is asked once which client it is; its answer (a :class:`~fedimb.app.nodes.claims.Claim`)
  is checked before it becomes that client.
- ``assigned`` (the simulation's virtual nodes and the in-process ones, which can all
  serve any client): the server gives the node with the k-th smallest node id client k,
  without a message, and every instruction to it names that client
  (``protocol.ASSIGNED_PARTITION``). A client's answer (its sample count and label
  histogram) is asked only when a method reads it (:meth:`ClientRegistry.infos`), and must
  name the client it was assigned. With fewer nodes than clients, see :mod:`.node_pool`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.app.nodes.claims import Claim, ClaimRefused, read_claim
from fedimb.app.nodes.node_proxy import LabelledProxy, ask_properties, node_order

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientInfo:
    partition_id: int
    proxy: ClientProxy
    num_examples: int
    label_counts: np.ndarray | None


def wait_for_nodes(client_manager: ClientManager, count: int, timeout: float | None) -> None:
    """Wait up to ``timeout`` seconds (None: no limit) until ``count`` nodes connect."""
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    while count and client_manager.num_available() < count and time.monotonic() < deadline:
        time.sleep(0.5)


class ClientRegistry:
    """Maps partition ids to the live node proxies that serve them."""

    def __init__(
        self,
        query_timeout: float | None = None,
        capacity: int | None = None,
        assigned: bool = False,
    ):
        self.query_timeout = query_timeout
        self.capacity = capacity  # client ids are 0 .. capacity-1
        #: whether the server assigns clients to nodes (``runtime.client_ids=assigned``)
        self.assigned = assigned
        self.nodes = capacity or 0  # the nodes the first discovery waits for: one per client
        #: each client's node proxy
        self._proxies: dict[int, LabelledProxy] = {}
        #: each client's answer, as far as learnt (all of them where nodes claim)
        self._by_pid: dict[int, ClientInfo] = {}
        self._pid_by_cid: dict[str, int] = {}
        self._cid_by_pid: dict[int, str] = {}  # the same mapping, the other way
        self._sorted_pids: list[int] | None = None  # partition_ids(), until the mapping changes
        #: the nodes connected at the last refresh that left nobody to ask again
        self._settled: set[str] = set()
        self._pid_by_device: dict[str, int] = {}
        #: when each fit reply (or failure) came back, for the round's timing
        self.fit_replies: list[float] = []
        #: node (cid) -> why its last properties query failed
        self._unanswered: dict[str, str] = {}
        #: connected node (cid) -> why its claim was refused; not asked again
        self.refused: dict[str, str] = {}
        #: of those, claims on a connected node's client
        self._refused_held: set[str] = set()
        #: refusals the strategy has not noted yet (:meth:`take_refusals`)
        self._unreported: list[str] = []

    def refresh(
        self, client_manager: ClientManager, wait_for: int = 0, timeout: float | None = None
    ) -> None:
        """Give every node not seen before its client: assigned (:meth:`_assign`), or
        asked; a node whose claim is bad, or names a client a connected node serves, is
        refused (:meth:`take_refusals`). ``wait_for`` first waits (``timeout``, as in
        :func:`wait_for_nodes`) until that many nodes are connected; later refreshes pass 0
        and only pick up nodes that (re)joined."""
        wait_for_nodes(client_manager, wait_for, timeout)
        proxies = client_manager.all()
        if proxies.keys() == self._settled:  # nobody joined or left, nobody to ask again
            return
        self._forget_departed(proxies)
        # set differences, not a loop over the nodes: with 100,000 nodes every round asks
        unseen = proxies.keys() - self._pid_by_cid.keys() - self.refused.keys()
        new = [p for cid, p in proxies.items() if cid in unseen]  # in the manager's order
        if self.assigned:
            self._assign(new)
            undecided = False
        else:
            undecided = self._claim(new)
        self._settled = set() if undecided else set(proxies)

    def _claim(self, new: list[ClientProxy]) -> bool:
        """Ask the new nodes which client they are and admit or refuse each; whether a
        node did not answer (it is asked again at the next refresh)."""
        claims = []
        answers = self._ask(new, {})
        for proxy, props in zip(new, answers):
            if props is None:
                continue
            try:
                claims.append((proxy, read_claim(props, self.capacity)))
            except ClaimRefused as why:
                self._refuse(proxy.cid, str(why))
        # nodes with a partition id claim it before nodes with their own data get free ids
        claims.sort(key=lambda claim: claim[1].device_key is not None)
        for proxy, claim in claims:
            self._admit(proxy, claim)
        return any(props is None for props in answers)

    def _assign(self, new: list[ClientProxy]) -> None:
        """The new nodes, in the order of their node ids, take the free client ids in
        ascending order: with every node there from the start (the simulation registers
        its nodes before the server starts) node k (by node id) is client k, for the
        whole run. Nodes beyond the run's clients stay idle."""
        held = set(self._pid_by_cid.values())
        free = (pid for pid in range(self.capacity or 0) if pid not in held)
        for proxy, pid in zip(sorted(new, key=node_order), free):
            self._proxies[pid] = LabelledProxy(proxy, pid, self.fit_replies, assigned=True)
            self._by_pid.pop(pid, None)  # a new node: its answer is asked again
            self._hold(proxy.cid, pid)

    def _hold(self, cid: str, pid: int) -> None:
        self._pid_by_cid[cid] = pid
        self._cid_by_pid[pid] = cid
        self._sorted_pids = None

    def _release(self, cid: str) -> None:
        pid = self._pid_by_cid.pop(cid)
        if self._cid_by_pid.get(pid) == cid:
            del self._cid_by_pid[pid]
        self._sorted_pids = None

    def _forget_departed(self, proxies: dict[str, ClientProxy]) -> None:
        """Drop the nodes that left; when one did, the nodes refused for claiming a
        connected node's client are asked again (e.g. a restarted node: its id is free now)."""
        gone = self._pid_by_cid.keys() - proxies.keys()
        for cid in gone:
            self._release(cid)
        retry = set(self._refused_held) if gone else set()
        for cid in [c for c in self.refused if c not in proxies or c in retry]:
            self.refused.pop(cid)
            self._refused_held.discard(cid)

    def _admit(self, proxy: ClientProxy, claim: Claim) -> None:
        """Make ``proxy`` the client it claims, unless a connected node serves that client:
        a client never changes hands while its node is connected."""
        pid = claim.partition_id
        if claim.device_key is not None:
            free = self._device_client_id(claim.device_key)
            if free is None:
                self._refuse(
                    proxy.cid, f"has its own data but all {self.capacity} client ids are taken"
                )
                return
            pid = free
        holder = self._live_holder(pid)
        if holder is not None:
            what = "its data is" if claim.device_key is not None else f"partition id {pid} is"
            self._refuse(proxy.cid, f"{what} already served by node {holder}", held=True)
            return
        labelled = LabelledProxy(proxy, pid, self.fit_replies)
        self._proxies[pid] = labelled
        self._by_pid[pid] = ClientInfo(pid, labelled, claim.num_examples, claim.label_counts)
        self._hold(proxy.cid, pid)

    def _live_holder(self, pid: int) -> str | None:
        """The connected node (cid) that serves client ``pid``, if any."""
        return self._cid_by_pid.get(pid)

    def _refuse(self, cid: str, why: str, held: bool = False) -> None:
        """Leave node ``cid`` out, with a one-line reason, until it reconnects (or, for a
        claim on a live node's id, until some node leaves)."""
        message = f"node {cid} refused: {why}"
        log.warning(message)
        self.refused[cid] = why
        if held:
            self._refused_held.add(cid)
        self._unreported.append(message)

    def take_refusals(self) -> list[str]:
        """Refusals since the last call, one line each (for the round log)."""
        taken, self._unreported = self._unreported, []
        return taken

    def _device_client_id(self, device_key: str) -> int | None:
        """The client id of a node that brings its own data: the one it had before
        (same data, e.g. after a restart), else the lowest id no node has claimed."""
        if device_key in self._pid_by_device:
            return self._pid_by_device[device_key]
        claimed = set(self._by_pid) | set(self._pid_by_device.values())
        free = [i for i in range(self.capacity or 0) if i not in claimed]
        if not free:
            return None
        self._pid_by_device[device_key] = free[0]
        return free[0]

    def _ask(self, proxies: list[ClientProxy], config: dict) -> list[dict | None]:
        """:func:`ask_properties`, remembering why a node did not answer (it is asked
        again later)."""
        answers = ask_properties(proxies, config, self.query_timeout)
        for proxy, answer in zip(proxies, answers):
            if isinstance(answer, str):
                self._unanswered[proxy.cid] = answer
            else:
                self._unanswered.pop(proxy.cid, None)
        return [None if isinstance(answer, str) else answer for answer in answers]

    def query(self, pids: list[int], config: dict) -> dict[int, dict]:
        """Ask the clients ``pids`` for their properties given ``config`` (e.g. a plan to
        apply); clients that fail are left out of the answer."""
        answers = self._ask([self.proxy(pid) for pid in pids], config)
        return {pid: props for pid, props in zip(pids, answers) if props is not None}

    def unstarted_nodes(self, client_manager: ClientManager) -> dict[str, str]:
        """Connected nodes that serve no client because their ClientApp failed (e.g. a
        node without its data), each with the one-line reason its node gave."""
        connected = client_manager.all()
        unstarted = {
            **self._unanswered,
            **{cid: f"refused: {why}" for cid, why in self.refused.items()},
        }
        return {
            cid: why
            for cid, why in unstarted.items()
            if cid in connected and cid not in self._pid_by_cid
        }

    def partition_ids(self) -> list[int]:
        """Partition ids served by a connected node, sorted."""
        if self._sorted_pids is None:
            self._sorted_pids = sorted(self._cid_by_pid)
        return list(self._sorted_pids)

    def has_own_data(self, pid: int) -> bool:
        """Whether client ``pid`` is a node that brought its own data (no partition id)."""
        return pid in self._pid_by_device.values()

    def infos(self, pids: list[int]) -> dict[int, ClientInfo]:
        """The answers (sample count, label histogram) of the connected clients ``pids``;
        where clients are assigned, those not asked yet are asked now, in parallel, and a
        client that names another client or whose answer is bad is refused. Clients that
        did not answer (or were refused) are left out."""
        if self.assigned:
            self._learn([p for p in pids if p not in self._by_pid and p in self._held()])
        return {p: self._by_pid[p] for p in pids if p in self._by_pid and p in self._held()}

    def info(self, pid: int) -> ClientInfo:
        """Client ``pid``'s answer (:meth:`infos`); ``KeyError`` where it gave none."""
        return self.infos([pid])[pid]

    def _held(self) -> set[int]:
        return set(self._cid_by_pid)

    def _learn(self, pids: list[int]) -> None:
        """Ask assigned clients for their answers; check each against its assignment."""
        for pid, props in zip(pids, self._ask([self._proxies[p] for p in pids], {})):
            if props is None:
                continue
            try:
                claim = read_claim(props, self.capacity)
            except ClaimRefused as why:
                self._refuse_assigned(pid, str(why))
                continue
            if claim.partition_id != pid:
                self._refuse_assigned(
                    pid, f"answers as client {claim.partition_id}, but serves client {pid}"
                )
                continue
            self._by_pid[pid] = ClientInfo(
                pid, self._proxies[pid], claim.num_examples, claim.label_counts
            )

    def _refuse_assigned(self, pid: int, why: str) -> None:
        """Leave out the node assigned client ``pid`` (until it reconnects)."""
        cid = self._live_holder(pid)
        if cid is not None:
            self._release(cid)
            self._refuse(cid, why)

    def proxy(self, pid: int) -> ClientProxy:
        return self._proxies[pid]

    def partition_of(self, proxy: ClientProxy) -> int | None:
        return self._pid_by_cid.get(proxy.cid)
