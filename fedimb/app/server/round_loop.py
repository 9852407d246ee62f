"""The round loop: Flower's legacy server, reporting one event per round and keeping a
crash-recovery checkpoint of the global model and the strategy's state."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, cast

from flwr.common import Parameters, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import SimpleClientManager
from flwr.server.history import History
from flwr.server.strategy import Strategy

from fedimb.app.configuration.mode_rules import is_asynchronous
from fedimb.app.runtimes.clients_in_turn import ClientsInTurn
from fedimb.app.server import checkpoint, phases
from fedimb.app.server.async_loop import AsynchronousRounds
from fedimb.core import events

if TYPE_CHECKING:  # the run's data and model: the loop only hands the strategy's run around
    from fedimb.app.server.run_context import ServerRun

logger = logging.getLogger(__name__)


class RoundStrategy(Protocol):
    """What the loop asks of a method's strategy besides Flower's hooks
    (``strategies.base.BaseStrategy``, loaded by name, never imported here)."""

    run: ServerRun

    def total_rounds(self) -> int: ...

    def stop_before(self, server_round: int) -> str | None: ...

    def begin_round(self, server_round: int) -> None: ...

    def end_round(self, server_round: int) -> Parameters | None: ...

    def round_record(self) -> dict: ...

    def describe(self) -> dict: ...

    def evaluation_may_overlap(self) -> bool: ...

    def detached_evaluation(self, server_round: int, parameters: Parameters) -> Callable: ...

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple | None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class FedImbServer(ClientsInTurn):
    """Runs rounds like Flower's ``Server.fit`` and emits a structured event after the
    initial evaluation (round 0), after every round, and at the end. After every round
    it checkpoints; with ``resume=true`` it continues after the last checkpointed round
    (sampling, dropout and local shuffling are keyed by the round number, so the rounds
    after it are the ones an uninterrupted run would have had)."""

    strategy: RoundStrategy  # type: ignore[assignment]  # Flower's Strategy, with the hooks above

    def __init__(
        self, strategy: Strategy, max_workers: int | None = None, overlap_evaluation: bool = True
    ):
        """``strategy``: a method's strategy, a Flower strategy with the hooks of
        :class:`RoundStrategy`. ``overlap_evaluation``: test round t while round t+1 trains
        where the strategy allows it (off in process: there the clients share the server's
        process and its redirected output)."""
        self.overlap_evaluation = overlap_evaluation
        super().__init__(client_manager=SimpleClientManager(), strategy=strategy)
        self.strategy = cast(RoundStrategy, strategy)
        self.set_max_workers(max_workers)
        cfg = self.strategy.run.cfg
        self.checkpointing = bool(cfg.checkpoint.enabled)
        self.checkpoint_file = checkpoint.checkpoint_path(cfg)
        # outside a deployment the front end runs on this machine: it removes the checkpoint
        # once the run folder is complete too (a full disk at its end leaves it to resume from)
        self.front_end_removes_checkpoint = cfg.runtime.name != "deployment"
        self.resume = bool(cfg.resume)
        self.history = History()
        self.started = time.perf_counter()
        #: the fit step under secure aggregation (:mod:`fedimb.app.privacy.secagg_fit`), set
        #: by the runtime that has its Grid; None: Flower's fit step
        self.secure_fit: Callable | None = None
        self._reporter: ThreadPoolExecutor | None = None
        self._pending: Future | None = None  # the previous round's test, event and checkpoint
        #: the fit step of ``mode=fedasync|fedbuff`` (None: synchronous rounds)
        self.asynchronous = AsynchronousRounds(self) if is_asynchronous(cfg) else None

    def fit(self, num_rounds: int, timeout: float | None) -> tuple[History, float]:
        self.history = History()
        self.started = time.perf_counter()
        try:
            first_round = self.start(timeout)
            stopped = None
            for server_round in range(first_round, num_rounds + 1):
                stopped = self.strategy.stop_before(server_round)
                if stopped is not None:  # ends like a run that reached num_rounds
                    break
                self.run_round(
                    server_round,
                    timeout,
                    overlap=self.overlap_evaluation and server_round < num_rounds,
                )
            self._finish_pending()
        except Exception as err:  # the front end's one line names it, wherever the log ends
            self._finish_pending(raise_error=False)  # the round before it still reports
            events.emit_error(err)
            raise
        finally:
            if self.asynchronous is not None:
                self.asynchronous.close()
            if self._reporter is not None:
                self._reporter.shutdown()
                self._reporter = None
        elapsed = time.perf_counter() - self.started
        if (
            self.checkpointing and not self.front_end_removes_checkpoint
        ):  # complete: nothing left to recover
            self.checkpoint_file.unlink(missing_ok=True)
        if stopped is None:
            events.emit("end", rounds=num_rounds, seconds=elapsed)
        else:
            events.emit("end", rounds=server_round - 1, seconds=elapsed, stopped=stopped)
        return self.history, elapsed

    def fit_round(self, server_round: int, timeout: float | None):
        """Flower's fit step, the asynchronous one, or the secure one where the run has it."""
        if self.asynchronous is not None:
            return self.asynchronous.step(server_round, timeout)
        if self.secure_fit is not None:
            return self.secure_fit(self, server_round, timeout)
        return super().fit_round(server_round, timeout)

    def run_round(
        self, server_round: int, timeout: float | None = None, overlap: bool = False
    ) -> dict | None:
        """One round: fit, the strategy's end of round, central and federated evaluation,
        checkpoint, and its event; returns the round's record (None where it goes on in the
        background, below). Every runtime (and every
        test that drives a federation round by round) runs rounds through here. The event's
        ``timing`` adds the loop's own phases to the strategy's (:mod:`fedimb.app.server.phases`).

        With ``overlap`` and a strategy that allows it (``evaluation_may_overlap``), the
        central test, the event and the checkpoint run in a background thread while the
        next round's clients train; the next round waits for them before its own test
        (one evaluation model), and ``fit`` never overlaps the last round."""
        round_start = time.perf_counter()
        clock = phases.PhaseClock()
        self.strategy.begin_round(server_round)
        with clock.phase("fit"):
            res_fit = self.fit_round(server_round=server_round, timeout=timeout)
        if res_fit is not None:
            parameters, fit_metrics, _ = res_fit
            if parameters is not None:
                self.parameters = parameters
            self.history.add_metrics_distributed_fit(server_round=server_round, metrics=fit_metrics)
        with clock.phase("end_round"):
            ended = self.strategy.end_round(server_round)
        if ended is not None:
            self.parameters = ended
        self._finish_pending()
        if overlap and self.strategy.evaluation_may_overlap():
            with clock.phase("federated_eval"):  # none for such strategies; kept in its place
                self._evaluate_federated(server_round, timeout)
            finish = self.strategy.detached_evaluation(server_round, self.parameters)
            state = copy.deepcopy(self._state()) if self.checkpointing else None
            self._pending = self._reporter_thread().submit(
                self._report_detached,
                server_round,
                clock,
                finish,
                state,
                time.perf_counter() - round_start,
            )
            return None
        with clock.phase("test"):
            self._evaluate_centrally(server_round)
        with clock.phase("federated_eval"):
            self._evaluate_federated(server_round, timeout)
        record = self.strategy.round_record()
        self._report(
            server_round,
            record,
            clock,
            time.perf_counter() - round_start,
            self._state() if self.checkpointing else None,
        )
        return record

    def _report_detached(
        self, server_round: int, clock: phases.PhaseClock, finish, state, seconds: float
    ) -> None:
        """In the background: the round's test (``finish``), then its event and checkpoint."""
        with clock.phase("test"):
            record, res = finish()
        if res is not None:
            self._record_central(server_round, res)
        self._report(server_round, record, clock, seconds + clock.seconds["test"], state)

    def _report(
        self, server_round: int, record: dict, clock: phases.PhaseClock, seconds: float, state
    ) -> None:
        """The round's checkpoint (``state``, if checkpointing) and event."""
        now = time.perf_counter()
        timing = {**record.get("timing", {}), **clock.seconds}
        event = {**record, "timing": timing, "seconds": seconds, "elapsed": now - self.started}
        if state is not None:
            checkpoint.save(self.checkpoint_file, {"round": server_round, "event": event, **state})
        events.emit(
            "round", **{**event, "timing": {**timing, "checkpoint": time.perf_counter() - now}}
        )

    def _reporter_thread(self) -> ThreadPoolExecutor:
        if self._reporter is None:
            self._reporter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="round-report")
        return self._reporter

    def _finish_pending(self, raise_error: bool = True) -> None:
        """Wait for the previous round's background report; its error becomes this round's."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            pending.result()
        except Exception:
            if raise_error:
                raise

    def start(self, timeout: float | None = None) -> int:
        """Initial parameters (fresh, or from the checkpoint) and the initial evaluation;
        the first round to run."""
        self.strategy.begin_round(0)
        if self.resume and self.checkpoint_file.exists():
            state = checkpoint.load(self.checkpoint_file)
            self.parameters = ndarrays_to_parameters(state["parameters"])
            self.strategy.load_state_dict(state["strategy"])
            if self.asynchronous is not None:
                self.asynchronous.load_state_dict(state["asynchronous"])
            events.emit("start", **self.strategy.describe())
            events.emit("resume", round=int(state["round"]))
            if state.get("event"):  # the checkpointed round's event may have died with the server
                events.emit("round", **state["event"])
            return int(state["round"]) + 1
        if self.resume:
            events.emit(
                "warning", message=f"no checkpoint at {self.checkpoint_file}: starting from round 1"
            )
        self.parameters = self._get_initial_parameters(server_round=0, timeout=timeout)
        events.emit("start", **self.strategy.describe())
        self._evaluate_centrally(0)
        events.emit("round", **self.strategy.round_record(), seconds=0.0)
        return 1

    def _state(self) -> dict:
        """What a checkpoint keeps besides the round and its event."""
        state = {
            "parameters": parameters_to_ndarrays(self.parameters),
            "strategy": self.strategy.state_dict(),
        }
        if self.asynchronous is not None:  # the clients in flight
            state["asynchronous"] = self.asynchronous.state_dict()
        return state

    def _evaluate_centrally(self, server_round: int) -> None:
        res = self.strategy.evaluate(server_round, parameters=self.parameters)
        if res is not None:
            self._record_central(server_round, res)

    def _record_central(self, server_round: int, res: tuple) -> None:
        self.history.add_loss_centralized(server_round=server_round, loss=res[0])
        self.history.add_metrics_centralized(server_round=server_round, metrics=res[1])

    def _evaluate_federated(self, server_round: int, timeout: float | None) -> None:
        res_fed = self.evaluate_round(server_round=server_round, timeout=timeout)
        if res_fed is not None and res_fed[0] is not None:
            self.history.add_loss_distributed(server_round=server_round, loss=res_fed[0])
            self.history.add_metrics_distributed(server_round=server_round, metrics=res_fed[1])
