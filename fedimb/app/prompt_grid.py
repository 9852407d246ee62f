"""The ServerApp's Grid, with replies collected promptly.

Flower's deployed Grid (SuperLink over HTTP) checks for the replies to a message every
3 s, so every fit, evaluate and properties query of a deployed run returned up to 3 s
after its client had answered (the simulation's in-memory Grid checks every 0.1 s). This
wrapper pushes and pulls through the run's own Grid and checks every ``interval`` seconds;
which messages are sent and what comes back is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from flwr.app import Message
from flwr.serverapp import Grid

#: seconds between two checks for replies
REPLY_POLL_INTERVAL = 0.2


class PromptGrid(Grid):
    """``grid`` with a :meth:`send_and_receive` that checks every ``interval`` seconds."""

    def __init__(self, grid: Grid, interval: float = REPLY_POLL_INTERVAL):
        self.inner = grid
        self.interval = interval

    def set_run(self, run) -> None:
        self.inner.set_run(run)

    @property
    def run(self):
        return self.inner.run

    def create_message(self, *args, **kwargs) -> Message:
        return self.inner.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.inner.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.inner.pull_messages(message_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Flower's contract: push, then pull until every message has its reply or
        ``timeout`` seconds have passed."""
        waiting = set(self.push_messages(messages))
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while waiting:
            arrived = list(self.pull_messages(waiting))
            replies += arrived
            waiting -= {reply.metadata.reply_to_message_id for reply in arrived}
            if not waiting or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(self.interval)
        return replies
