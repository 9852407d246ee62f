"""FedBABU server (Oh et al., ICLR 2022): FedAvg of the bodies (the heads sent back are
the untouched random head, so averaging keeps it fixed). Every ``finetune_every``
rounds and after the last, all connected clients fine-tune the head on their local
data and test the result on the global test set; the mean is logged as
``finetuned_accuracy`` / ``finetuned_macro_f1`` next to the global model's accuracy
(not with ``evaluation.test=false``: the test set stays unread, and the global model's
validation score is the method's).
Where that round is also one of the local evaluation's, the clients test the global
model and their fine-tuned one on their local test sets in the same message (the
distributions ``local.global`` and ``local.personal``)."""

from __future__ import annotations

import dataclasses

from flwr.common import EvaluateIns

from clients.fedbabu import FINETUNE_EPOCHS, FINETUNED_ACCURACY, FINETUNED_MACRO_F1
from fedimb.core import payload, protocol
from fedimb.core.errors import at_least
from fedimb.core.settings import setting
from strategies.base import BaseStrategy


class FedBABUStrategy(BaseStrategy):
    """FedAvg with head fine-tuning at evaluation."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        finetune_epochs: int = setting(at_least(1, integer=True))
        finetune_every: int = setting(at_least(1, integer=True))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.finetune_epochs = int(s.finetune_epochs)
        self.finetune_every = int(s.finetune_every)

    def configure_evaluate(self, server_round, parameters, client_manager):
        last = int(self.run.cfg.num_rounds)
        # the fine-tuned heads are tested on the test set: not where it must stay unread
        # (tuning), where the global model's validation score is the method's
        finetunes = not (server_round % self.finetune_every and server_round != last)
        if not (finetunes and self.run.reads_test):
            return super().configure_evaluate(
                server_round, parameters, client_manager
            )  # the local evaluation
        config = {**self.fit_config(server_round), FINETUNE_EPOCHS: self.finetune_epochs}
        if self.local_evaluation_due(server_round, parameters):
            config[protocol.LOCAL_EVAL] = True
        return [
            (self.registry.proxy(pid), EvaluateIns(parameters, config))
            for pid in self.trainable_clients()
        ]

    def aggregate_evaluate(self, server_round, results, failures):
        if not results or FINETUNED_ACCURACY not in payload.scalars(results[0][1].metrics):
            return super().aggregate_evaluate(server_round, results, failures)
        results = self.in_partition_order(results)
        self.record_local(results)
        keys = (FINETUNED_ACCURACY, FINETUNED_MACRO_F1)
        metrics = {
            k: sum(payload.scalars(res.metrics).get(k, 0.0) for _, res in results) / len(results)
            for k in keys
        }
        self.round_log.extra.update(metrics)
        self.round_log.extra["finetuned_clients"] = len(results)
        loss = sum(res.loss for _, res in results) / len(results)
        return loss, metrics
