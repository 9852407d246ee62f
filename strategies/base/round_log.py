"""What one round produced and reports: the accepted client updates and the round's
log (one event line per round)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.common import Scalar

from fedimb.app.server.phases import summarise_clients
from fedimb.core import events, payload, protocol

logger = logging.getLogger(__name__)

#: rounds with more replying clients report only the clients' mean and maximum phases: the
#: event travels as one line of Flower's log stream
CLIENT_TIMING_LIMIT = 100


@dataclass
class ClientUpdate:
    """One client's accepted fit result."""

    partition_id: int
    arrays: list[np.ndarray]
    num_examples: int
    metrics: dict[str, Scalar]

    @property
    def payload(self) -> dict[str, np.ndarray]:
        """Named arrays the client attached (:mod:`fedimb.core.payload`)."""
        return payload.unpack(self.metrics)


@dataclass
class RoundLog:
    """What happened in one round, reported as one event line."""

    round: int
    stage: str
    sampled: int = 0
    dropped: int = 0
    succeeded: int = 0
    errors: int = 0
    rejected: int = 0
    nonfinite: int = 0  # of the rejected: updates with NaN or Inf values (a diverging client)
    #: accepted clients a reported number of which was cut to its bound (:meth:`bound`)
    bounded: set[int] = field(default_factory=set)
    #: accepted clients the robust rule left out of the aggregate or down-weighted
    set_aside: set[int] = field(default_factory=set)
    bytes_down: int = 0
    bytes_up: int = 0
    weight_diversity: float | None = None
    #: the largest share of an average of client models any client had this round (the
    #: sensitivity differential privacy's noise is calibrated to)
    largest_share: float | None = None
    client_metrics: dict[str, float] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    #: the global model's scores on the validation share (where the run holds one)
    validation: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the local evaluation: per model ("global", "personal") each client's accuracy on its
    #: local test set and their distribution (average, worst/best 10%, variance in %²)
    local: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)  # the server's phases (seconds)
    client_timing: dict[int, dict[str, float]] = field(
        default_factory=dict
    )  # each replying client's phases

    @property
    def failures(self) -> int:
        """Dropped, failed and rejected clients all count as failures of the round."""
        return self.dropped + self.errors + self.rejected

    def note(self, message: str) -> None:
        """A failure or rejection of the round, for the log and the round's event. Notes
        quote clients' words (exception messages, payload names): made one bounded line
        without the event tag first, so that no client can write an event."""
        message = events.neutral(message)
        logger.warning("round %s: %s", self.round, message)
        if len(self.messages) < 10:
            self.messages.append(message)

    def bound(self, pid: int, what: str) -> None:
        """Client ``pid``'s reported ``what`` was cut to its bound: counted once per client
        and round (``clients.bounded``), each cut noted like a rejection."""
        self.bounded.add(int(pid))
        self.note(f"client {pid}: {what}")

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "round": self.round,
            protocol.STAGE: self.stage,
            "test": self.test,
        }
        if self.validation:
            record["validation"] = self.validation
        if self.round == 0:  # the initial evaluation: nothing was trained
            return record
        record.update(
            {
                "clients": {
                    "sampled": self.sampled,
                    "dropped": self.dropped,
                    "succeeded": self.succeeded,
                    "errors": self.errors,
                    "rejected": self.rejected,
                    "nonfinite": self.nonfinite,
                    "failures": self.failures,
                    "bounded": len(self.bounded),
                    "set_aside": len(self.set_aside),
                },
                "bytes": {"down": self.bytes_down, "up": self.bytes_up},
                "weight_diversity": self.weight_diversity,
                "train": self.client_metrics,
            }
        )
        timing = {**self.timing, **summarise_clients(list(self.client_timing.values()))}
        if timing:
            record["timing"] = timing
        if 0 < len(self.client_timing) <= CLIENT_TIMING_LIMIT:
            record["timing_by_client"] = {
                str(pid): {k: round(v, 4) for k, v in t.items()}
                for pid, t in sorted(self.client_timing.items())
            }
        who = {"bounded": self.bounded, "set_aside": self.set_aside}
        if any(who.values()):  # which clients, beside the counts
            record["influence"] = {k: sorted(ids) for k, ids in who.items() if ids}
        if self.extra:
            record["extra"] = self.extra
        if self.local:
            record["local"] = self.local
        if self.messages:
            record["messages"] = self.messages
        return record
