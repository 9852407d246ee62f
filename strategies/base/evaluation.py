"""The global model's evaluation (a part of :class:`strategies.base.BaseStrategy`): the
server's test on the balanced test set (in the round, or detached to overlap the next
round's training) and the local evaluation on the clients' local test sets (by the
clients, or by the server where it holds those test sets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from flwr.common import (
    EvaluateIns,
    Parameters,
    Scalar,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import payload, protocol
from fedimb.core.metrics import accuracy_distribution
from strategies.base.replies import EvaluateFailures, EvaluateReplies
from strategies.base.round_log import RoundLog

#: what the server's test returns to Flower: the loss and the headline metrics
TestResult = tuple[float, dict[str, Scalar]]

#: the scores of the validation share a round's record keeps
VALIDATION_METRICS = (protocol.ACCURACY, protocol.MACRO_F1, protocol.LOSS)


class EvaluationHost(Protocol):
    """What :class:`Evaluation` reads of the strategy it is part of (its own methods
    that call one another are listed too)."""

    run: ServerRun
    registry: ClientRegistry
    round_log: RoundLog
    local_evaluation: bool
    evaluation_overlaps_next_round: bool

    def total_rounds(self) -> int: ...
    def fit_config(self, server_round: int) -> dict[str, Scalar]: ...
    def trainable_clients(self) -> list[int]: ...
    def should_evaluate(self, server_round: int) -> bool: ...
    def local_evaluation_due(self, server_round: int, parameters: Parameters) -> bool: ...
    def test_client_sets_on_server(self, server_round: int, parameters: Parameters) -> None: ...
    def clients_must_test_locally(self, server_round: int, parameters: Parameters) -> bool: ...
    def record_local(self, results: EvaluateReplies) -> None: ...
    def log_local(self, model: str, accuracies: dict[int, float]) -> None: ...
    def evaluate(self, server_round: int, parameters: Parameters) -> TestResult | None: ...
    def evaluation_weights(self, parameters: Parameters) -> list[np.ndarray]: ...
    def test_on_server(
        self, log: RoundLog, weights: list[np.ndarray], model: Any = None
    ) -> TestResult: ...


class Evaluation:
    """The server's test of the global model and the local evaluation."""

    #: whether the global model can be tested on the clients' local test sets (False where
    #: the clients hold other models than the one the server tests, e.g. FedConcat's)
    local_evaluation = True

    # ------------------------------------------------------------ local evaluation
    def local_evaluation_due(
        self: EvaluationHost, server_round: int, parameters: Parameters
    ) -> bool:
        """Whether this round tests the global model on every client's local test set:
        where clients have local test sets (``evaluation.local_test_fraction`` or a data set
        that gives each client its own, Synthetic), every ``evaluation.local_every`` rounds
        and after the last (null: with every central test; 0: never). Clients' own test sets
        that are part of the test set (Synthetic's) are not read where ``evaluation.test``
        is false."""
        if (
            not (self.local_evaluation and self.run.has_local_tests)
            or (self.run.holds_client_tests and not self.run.reads_test)
            or server_round == 0
            or not parameters.tensors
        ):
            return False
        every = self.run.cfg.evaluation.get("local_every")
        if every is None:
            return self.should_evaluate(server_round)
        return int(every) > 0 and (
            server_round % int(every) == 0 or server_round == self.total_rounds()
        )

    def clients_must_test_locally(
        self: EvaluationHost, server_round: int, parameters: Parameters
    ) -> bool:
        """Whether the clients test the global model on their local test sets this round:
        a local evaluation is due and the server does not hold those test sets."""
        return (
            self.local_evaluation_due(server_round, parameters) and not self.run.holds_client_tests
        )

    def test_client_sets_on_server(
        self: EvaluationHost, server_round: int, parameters: Parameters
    ) -> None:
        """Where a local evaluation is due and the server holds the clients' local test
        sets, tests the global model on them here and logs the clients' accuracies."""
        if not (
            self.local_evaluation_due(server_round, parameters) and self.run.holds_client_tests
        ):
            return
        self.log_local(
            "global",
            self.run.local_accuracies(parameters_to_ndarrays(parameters), self.trainable_clients()),
        )

    def configure_evaluate(
        self: EvaluationHost,
        server_round: int,
        parameters: Parameters,
        client_manager: ClientManager,
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """The federated evaluation: in rounds :meth:`local_evaluation_due`, the global model
        to every connected client with training data, to test on its local test set
        (a measurement: dropout does not apply); where the server holds those test sets
        it tests them itself and sends nothing. The server also tests it (:meth:`evaluate`)."""
        self.test_client_sets_on_server(server_round, parameters)
        if not self.clients_must_test_locally(server_round, parameters):
            return []
        ins = EvaluateIns(parameters, {**self.fit_config(server_round), protocol.LOCAL_EVAL: True})
        return [(self.registry.proxy(pid), ins) for pid in self.trainable_clients()]

    def aggregate_evaluate(
        self: EvaluationHost,
        server_round: int,
        results: EvaluateReplies,
        failures: EvaluateFailures,
    ) -> tuple[float | None, dict[str, Scalar]]:
        """The distribution of the clients' local accuracies (:meth:`record_local`)."""
        self.record_local(results)
        return None, {}

    def record_local(self: EvaluationHost, results: EvaluateReplies) -> None:
        """Each client's local accuracy of the global model (and of its personal model,
        where the round also tested those), with their distribution, in the round's log."""
        for key, name in (
            (protocol.LOCAL_ACCURACY, "global"),
            (protocol.PERSONAL_LOCAL_ACCURACY, "personal"),
            (protocol.PERSONAL_VALIDATION_ACCURACY, "personal_validation"),
        ):
            accuracies = {}
            for proxy, res in results:
                value = payload.scalars(res.metrics).get(key)
                if value is not None:
                    accuracies[int(self.registry.partition_of(proxy))] = float(value)
            if accuracies:
                self.log_local(name, accuracies)

    def log_local(self: EvaluationHost, model: str, accuracies: dict[int, float]) -> None:
        """The round's local accuracies of ``model`` ("global" or "personal"), each
        client's and their distribution."""
        self.round_log.local[model] = {
            **accuracy_distribution(accuracies),
            protocol.ACCURACY: dict(sorted(accuracies.items())),
        }

    # ------------------------------------------------------------ the server's test
    def should_evaluate(self: EvaluationHost, server_round: int) -> bool:
        """Whether the server tests the global model after this round: every
        ``evaluation.every`` rounds, before the first and after the last."""
        every = int(self.run.cfg.evaluation.every)
        return server_round % every == 0 or server_round in (0, self.total_rounds())

    def evaluate(
        self: EvaluationHost, server_round: int, parameters: Parameters
    ) -> TestResult | None:
        """Accuracy, macro-F1, per-class recall and loss on the balanced test set."""
        if not self.should_evaluate(server_round):
            return None
        return self.test_on_server(self.round_log, self.evaluation_weights(parameters))

    def test_on_server(
        self: EvaluationHost, log: RoundLog, weights: list[np.ndarray], model: Any = None
    ) -> TestResult:
        """Scores ``weights`` (in ``model``, or the run's model) on the balanced test set into
        ``log.test`` (unless ``evaluation.test`` is false) and on the validation share into
        ``log.validation`` (where the run has one). Flower gets the test scores, or the
        validation scores where the test set is not read."""
        if self.run.reads_test:
            log.test = self.run.evaluate(weights, model)
        if self.run.has_validation:
            scores = self.run.evaluate(weights, model, split="validation")
            log.validation = {key: scores[key] for key in VALIDATION_METRICS}
        shown = log.test if self.run.reads_test else log.validation
        return float(shown[protocol.LOSS]), {
            protocol.ACCURACY: shown[protocol.ACCURACY],
            protocol.MACRO_F1: shown[protocol.MACRO_F1],
        }

    def evaluation_may_overlap(self: EvaluationHost) -> bool:
        """Whether this run may test round t while round t+1 trains: the method allows it
        and no federated evaluation of personal models follows the test."""
        personal = self.run.cfg.evaluation.get("personal") or getattr(
            self, "ensemble_global_test", False
        )
        # the detached test is this class's
        own_test = type(self).evaluate is not Evaluation.evaluate
        return self.evaluation_overlaps_next_round and not personal and not own_test

    def detached_evaluation(
        self: EvaluationHost, server_round: int, parameters: Parameters
    ) -> Callable[[], tuple[dict[str, Any], TestResult | None]]:
        """:meth:`evaluate` and the round's record as a function to call later, from
        another thread, after the next round has begun: what they read (the round's log,
        the weights to test) is captured now. The function returns the round's record and
        ``evaluate``'s result (None where the round is not tested)."""
        log = self.round_log
        weights = (
            self.evaluation_weights(parameters) if self.should_evaluate(server_round) else None
        )

        def finish() -> tuple[dict[str, Any], TestResult | None]:
            result = None if weights is None else self.test_on_server(log, weights)
            return log.to_record(), result

        return finish

    def evaluation_weights(self: EvaluationHost, parameters: Parameters) -> list[np.ndarray]:
        """The weights of the model the server tests (override for composite models)."""
        return parameters_to_ndarrays(parameters)
