"""What an asynchronous run keeps between its server steps (:mod:`.async_loop`): the
clients in flight and the updates that have arrived."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class InFlight:
    """A client training on the global model of ``version``, dispatched as number ``serial``;
    under the simulated clock its update arrives at ``finish`` (simulated seconds)."""

    pid: int
    serial: int
    version: int
    finish: float
    #: the reply where the client trained in the server's thread (in process)
    done: Any = None
    #: the reply to come where it trains elsewhere
    future: Future | None = field(default=None, repr=False)

    def arrived(self) -> bool:
        return self.future is None or self.future.done()

    def reply(self) -> Any:
        """(proxy, FitRes), or the exception the call raised."""
        return self.done if self.future is None else self.future.result()

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the instruction is sent again on resume."""
        return {
            "pid": self.pid,
            "serial": self.serial,
            "version": self.version,
            "finish": self.finish,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> InFlight:
        return cls(
            int(state["pid"]), int(state["serial"]), int(state["version"]), float(state["finish"])
        )


@dataclass
class Arrival:
    """An update that has arrived: its client, the version it started from, its arrays,
    Flower's (proxy, FitRes) and when it arrived."""

    pid: int
    version: int
    arrays: list[np.ndarray]
    reply: tuple[Any, Any]
    time: float
