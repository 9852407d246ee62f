"""Which Flower node is which client: partition ids learned by asking the nodes once.

Flower identifies nodes by random node ids; fedimb samples, drops and tracks clients
by partition id so that runs are reproducible and restarted nodes are recognised.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from dataclasses import dataclass

import numpy as np
from flwr.common import GetPropertiesIns
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.core import payload, protocol

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
    raise WorkersLost(f"every client of round {server_round} failed because its Ray actor died (killed, or out of "
                      "memory); the simulation cannot replace its actors")


def _one_line(reason: str) -> str:
    """A reason's first line, and where Ray explains a dead actor on a later line, the
    first sentence of that explanation: one console line; the whole text is in flwr.log."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    why = [line.split(". ")[0].rstrip(".") + "." for line in lines[1:] if line.startswith("The actor is dead because")]
    return " ".join(lines[:1] + why[:1])


def _reason(err: BaseException) -> str:
    """A client failure as ``<exception type>: <message>`` in every runtime, on one line."""
    return _one_line(_full_reason(err))


def _full_reason(err: BaseException) -> str:
    text = str(err)
    ray = re.search(r"ClientAppException occurred\. Message: (.*?)(?:'>\)\. It originated.*)?$", text, re.S)
    if ray:  # the simulation: Flower keeps only the message, Ray's traceback above it the type
        message = ray.group(1).strip()
        first = re.escape(message.splitlines()[0]) if message else "$"
        raised = re.search(rf"^\s*(?:[\w.]*\.)?(\w+): {first}", text, re.M)
        return f"{raised.group(1) if raised else 'ClientAppException'}: {message}"
    if text.startswith("Expected one Message but got: 0") or "Message Unavailable" in text:
        # Flower's grid proxy after its timeout, or the SuperLink after the message's TTL
        return "no reply within the round timeout (node gone or straggling)"
    match = re.search(r"Message contains an Error \(reason: (.*)\)\. It originated", text, re.S)
    if match:  # the ClientApp raised, or the SuperLink answered for an unavailable node
        reason = match.group(1).strip()
        raised = re.fullmatch(r"<class '(?:[\w.]*\.)?(\w+)'>:<'(.*)'>", reason, re.S)
        return f"{raised.group(1)}: {raised.group(2)}" if raised else reason
    return f"{type(err).__name__}: {text}"


class LabelledProxy(ClientProxy):
    """A node's proxy whose failures say which client and which Flower node failed."""

    def __init__(self, proxy: ClientProxy, partition_id: int, fit_replies: list[float] | None = None):
        super().__init__(proxy.cid)
        self.inner = proxy
        self.partition_id = partition_id
        self.fit_replies = fit_replies if fit_replies is not None else []  # when each fit ended (perf_counter)
        self.node_id = getattr(proxy, "node_id", proxy.cid)

    def __getattr__(self, name: str):  # anything else (e.g. a test double's attributes): the node's proxy
        return getattr(self.__dict__["inner"], name)

    def _call(self, method: str, *args, **kwargs):
        try:
            return getattr(self.inner, method)(*args, **kwargs)
        except Exception as err:
            raise ClientFailure(f"client {self.partition_id} on node {self.node_id}: {_reason(err)}") from err

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
        self.fit_replies: list[float] = []  # when each fit reply (or failure) came back, for the round's timing
        self._unanswered: dict[str, str] = {}  # node (cid) -> why its last properties query failed

    def refresh(self, client_manager: ClientManager, wait_for: int = 0, timeout: float = 120.0) -> None:
        """Learn the partition id of every node not seen before.

        ``wait_for`` first waits (up to ``timeout`` seconds) until that many nodes are
        connected; later refreshes pass 0 and only pick up nodes that (re)joined.
        """
        deadline = time.monotonic() + timeout
        while wait_for and client_manager.num_available() < wait_for and time.monotonic() < deadline:
            time.sleep(0.5)
        proxies = client_manager.all()
        for cid in [c for c in self._pid_by_cid if c not in proxies]:
            self._pid_by_cid.pop(cid)
        new = [p for cid, p in proxies.items() if cid not in self._pid_by_cid]
        if not new:
            return
        answers = [(proxy, props) for proxy, props in zip(new, self._ask(new, {})) if props is not None]
        # nodes with a partition id claim it before nodes with their own data get free ids
        answers.sort(key=lambda answer: int(answer[1][protocol.PARTITION_ID]) < 0)
        for proxy, props in answers:
            pid = int(props[protocol.PARTITION_ID])
            if pid < 0:
                pid = self._device_client_id(str(props.get(protocol.DEVICE_KEY)))
                if pid is None:
                    log.warning("node %s has its own data but all %s client ids are taken", proxy.cid, self.capacity)
                    continue
            counts = payload.unpack(props).get(protocol.LABEL_COUNTS)
            proxy_of_pid = LabelledProxy(proxy, pid, self.fit_replies)
            self._by_pid[pid] = ClientInfo(pid, proxy_of_pid, int(props.get(protocol.NUM_EXAMPLES, 0)), counts)
            self._pid_by_cid[proxy.cid] = pid

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
                res = proxy.get_properties(GetPropertiesIns(config=dict(config)), timeout=self.query_timeout, group_id=0)
            except Exception as err:  # a node that cannot answer is tried again later
                log.warning("node %s did not answer a properties query: %s", proxy.cid, err)
                self._unanswered[proxy.cid] = _reason(err)
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
        return {cid: why for cid, why in self._unanswered.items() if cid in connected and cid not in self._pid_by_cid}

    def partition_ids(self) -> list[int]:
        """Partition ids served by a connected node, sorted."""
        return sorted(set(self._pid_by_cid.values()))

    def info(self, pid: int) -> ClientInfo:
        return self._by_pid[pid]

    def proxy(self, pid: int) -> ClientProxy:
        return self._by_pid[pid].proxy

    def partition_of(self, proxy: ClientProxy) -> int | None:
        return self._pid_by_cid.get(proxy.cid)
