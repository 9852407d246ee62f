"""Asynchronous aggregation (``mode=fedasync|fedbuff``): the clients train without a round
barrier, and each server step applies the updates that have arrived.

``concurrency`` clients train at once; when one's update arrives another idle client is
drawn at once (uniformly, from the training seed and the dispatch's number; the dropout
model may leave it out, and another is drawn) and starts from the global model of that
moment. A server step (what the round loop calls a round, ``num_rounds`` of them) applies
``buffer_size`` updates (FedBuff) or one (FedAsync) by the rules of
:mod:`fedimb.core.async_update`, through the method's own checks and average. A client
whose update waits in the buffer is not drawn again before the step, so a step averages
distinct clients, as the method's checks expect.

Which update arrives next: under the simulated runtimes, the one whose simulated finish
time (its start plus its fit's seconds under ``speed``, :attr:`ServerRun.client_seconds`;
0 without a speed model), ties broken by dispatch order, so that a run is the same in every
runtime and on every machine; in a deployment the first to reach the server (its clock is
the real one, and a slow node is simply late). The in-flight clients and the buffer are in
every checkpoint: a resumed run sends the in-flight clients their instructions again and
goes on as the uninterrupted run would have.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, cast

import numpy as np
from flwr.common import Code, FitRes, Parameters, Status
from flwr.common import ndarrays_to_parameters as to_parameters
from flwr.common import parameters_to_ndarrays as to_arrays
from flwr.server import Server

from fedimb.app.server.async_queue import Arrival, InFlight
from fedimb.core import async_update
from fedimb.core.staleness import staleness_weight

_STREAM = 0xA5C  # the draws of clients, apart from the seed's other streams
#: draws in a row that the dropout model may refuse before the run is stopped
_MAX_REFUSED_DRAWS = 1000
#: failed fits per client slot after which a step applies what has arrived
_FAILURES_PER_SLOT = 3


class AsynchronousRounds:
    """The fit step of an asynchronous run (``FedImbServer.fit_round`` calls :meth:`step`)."""

    def __init__(self, server: Server):
        """``server``: the run's :class:`fedimb.app.server.round_loop.FedImbServer`."""
        self.server = server
        self.strategy: Any = cast(Any, server.strategy)  # a method's, with its run
        run = self.strategy.run
        self.mode = run.cfg.mode
        self.buffer_size = int(self.mode.buffer_size) if self.mode.name == "fedbuff" else 1
        self.seconds = run.client_seconds  # None: no speed model
        self.simulated = str(run.cfg.runtime.name) != "deployment"
        self.applied = np.zeros(run.num_clients, dtype=np.int64)  # updates applied per client
        self.serial = 0  # dispatches so far
        self.now = 0.0  # simulated seconds (a deployment: real seconds since the start)
        self.in_flight: list[InFlight] = []
        self.buffer: list[Arrival] = []
        self.models: dict[int, list[np.ndarray]] = {}  # global model per version still in use
        self.encoded: dict[int, Parameters] = {}  # the same, serialised once for dispatch
        self.started = time.perf_counter()
        self._pool: ThreadPoolExecutor | None = None
        self._resumed: list[InFlight] = []  # in flight at the checkpoint resumed from
        self.timeout: float | None = None

    # ------------------------------------------------------------------ the step
    def step(self, version: int, timeout: float | None):
        """Server step ``version``: dispatch, collect updates until the buffer is full,
        apply it. Flower's fit-round result: (parameters or None, metrics, (results, failures))."""
        strategy, log = self.strategy, self.strategy.round_log
        with strategy.accounting.phase("discover"):
            strategy.discover_clients(self.server.client_manager())
        strategy.registry.fit_replies.clear()
        current = to_arrays(self.server.parameters)
        self.models[version - 1] = current
        self.encoded[version - 1] = self.server.parameters
        self.timeout = timeout
        for task in self._resumed:  # sent again: their replies died with the last run
            self._dispatch(task)
        self._resumed = []
        self._refill(version)
        failures: list[Any] = []
        # a step gives up on the rest of its buffer after this many failed fits (clients
        # that fail every time would otherwise be drawn again forever)
        patience = _FAILURES_PER_SLOT * int(self.mode.concurrency)
        while len(self.buffer) < self.buffer_size and self.in_flight and len(failures) < patience:
            task = self._next_arrival()
            self.in_flight.remove(task)
            self.now = max(self.now, self._finish_time(task))
            reply = task.reply()
            if isinstance(reply, BaseException) or reply[1].status.code != Code.OK:
                failures.append(reply)
            else:
                arrays = _decoded(reply[1].parameters)
                self.buffer.append(Arrival(task.pid, task.version, arrays, reply, self.now))
            self._refill(version)
        applied, self.buffer = self.buffer, []
        staleness = [version - 1 - a.version for a in applied]
        log.extra.update(
            {
                "async.updates": len(applied),
                "async.staleness_mean": float(np.mean(staleness)) if staleness else None,
                "async.staleness_max": max(staleness, default=None),
                "async.in_flight": len(self.in_flight),
                "clock.time": round(self.now, 6),
            }
        )
        strategy.sim_time = self.now
        parameters, metrics = self._apply(version, current, applied, failures)
        self._forget_models()
        return parameters, metrics, ([a.reply for a in applied], failures)

    def _apply(self, version: int, current, applied: list[Arrival], failures):
        """The method's checks and average over the buffered updates (FedBuff: rebased
        onto the current model), then the server's step."""
        strategy, fedbuff = self.strategy, self.mode.name == "fedbuff"
        weights = [staleness_weight(self.mode.staleness, version - 1 - a.version) for a in applied]
        balance = str(self.mode.balance) == "participation"
        if balance and fedbuff and applied:
            sizes = [a.reply[1].num_examples for a in applied]
            factors = async_update.participation_factors(
                self.applied, [a.pid for a in applied], sizes
            )
            weights = [w * f for w, f in zip(weights, factors)]
        step = float(self.mode.server_lr) if fedbuff else 1.0
        if not fedbuff and applied:
            step = float(self.mode.alpha) * weights[0]
            if balance:
                step *= async_update.fedasync_balance(self.applied, applied[0].pid)
        strategy.sent_models, strategy.sent_layouts = {}, {}
        results = [
            self._as_sent(arrival, current, weight if fedbuff else None)
            for arrival, weight in zip(applied, weights)
        ]
        self.applied[[a.pid for a in applied]] += 1
        aggregate, metrics = strategy.aggregate_fit(version, results, failures)
        if aggregate is None:
            return None, metrics
        new = async_update.mixed(current, to_arrays(aggregate), step)
        strategy.current_weights = new
        return (aggregate if step == 1.0 else to_parameters(new)), metrics

    def _as_sent(self, arrival: Arrival, current, weight: float | None) -> tuple:
        """The reply the method's checks and average see, with the model the client's
        update is measured from: rebased onto ``current`` with ``weight`` (FedBuff), or as
        the client sent it from its start model (FedAsync, and any model whose arrays do
        not match the start model's, which the checks then reject and count)."""
        start = self.models[arrival.version]
        proxy, res = arrival.reply
        layout = [(a.shape, a.dtype) for a in start]
        if weight is not None and [(a.shape, a.dtype) for a in arrival.arrays] == layout:
            arrays = async_update.rebased(current, start, arrival.arrays, weight)
            if arrays is not arrival.arrays:
                res = FitRes(
                    Status(Code.OK, ""), to_parameters(arrays), res.num_examples, res.metrics
                )
            start = current
        self.strategy.sent_models[arrival.pid] = start
        self.strategy.sent_layouts[arrival.pid] = layout
        return proxy, res

    # ------------------------------------------------------------ dispatching
    def _refill(self, version: int) -> None:
        """Draw idle clients until ``concurrency`` train or none is idle."""
        busy = {t.pid for t in self.in_flight} | {a.pid for a in self.buffer}
        refused = 0
        while len(self.in_flight) < int(self.mode.concurrency):
            idle = [pid for pid in self.strategy.trainable_clients() if pid not in busy]
            if not idle:
                return
            self.serial += 1
            rng = np.random.default_rng([self.strategy.run.seed, self.serial, _STREAM])
            pid = int(idle[rng.integers(len(idle))])
            self.strategy.round_log.sampled += 1
            if not self.strategy.run.availability.filter(self.serial, [pid]):
                self.strategy.round_log.dropped += 1
                refused += 1
                if refused >= _MAX_REFUSED_DRAWS:
                    raise RuntimeError(
                        f"the dropout model refused {refused} draws in a row: no client "
                        "can train (dropout.p too low for an asynchronous run)"
                    )
                continue
            refused = 0
            busy.add(pid)
            self._dispatch(InFlight(pid, self.serial, version - 1, self._finish_of(pid)))

    def _finish_of(self, pid: int) -> float:
        return self.now + (float(self.seconds[pid]) if self.seconds is not None else 0.0)

    def _dispatch(self, task: InFlight) -> None:
        """Send ``task``'s client the global model of its version, with the method's
        instruction for the server step it contributes to (version + 1)."""
        strategy = self.strategy
        if task.version not in self.encoded:  # resumed from a checkpoint
            self.encoded[task.version] = to_parameters(self.models[task.version])
        parameters = self.encoded[task.version]
        ins = strategy.fit_instructions(task.version + 1, parameters, [task.pid])[task.pid]
        strategy.accounting.count_sent(ins)
        proxy = strategy.registry.proxy(task.pid)
        call = (proxy, ins, self.timeout, task.version + 1)
        if self.server.max_workers == 1:  # in process: the client trains in this thread
            task.done = _call(*call)
        else:
            task.future = self._threads().submit(_call, *call)
        self.in_flight.append(task)

    def _next_arrival(self) -> InFlight:
        """The in-flight client whose update the server takes next (the module's docstring)."""
        if self.simulated:
            return min(self.in_flight, key=lambda t: (t.finish, t.serial))
        pending = [t.future for t in self.in_flight if t.future is not None and not t.future.done()]
        if pending and len(pending) == len(self.in_flight):
            wait(pending, return_when=FIRST_COMPLETED)
        return min((t for t in self.in_flight if t.arrived()), key=lambda t: t.serial)

    def _finish_time(self, task: InFlight) -> float:
        return task.finish if self.simulated else time.perf_counter() - self.started

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            workers = int(self.mode.concurrency)
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="async-fit")
        return self._pool

    def _forget_models(self) -> None:
        """Keep only the global models an in-flight client started from."""
        keep = {t.version for t in self.in_flight}
        self.models = {v: m for v, m in self.models.items() if v in keep}
        self.encoded = {v: p for v, p in self.encoded.items() if v in keep}

    def close(self) -> None:
        """Wait for the clients still training (their updates come too late to count)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # ------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {
            "serial": self.serial,
            "now": self.now,
            "applied": self.applied.copy(),
            "in_flight": [t.state() for t in self.in_flight],
            "models": dict(self.models),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore; the next step sends the in-flight clients their instructions again."""
        self.serial, self.now = int(state["serial"]), float(state["now"])
        self.applied = np.asarray(state["applied"]).copy()
        self.models = dict(state["models"])
        self._resumed = [InFlight.from_state(task) for task in state["in_flight"]]


def _decoded(parameters: Parameters) -> list[np.ndarray]:
    """A reply's arrays; none where they cannot be read (the method's checks reject the
    reply and say why)."""
    try:
        return to_arrays(parameters)
    except Exception:  # whatever a crafted reply makes decoding raise
        return []


def _call(proxy, ins, timeout: float | None, group_id: int):
    """One client's fit: (proxy, FitRes), or the exception it raised (Flower's failure)."""
    try:
        return proxy, proxy.fit(ins, timeout, group_id)
    except Exception as err:
        return err
