"""The round's accounting: where the server's time goes and how many bytes travel, written
to the round's log at the points the strategy names (the keys :mod:`fedimb.app.server.phases`
describes), so that the sampling and aggregation code holds no clock calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flwr.common import FitIns, FitRes, Parameters, Scalar

from fedimb.app.server.phases import split_client_timing
from fedimb.core import payload
from strategies.base.round_log import RoundLog


def parameters_nbytes(parameters: Parameters) -> int:
    """The bytes of a model on the wire (its serialised arrays)."""
    return sum(len(t) for t in parameters.tensors)


class RoundAccounting:
    """One round's server phases (``timing``), traffic (``bytes_down``, ``bytes_up``) and
    the replying clients' own phases (``client_timing``) in ``log``. ``clock`` must be the
    one the registry stamps fit replies with (``time.perf_counter``)."""

    def __init__(self, log: RoundLog, clock: Callable[[], float] = time.perf_counter):
        self.log = log
        self.clock = clock
        self._ended: dict[str, float] = {}  # when each server phase ended (perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as the server phase ``name`` (seconds, in ``log.timing``)."""
        began = self.clock()
        try:
            yield
        finally:
            ended = self.clock()
            self._ended[name] = ended
            self.log.timing[name] = ended - began

    def count_sent(self, ins: FitIns) -> None:
        """Counts one fit instruction (its model and its config) as sent."""
        self.log.bytes_down += parameters_nbytes(ins.parameters) + payload.nbytes(ins.config)

    def count_replies(self, reply_times: list[float]) -> None:
        """``first_reply`` and ``last_reply``: from the end of ``select`` (the instructions
        were ready) to the first and the last fit reply (``reply_times``: perf_counter)."""
        sent_at = self._ended.get("select")
        if reply_times and sent_at is not None:
            self.log.timing.update(
                first_reply=min(reply_times) - sent_at, last_reply=max(reply_times) - sent_at
            )

    def count_received(self, pid: int | None, res: FitRes) -> dict[str, Scalar]:
        """Counts one fit reply's bytes and keeps its client's phases (a rejected client's
        time counts too); returns the reply's metrics without those phases."""
        self.log.bytes_up += parameters_nbytes(res.parameters) + payload.nbytes(res.metrics)
        metrics, timing = split_client_timing(dict(res.metrics))
        if pid is not None:
            self.log.client_timing[int(pid)] = timing
        return metrics
