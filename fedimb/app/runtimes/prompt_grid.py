"""The ServerApp's Grid, with replies collected promptly by one collector.

Flower's Grids check for the replies to a message in a loop per message: the deployed
Grid (SuperLink over HTTP) every 3 s, the simulation's in-memory Grid every 0.1 s, so
every fit, evaluate and properties query returned up to that long after its client had
answered, and with many clients in flight each one polled on its own. This wrapper pushes
through the run's own Grid and hands every message in flight to one collector thread,
which pulls all their replies at once every ``interval`` seconds (0.2 s over the network,
a few milliseconds in the simulation, where a pull is a lookup in memory) and wakes each
caller as soon as its replies are in. Which messages are sent and what comes back is
unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from flwr.app import Message
from flwr.serverapp import Grid

#: seconds between two checks for replies over the network (a deployment's SuperLink)
REPLY_POLL_INTERVAL = 0.2
#: seconds between two checks for replies where the Grid is in memory (the simulation)
IN_MEMORY_POLL_INTERVAL = 0.005


class _Waiter:
    """One ``send_and_receive`` call: the messages it still waits for, and its replies."""

    def __init__(self, ids: list[str]):
        self.waiting = set(ids)
        self.replies: list[Message] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        if not ids:
            self.done.set()


class PromptGrid(Grid):
    """``grid`` with a :meth:`send_and_receive` whose replies one collector thread pulls
    every ``interval`` seconds, for every message in flight at once."""

    def __init__(self, grid: Grid, interval: float = REPLY_POLL_INTERVAL):
        self.inner = grid
        self.interval = interval
        self._lock = threading.Lock()
        self._in_flight: dict[str, _Waiter] = {}  # message id -> its caller
        self._wake = threading.Event()
        self._collector: threading.Thread | None = None

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
        """Flower's contract: push, then wait until every message has its reply or
        ``timeout`` seconds have passed; the replies that came."""
        waiter = _Waiter(list(self.push_messages(messages)))
        with self._lock:
            for message_id in waiter.waiting:
                self._in_flight[message_id] = waiter
            self._start_collector()
        self._wake.set()
        waiter.done.wait(timeout)
        with self._lock:  # given up (timeout): its late replies are not collected
            for message_id in waiter.waiting:
                self._in_flight.pop(message_id, None)
            if waiter.error is not None:
                raise waiter.error
            return list(waiter.replies)

    def _start_collector(self) -> None:
        if self._collector is None:
            self._collector = threading.Thread(
                target=self._collect, name="fedimb-replies", daemon=True
            )
            self._collector.start()

    def _collect(self) -> None:
        """Pull the replies of every message in flight, hand each to its caller, wait
        ``interval``; sleep while nothing is in flight."""
        while True:
            with self._lock:
                in_flight = list(self._in_flight)
            if not in_flight:
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                arrived = list(self.pull_messages(in_flight))
            except Exception as err:  # e.g. the run was stopped: every caller learns it
                self._fail_all(err)
                continue
            with self._lock:
                for reply in arrived:
                    message_id = reply.metadata.reply_to_message_id
                    waiter = self._in_flight.pop(message_id, None)
                    if waiter is not None:
                        waiter.replies.append(reply)
                        waiter.waiting.discard(message_id)
                        if not waiter.waiting:
                            waiter.done.set()
            time.sleep(self.interval)

    def _fail_all(self, err: BaseException) -> None:
        with self._lock:
            waiters = set(self._in_flight.values())
            self._in_flight.clear()
        for waiter in waiters:
            waiter.error = err
            waiter.done.set()
