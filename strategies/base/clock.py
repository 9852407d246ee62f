"""The simulated clock of synchronous rounds under a device-speed model (``speed``): a round
lasts as long as its slowest client, or its deadline (``mode.deadline``), which leaves the
clients slower than it out of the round (docs/asynchronous.md)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from fedimb.app.server.run_context import ServerRun
from strategies.base.round_log import RoundLog

#: the round event's ``extra`` keys: the simulated seconds since the run began, and the
#: clients a deadline left out of the round
TIME, LATE = "clock.time", "clock.late"


class ClockHost(Protocol):
    run: ServerRun
    round_log: RoundLog
    sim_time: float


def on_time_clients(host: ClockHost, clients: list[int]) -> list[int]:
    """``clients`` without those the deadline leaves out; advances the host's ``sim_time``
    by the round's duration and logs it. Without a speed model, ``clients`` unchanged."""
    seconds = host.run.client_seconds
    if seconds is None:
        return clients
    deadline = host.run.cfg.mode.get("deadline")  # sync only: asynchronous rounds have none
    on_time = [pid for pid in clients if deadline is None or seconds[pid] <= deadline]
    late = len(clients) - len(on_time)
    if late:
        duration = float(deadline)
    else:
        duration = float(np.max(seconds[on_time])) if on_time else 0.0
    host.sim_time += duration
    host.round_log.dropped += late
    host.round_log.extra[TIME] = round(host.sim_time, 6)
    if deadline is not None:
        host.round_log.extra[LATE] = late
    return on_time
