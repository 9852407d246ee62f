"""Which Flower node is which client: partition ids learned by asking the nodes once.

Flower identifies nodes by random node ids; fedimb samples, drops and tracks clients
by partition id so that runs are reproducible and restarted nodes are recognised.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from dataclasses import dataclass

import numpy as np
from flwr.common import GetPropertiesIns
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.app.claims import Claim, ClaimRefused, read_claim
from fedimb.app.failure_reasons import describe_failure

log = logging.getLogger(__name__)


class ClientFailure(RuntimeError):
    """A client's instruction failed; the message names the client and its node."""


class WorkersLost(RuntimeError):
    """Every client of a round failed because the Ray actor running it died: Flower's
    simulation does not replace dead actors, so every later round would fail the same way."""


def check_workers_alive(server_round: int, failures: list, succeeded: int) -> None:
    """Stop the run (it can be resumed, with fresh actors) when a round lost every client
    to dead Ray actors, rather than run the remaining rounds without clients."""
    if succeeded or not failures or not all("ActorDiedError" in str(f) for f in failures):
        return
    raise WorkersLost(
        f"every client of round {server_round} failed because its Ray actor died (killed, "
        "or out of memory); the simulation cannot replace its actors"
    )


class LabelledProxy(ClientProxy):
    """A node's proxy whose failures say which client and which Flower node failed."""

    def __init__(
        self, proxy: ClientProxy, partition_id: int, fit_replies: list[float] | None = None
    ):
        super().__init__(proxy.cid)
        self.inner = proxy
        self.partition_id = partition_id
        #: when each fit ended (perf_counter)
        self.fit_replies = fit_replies if fit_replies is not None else []
        # a test double may have no node id: its cid names it
        self.node_id = getattr(proxy, "node_id", proxy.cid)  # type: ignore[arg-type]

    def __getattr__(self, name: str):
        """Anything else (e.g. a test double's attributes): the node's proxy's."""
        return getattr(self.__dict__["inner"], name)

    def _call(self, method: str, *args, **kwargs):
        try:
            return getattr(self.inner, method)(*args, **kwargs)
        except Exception as err:
            raise ClientFailure(
                f"client {self.partition_id} on node {self.node_id}: {describe_failure(err)}"
            ) from err

    def get_properties(self, ins, timeout, group_id):
        return self._call("get_properties", ins, timeout, group_id)

    def get_parameters(self, ins, timeout, group_id):
        return self._call("get_parameters", ins, timeout, group_id)

    def fit(self, ins, timeout, group_id):
        try:
            return self._call("fit", ins, timeout, group_id)
        finally:
            self.fit_replies.append(time.perf_counter())

    def evaluate(self, ins, timeout, group_id):
        return self._call("evaluate", ins, timeout, group_id)

    def reconnect(self, ins, timeout, group_id):
        return self._call("reconnect", ins, timeout, group_id)


@dataclass(frozen=True)
class ClientInfo:
    partition_id: int
    proxy: ClientProxy
    num_examples: int
    label_counts: np.ndarray | None


class ClientRegistry:
    """Maps partition ids to the live node proxies that serve them."""

    def __init__(self, query_timeout: float | None = None, capacity: int | None = None):
        self.query_timeout = query_timeout
        self.capacity = capacity  # client ids are 0 .. capacity-1
        self._by_pid: dict[int, ClientInfo] = {}
        self._pid_by_cid: dict[str, int] = {}
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
        self, client_manager: ClientManager, wait_for: int = 0, timeout: float = 120.0
    ) -> None:
        """Learn the partition id of every node not seen before; a node whose claim is
        bad, or names a client a connected node serves, is refused (:meth:`take_refusals`).

        ``wait_for`` first waits (up to ``timeout`` seconds) until that many nodes are
        connected; later refreshes pass 0 and only pick up nodes that (re)joined.
        """
        deadline = time.monotonic() + timeout
        while (
            wait_for and client_manager.num_available() < wait_for and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        proxies = client_manager.all()
        self._forget_departed(proxies)
        new = [
            p
            for cid, p in proxies.items()
            if cid not in self._pid_by_cid and cid not in self.refused
        ]
        if not new:
            return
        claims = []
        for proxy, props in zip(new, self._ask(new, {})):
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

    def _forget_departed(self, proxies: dict[str, ClientProxy]) -> None:
        """Drop the nodes that left; when one did, the nodes refused for claiming a
        connected node's client are asked again (e.g. a restarted node: its id is free now)."""
        gone = [c for c in self._pid_by_cid if c not in proxies]
        for cid in gone:
            self._pid_by_cid.pop(cid)
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
        self._by_pid[pid] = ClientInfo(
            pid, LabelledProxy(proxy, pid, self.fit_replies), claim.num_examples, claim.label_counts
        )
        self._pid_by_cid[proxy.cid] = pid

    def _live_holder(self, pid: int) -> str | None:
        """The connected node (cid) that serves client ``pid``, if any."""
        return next((cid for cid, held in self._pid_by_cid.items() if held == pid), None)

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
        """``get_properties`` on many nodes in parallel; None for a node that failed."""

        def one(proxy: ClientProxy):
            try:
                res = proxy.get_properties(
                    GetPropertiesIns(config=dict(config)), timeout=self.query_timeout, group_id=0
                )
            except Exception as err:  # a node that cannot answer is tried again later
                log.warning("node %s did not answer a properties query: %s", proxy.cid, err)
                self._unanswered[proxy.cid] = describe_failure(err)
                return None
            self._unanswered.pop(proxy.cid, None)
            return res.properties

        if not proxies:
            return []
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(64, len(proxies))) as pool:
            return list(pool.map(one, proxies))

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
        return sorted(set(self._pid_by_cid.values()))

    def has_own_data(self, pid: int) -> bool:
        """Whether client ``pid`` is a node that brought its own data (no partition id)."""
        return pid in self._pid_by_device.values()

    def info(self, pid: int) -> ClientInfo:
        return self._by_pid[pid]

    def proxy(self, pid: int) -> ClientProxy:
        return self._by_pid[pid].proxy

    def partition_of(self, proxy: ClientProxy) -> int | None:
        return self._pid_by_cid.get(proxy.cid)
