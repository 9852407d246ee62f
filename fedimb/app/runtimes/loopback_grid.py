"""A Grid in one process, for the protocols that need Flower's messages where the run has
none (``runtime=in_process`` under ``secagg=secaggplus``).

Each message goes to its node's ClientApp in this process, in turn: Flower's
``ClientApp`` around the node's client with the mods a SuperNode's ClientApp runs
(:func:`node_app`), and the node's own ``Context``, so that the mods keep their state
between messages as on a SuperNode. An error the ClientApp raises comes back as an error
reply, as a SuperNode reports it; a reply later than the timeout is dropped, as a Grid
drops it. Every node receives a copy of its message, as over the wire: a workflow may send
one content to many nodes, and a mod may change what it receives."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable

from flwr.app import Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity
from omegaconf import DictConfig

from fedimb.app.privacy.client_mods import client_mod, clipped
from fedimb.app.privacy.secagg_mod import seeded_secaggplus

#: the error code of a ClientApp that raised (Flower's ``ErrorCode.CLIENT_APP_RAISED_EXCEPTION``)
CLIENT_APP_RAISED = 2


def node_app(cfg: DictConfig, client_of) -> ClientApp:
    """The ClientApp of a node whose client ``client_of(context)`` makes: SecAgg+'s mod,
    then the run's client-side clipping, as :data:`fedimb.app.nodes.client_app.app` has them."""
    mods: list = [seeded_secaggplus]
    clipping = client_mod(cfg)
    if clipping is not None:
        mods.append(lambda msg, ctxt, call_next: clipped(clipping, msg, ctxt, call_next))
    return ClientApp(client_fn=client_of, mods=mods)


class LoopbackGrid(Grid):
    """``nodes``: node id -> (its ClientApp, its Context)."""

    def __init__(self, nodes: dict[int, tuple[ClientApp, Context]], run_id: int = 0):
        self.nodes = nodes
        self._run_id = run_id
        try:  # the messages a workflow builds name the task that sends them
            TaskIdentity.run_id  # noqa: B018 (raises where no Flower task runs this process)
        except RuntimeError:
            TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, 0, 0

    def set_run(self, run) -> None:
        self._run_id = run

    @property
    def run(self):
        return self._run_id

    def create_message(self, *args, **kwargs) -> Message:
        raise NotImplementedError("build messages with Message(...)")

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError("the loopback Grid only sends and receives")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError("the loopback Grid only sends and receives")

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        replies = []
        for message in messages:
            app, context = self.nodes[message.metadata.dst_node_id]
            began = time.monotonic()
            try:
                reply = app(copy.deepcopy(message), context)
            except Exception as err:  # the node's error, as a SuperNode reports it
                reply = Message(
                    Error(code=CLIENT_APP_RAISED, reason=f"{type(err).__name__}: {err}"),
                    reply_to=message,
                )
            if timeout is None or time.monotonic() - began <= timeout:
                replies.append(reply)
        return replies
