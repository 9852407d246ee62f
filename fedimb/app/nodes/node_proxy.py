"""A node's proxy as the server's round loop uses it: failures that name the client and
its node, and the client each instruction is for where the server assigns them."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time

from flwr.common import GetPropertiesIns
from flwr.server.client_proxy import ClientProxy

from fedimb.app.nodes.failure_reasons import describe_failure
from fedimb.core import events, protocol

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
    """A node's proxy whose failures say which client and which Flower node failed;
    ``assigned``: every instruction names the client the server assigned the node."""

    def __init__(
        self,
        proxy: ClientProxy,
        partition_id: int,
        fit_replies: list[float] | None = None,
        assigned: bool = False,
    ):
        super().__init__(proxy.cid)
        self.inner = proxy
        self.partition_id = partition_id
        self.assigned = assigned
        #: when each fit ended (perf_counter)
        self.fit_replies = fit_replies if fit_replies is not None else []
        # a test double may have no node id: its cid names it
        self.node_id = getattr(proxy, "node_id", proxy.cid)  # type: ignore[arg-type]

    def __getattr__(self, name: str):
        """Anything else (e.g. a test double's attributes): the node's proxy's."""
        return getattr(self.__dict__["inner"], name)

    def addressed(self, ins):
        """``ins`` as this node receives it: naming its client where the server assigned it
        (a copy: one instruction may go to many)."""
        if self.assigned and hasattr(ins, "config"):
            ins = dataclasses.replace(
                ins, config={**ins.config, protocol.ASSIGNED_PARTITION: self.partition_id}
            )
        return ins

    def _call(self, method: str, ins, *args):
        ins = self.addressed(ins)
        try:
            return getattr(self.inner, method)(ins, *args)
        except Exception as err:
            raise ClientFailure(
                f"client {self.partition_id} on node {self.failed_node()}: {describe_failure(err)}"
            ) from err

    def failed_node(self) -> int | str:
        """The node a failed call went to: a pooled client's is the one it was lent
        (:class:`fedimb.app.runtimes.node_pool.PooledProxy`)."""
        return getattr(self.inner, "lent_node", self.node_id)

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


def ask_properties(
    proxies: list[ClientProxy], config: dict, timeout: float | None
) -> list[dict | str]:
    """``get_properties`` on many nodes in parallel: each node's properties, or why it
    did not answer (one line)."""

    def one(proxy: ClientProxy) -> dict | str:
        try:
            res = proxy.get_properties(
                GetPropertiesIns(config=dict(config)), timeout=timeout, group_id=0
            )
        except Exception as err:  # a node that cannot answer is tried again later
            # the node's words, made one line without the event tag (events.neutral)
            log.warning(
                "node %s did not answer a properties query: %s", proxy.cid, events.neutral(err)
            )
            return describe_failure(err)
        return res.properties

    if not proxies:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(64, len(proxies))) as pool:
        return list(pool.map(one, proxies))


def node_order(proxy: ClientProxy) -> tuple:
    """A node's place where the server assigns clients: by its Flower node id (a 64-bit
    integer; an in-process node's is its client id), else by its name."""
    node_id = getattr(proxy, "node_id", None)
    return (0, node_id, "") if isinstance(node_id, int) else (1, 0, str(proxy.cid))
