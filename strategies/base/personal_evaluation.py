"""GRP-FED §4.1's evaluation of personal models, a mixin that methods with a personal
model (or whose global model serves as one) opt into: with ``evaluation.personal``
every connected client tests its personal model on its local test split (T_p) and on
the global test set (T_r); T_l = 2·T_p·T_r/(T_p + T_r) and T_g is the global model's
macro-F1 (eq. 6)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from flwr.common import EvaluateIns, Parameters, Scalar
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import payload, protocol, schema
from strategies.base.replies import EvaluateFailures, EvaluateReplies
from strategies.base.round_log import RoundLog


class PersonalHost(Protocol):
    """What :class:`PersonalEvaluation` reads of the strategy it is mixed into (a
    :class:`strategies.base.BaseStrategy`)."""

    run: ServerRun
    registry: ClientRegistry
    round_log: RoundLog
    ensemble_global_test: bool

    def fit_config(self, server_round: int) -> dict[str, Scalar]: ...
    def should_evaluate(self, server_round: int) -> bool: ...
    def trainable_clients(self) -> list[int]: ...
    def test_client_sets_on_server(self, server_round: int, parameters: Parameters) -> None: ...
    def clients_must_test_locally(self, server_round: int, parameters: Parameters) -> bool: ...
    def record_local(self, results: EvaluateReplies) -> None: ...
    def in_partition_order(
        self, results: list[tuple[ClientProxy, Any]]
    ) -> list[tuple[ClientProxy, Any]]: ...
    def valid_answers(
        self, reported: dict, name: str, left_out_of: str
    ) -> dict[int, np.ndarray]: ...


class PersonalEvaluation:
    """Strategy side of the personal evaluation (pairs with the clients' mixin)."""

    personal_evaluation = True

    #: local-only methods have no global model: their global-test output is the ensemble
    #: (mean probabilities) of the clients' personal models (GRP-FED §4.1, after LG-FedAvg)
    ensemble_global_test = False
    payloads = protocol.PERSONAL_PAYLOADS

    def payload_sizes(self: PersonalHost, num_examples=None):
        """The base sizes and ``num_test``: the global test set the probabilities cover."""
        return {
            **super().payload_sizes(num_examples),
            schema.NUM_TEST: len(self.run.data.dataset.y_test),
        }

    def configure_evaluate(
        self: PersonalHost, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """Federated evaluation for ``evaluation.personal`` (and always for methods whose
        global output is an ensemble of personal models): every connected client
        tests its personal model on its local test split and on the global test set.
        (Evaluation is a measurement: dropout does not apply.)"""
        personal = self.run.cfg.evaluation.get("personal") or self.ensemble_global_test
        if not personal or server_round == 0 or not self.should_evaluate(server_round):
            return super().configure_evaluate(
                server_round, parameters, client_manager
            )  # the local evaluation
        reads_test = self.run.reads_test  # false in tuning: the validation shares alone
        if reads_test:
            self.test_client_sets_on_server(server_round, parameters)
        config = {
            **self.fit_config(server_round),
            protocol.PERSONAL_EVAL: True,
            protocol.READ_TEST: reads_test,
            protocol.RETURN_PROBS: self.ensemble_global_test and reads_test,
            protocol.LOCAL_EVAL: reads_test
            and self.clients_must_test_locally(server_round, parameters),
        }
        ins = EvaluateIns(parameters, config)
        return [(self.registry.proxy(pid), ins) for pid in self.trainable_clients()]

    def aggregate_evaluate(
        self: PersonalHost, server_round: int, results: EvaluateReplies, failures: EvaluateFailures
    ) -> tuple[float | None, dict[str, Scalar]]:
        """T_p, T_r, T_l and T_g (GRP-FED §4.1, eq. 6) from the clients' personal scores,
        and the distributions of the clients' local accuracies."""
        if failures:
            first = next((f for f in failures if isinstance(f, BaseException)), None)
            self.round_log.note(
                f"personal evaluation: {len(failures)} clients failed"
                + (f" ({first})" if first is not None else "")
            )
        if not results:
            return None, {}
        self.record_local(results)
        results = self.in_partition_order(results)
        scores = [payload.scalars(res.metrics) for _, res in results]
        t_p = [s[protocol.PERSONAL_LOCAL_F1] for s in scores if protocol.PERSONAL_LOCAL_F1 in s]
        t_r = [s[protocol.PERSONAL_GLOBAL_F1] for s in scores if protocol.PERSONAL_GLOBAL_F1 in s]
        if self.ensemble_global_test and self.run.reads_test:
            replies = {
                i if pid is None else int(pid): (
                    1,
                    res.metrics,
                )  # a count the probabilities do not use
                for i, (pid, res) in enumerate(
                    (self.registry.partition_of(p), r) for p, r in results
                )
            }
            probs = self.valid_answers(replies, protocol.GLOBAL_TEST_PROBS, "the ensemble")
            if probs:
                self.round_log.test = self.run.score_probabilities(
                    np.mean(list(probs.values()), axis=0)
                )
        metrics = {"T_g": self.round_log.test.get(protocol.MACRO_F1)}
        if t_p and t_r:
            tp, tr = float(np.mean(t_p)), float(np.mean(t_r))
            metrics.update(T_p=tp, T_r=tr, T_l=2 * tp * tr / (tp + tr) if tp + tr > 0 else 0.0)
        self.round_log.extra.update({k: v for k, v in metrics.items() if v is not None})
        return float(np.mean([res.loss for _, res in results])), {
            k: v for k, v in metrics.items() if v is not None
        }
