"""FedBABU server (Oh et al., ICLR 2022): FedAvg of the bodies (the heads sent back are
the untouched random head, so averaging keeps it fixed). Every ``finetune_every``
rounds and after the last, all connected clients fine-tune their model (``finetune_part``:
the head alone, or the whole of it) on their local data and test the result on the global
test set; the mean is logged as
``finetuned_accuracy`` / ``finetuned_macro_f1`` next to the global model's accuracy
(not with ``evaluation.test=false``: the test set stays unread, and the global model's
validation score is the method's). Where the clients hold validation shares of their own
(``evaluation.personal`` with ``evaluation.local_validation_fraction``), the fine-tuned
models are scored there too, and in tuning there alone: the personalised table's
FedBABU is chosen on them, at its fine-tuning rounds.
Where that round is also one of the local evaluation's, the clients test the global
model and their fine-tuned one on their local test sets in the same message (the
distributions ``local.global`` and ``local.personal``)."""

from __future__ import annotations

import dataclasses

from flwr.common import EvaluateIns

from clients.fedbabu import (
    FINETUNE_EPOCHS,
    FINETUNE_PART,
    FINETUNE_PARTS,
    FINETUNED_ACCURACY,
    FINETUNED_MACRO_F1,
)
from fedimb.core import payload, protocol
from fedimb.core.errors import at_least, one_of
from fedimb.core.settings import setting
from strategies.base import BaseStrategy


class FedBABUStrategy(BaseStrategy):
    """FedAvg of the bodies, with fine-tuning at evaluation."""

    personal_evaluation = True  # the fine-tuned models, scored by its own evaluation

    @dataclasses.dataclass(frozen=True)
    class Settings:
        finetune_epochs: int = setting(at_least(1, integer=True))
        finetune_every: int = setting(at_least(1, integer=True))
        finetune_part: str = setting(one_of(*FINETUNE_PARTS))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.finetune_epochs = int(s.finetune_epochs)
        self.finetune_every = int(s.finetune_every)

    def configure_evaluate(self, server_round, parameters, client_manager):
        last = int(self.run.cfg.num_rounds)
        # the fine-tuned models are tested on the test set: not where it must stay unread
        # (tuning), where they are scored on the clients' validation shares, if any (else
        # the global model's validation score is the method's)
        finetunes = not (server_round % self.finetune_every and server_round != last)
        reads_test = self.run.reads_test
        own_validation = bool(self.run.cfg.evaluation.get("personal")) and (
            float(self.run.cfg.evaluation.local_validation_fraction) > 0
        )
        if not (finetunes and (reads_test or own_validation)):
            return super().configure_evaluate(
                server_round, parameters, client_manager
            )  # the local evaluation
        config = {
            **self.fit_config(server_round),
            FINETUNE_EPOCHS: self.finetune_epochs,
            FINETUNE_PART: self.settings.finetune_part,
            protocol.READ_TEST: reads_test,
        }
        if reads_test and self.local_evaluation_due(server_round, parameters):
            config[protocol.LOCAL_EVAL] = True
        return [
            (self.registry.proxy(pid), EvaluateIns(parameters, config))
            for pid in self.trainable_clients()
        ]

    def aggregate_evaluate(self, server_round, results, failures):
        fine_tuned = (FINETUNED_ACCURACY, protocol.PERSONAL_VALIDATION_ACCURACY)
        if not results or not any(
            key in payload.scalars(results[0][1].metrics) for key in fine_tuned
        ):
            return super().aggregate_evaluate(server_round, results, failures)
        results = self.in_partition_order(results)
        self.record_local(results)
        keys = (FINETUNED_ACCURACY, FINETUNED_MACRO_F1)
        metrics = {
            k: sum(payload.scalars(res.metrics).get(k, 0.0) for _, res in results) / len(results)
            for k in keys
            if k in payload.scalars(results[0][1].metrics)
        }
        self.round_log.extra.update(metrics)
        self.round_log.extra["finetuned_clients"] = len(results)
        loss = sum(res.loss for _, res in results) / len(results)
        return loss, metrics
