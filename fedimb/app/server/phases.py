"""Where a round's time goes. Each client times its own phases and sends them back with
its fit metrics (``timing.<phase>`` scalars, seconds); the strategy and the round loop
time the server's. The round event carries both under ``timing`` (client phases as the
mean and the maximum over the replying clients), metrics.csv under split ``time``.

Client phases, in the order they happen:

- ``start``: from the process's start to the moment the ClientApp's entry point began
  importing (a fresh ClientApp process in a deployment, a Ray actor in the simulation):
  the interpreter and Flower. Reported by the first fit a process serves (in the
  simulation and a deployment a properties query may have started the process), 0 by
  the later ones, absent in process.
- ``imports``: importing the client app (torch, the method's code).
- ``data``: the client's data (the data set is loaded and partitioned once per process).
- ``model``: the model (built once per process, then reused).
- ``train``: the method's local objective, the model's weights out included.
- ``serialise``: the parameters from and to Flower's wire format (the time Flower's
  NumPyClient wrapper takes beyond the method's fit).

Beside the phases each client reports ``peak_memory_mb``, its process's peak resident
memory so far (what a device must have; absent in process, where the process is the
server's). The round event keeps every replying client's values under
``timing_by_client`` (by client id, for rounds of up to 100 replies) beside the mean and
maximum under ``timing``.

Server phases: ``discover`` (which node serves which client: assigned, or asked where
nodes claim their clients, when in round 1 it waits for them to start), ``select``
(sampling, dropout, instructions), ``first_reply`` and ``last_reply`` (from the
instructions to the first and the last reply), ``aggregate``
(checks and aggregation), ``fit`` (all of the above), ``end_round``, ``test`` (the
server's evaluation; for FedAvg-like methods outside ``in_process``, while the next
round's clients train), ``federated_eval``, ``checkpoint``.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from contextlib import contextmanager

import psutil
from flwr.client import Client, NumPyClient
from flwr.common import FitIns, FitRes

from fedimb.core import events, payload

PREFIX = "timing."
CLIENT_PHASES = ("start", "imports", "data", "model", "train", "serialise")
#: the server's phases inside ``fit``, in the order a round runs them
FIT_PHASES = ("discover", "select", "first_reply", "last_reply", "aggregate")
#: every server phase of a round, in the order a round runs them
SERVER_PHASES = (*FIT_PHASES, "fit", "end_round", "test", "federated_eval", "checkpoint")
#: what a client reports beside its phases (not seconds; summarised the same way)
CLIENT_GAUGES = ("peak_memory_mb",)

#: set by a warm launcher's fork to the moment it began (fedimb.cli.federation.node_worker)
STARTED_AT_VARIABLE = "FEDIMB_PROCESS_STARTED_AT"


def process_started_at() -> float:
    """When this process began: a launcher's fork says so itself (its creation time as
    the system reports it may be the launcher's: QEMU user emulation reports it so);
    otherwise the system's creation time."""
    try:
        return float(os.environ[STARTED_AT_VARIABLE])
    except (KeyError, ValueError):
        return psutil.Process().create_time()


class ProcessStartup:
    """A client process's start-up phases, which its entry point records (when its
    imports began and ended) and hands to every client it builds; the first fit takes
    them, the later ones report zeros."""

    def __init__(self, imports_began: float, imports_ended: float):
        self._phases: dict[str, float] | None = {
            "start": max(0.0, imports_began - process_started_at()),
            "imports": imports_ended - imports_began,
        }

    def take(self) -> dict[str, float]:
        """The start-up phases the first time, zeros afterwards."""
        phases, self._phases = self._phases, None
        return phases or {"start": 0.0, "imports": 0.0}


def peak_memory_mb() -> float:
    """This process's peak resident memory (``ru_maxrss``: KiB on Linux, bytes on macOS).
    A forked process starts from its parent's resident memory, so a warm launcher's
    fork reports what it shares with the launcher too: what the device holds for it."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (
        2**20 if sys.platform == "darwin" else 2**10
    )


class PhaseClock:
    """Seconds per named phase (one client's message, or one round of the server loop)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began

    def metrics(self) -> dict[str, float]:
        return {PREFIX + name: seconds for name, seconds in self.seconds.items()}


class TimedClient(Client):
    """A method's NumPyClient as the Flower client every runtime runs (Flower's own
    NumPyClient wrapper converts the parameters), its fit reporting the phases of ``clock``.

    ``startup``: the start-up of the client's own process (the ClientApp's entry point
    gives it), reported with the process's peak memory; None where the client runs in the
    server's process (``runtime=in_process``), whose start-up and memory are the server's."""

    def __init__(
        self, numpy_client: NumPyClient, clock: PhaseClock, startup: ProcessStartup | None = None
    ):
        self.clock = clock
        self.startup = startup
        method_fit = numpy_client.fit

        def timed_fit(parameters, config):
            with clock.phase("train"):
                return method_fit(parameters, config)

        # what Flower's wrapper calls; the class's fit stays the method's
        numpy_client.fit = timed_fit  # type: ignore[method-assign]
        self.inner = numpy_client.to_client()

    # every call's error message is made safe for the server's log (events.neutral_errors)
    def get_properties(self, ins):
        with events.neutral_errors():
            return self.inner.get_properties(ins)

    def get_parameters(self, ins):
        with events.neutral_errors():
            return self.inner.get_parameters(ins)

    def evaluate(self, ins):
        with events.neutral_errors():
            return self.inner.evaluate(ins)

    def fit(self, ins: FitIns) -> FitRes:
        if self.startup is not None:
            self.clock.seconds.update(self.startup.take())
        with self.clock.phase("serialise"), events.neutral_errors():
            res = self.inner.fit(ins)
        self.clock.seconds["serialise"] -= self.clock.seconds.get("train", 0.0)
        res.metrics.update(self.clock.metrics())
        if self.startup is not None:
            res.metrics[PREFIX + "peak_memory_mb"] = peak_memory_mb()
        return res


def split_client_timing(metrics: dict) -> tuple[dict, dict[str, float]]:
    """A client's fit metrics without its ``timing.*`` entries, and those entries by phase
    (a value that is not a finite number of seconds is dropped: timings never fail a round)."""
    timing = {
        k[len(PREFIX) :]: v
        for k, v in payload.scalars(metrics).items()
        if k.startswith(PREFIX) and math.isfinite(v) and v >= 0
    }
    return {k: v for k, v in metrics.items() if not k.startswith(PREFIX)}, timing


def summarise_clients(per_client: list[dict[str, float]]) -> dict[str, float]:
    """``client_<phase>`` (mean over the clients) and ``client_<phase>_max`` for each phase."""
    out: dict[str, float] = {}
    for phase in (*CLIENT_PHASES, *CLIENT_GAUGES):
        values = [t[phase] for t in per_client if phase in t]
        if values:
            out[f"client_{phase}"] = sum(values) / len(values)
            out[f"client_{phase}_max"] = max(values)
    return out
