"""The round loop: Flower's legacy server, reporting one event per round."""

from __future__ import annotations

import logging
import time

from flwr.server import Server, SimpleClientManager
from flwr.server.history import History

from fedimb import report
from strategies.base import BaseStrategy

logger = logging.getLogger(__name__)


class FedImbServer(Server):
    """Runs rounds like Flower's ``Server.fit`` and emits a structured event after the
    initial evaluation (round 0), after every round, and at the end."""

    def __init__(self, strategy: BaseStrategy, max_workers: int | None = None):
        super().__init__(client_manager=SimpleClientManager(), strategy=strategy)
        self.strategy: BaseStrategy = strategy
        self.set_max_workers(max_workers)

    def fit(self, num_rounds: int, timeout: float | None) -> tuple[History, float]:
        history = History()
        start = time.perf_counter()
        self.strategy.begin_round(0)
        self.parameters = self._get_initial_parameters(server_round=0, timeout=timeout)
        report.emit("start", **self.strategy.describe())
        self._evaluate_centrally(0, history)
        report.emit("round", **self.strategy.round_record(), seconds=time.perf_counter() - start)

        for server_round in range(1, num_rounds + 1):
            round_start = time.perf_counter()
            self.strategy.begin_round(server_round)
            res_fit = self.fit_round(server_round=server_round, timeout=timeout)
            if res_fit is not None:
                parameters, fit_metrics, _ = res_fit
                if parameters is not None:
                    self.parameters = parameters
                history.add_metrics_distributed_fit(server_round=server_round, metrics=fit_metrics)
            ended = self.strategy.end_round(server_round)
            if ended is not None:
                self.parameters = ended
            self._evaluate_centrally(server_round, history)
            res_fed = self.evaluate_round(server_round=server_round, timeout=timeout)
            if res_fed is not None and res_fed[0] is not None:
                history.add_loss_distributed(server_round=server_round, loss=res_fed[0])
                history.add_metrics_distributed(server_round=server_round, metrics=res_fed[1])
            now = time.perf_counter()
            report.emit(
                "round", **self.strategy.round_record(), seconds=now - round_start, elapsed=now - start
            )

        elapsed = time.perf_counter() - start
        report.emit("end", rounds=num_rounds, seconds=elapsed)
        return history, elapsed

    def _evaluate_centrally(self, server_round: int, history: History) -> None:
        res = self.strategy.evaluate(server_round, parameters=self.parameters)
        if res is not None:
            history.add_loss_centralized(server_round=server_round, loss=res[0])
            history.add_metrics_centralized(server_round=server_round, metrics=res[1])
