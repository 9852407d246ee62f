"""FedBABU client (Oh et al., ICLR 2022).

Training: only the body (encoder) is updated; the head keeps its random initialisation
for the whole federation. Evaluation: the received model is fine-tuned on the client's
local data for ``finetune_epochs`` (the personalisation step of the paper), then the
fine-tuned model is tested on the global balanced test set. What is fine-tuned is the
strategy's ``finetune_part``: ``head``, the head alone on the frozen body's features (the
abstract's "the head is fine-tuned"), or ``full``, body and head by one SGD at the run's
learning rate (the authors' personalisation, jhoon-oh/FedBABU ``analysis.ipynb``, runs
one optimiser over both, at its own rate of 1e-3 with momentum 0.9). Where the
round also tests locally (``local_eval``), the received model is first tested on the
client's local test set, and the fine-tuned one after it (its personal model). The
fine-tuned model is also scored on the client's own validation share, where it has one;
with ``read_test`` false (tuning) on that share alone.
"""

from __future__ import annotations

import torch

from clients.base import BaseClient
from fedimb.core import protocol
from fedimb.core.training import TrainConfig, evaluate_model, train_cross_entropy, train_head

#: the instruction to fine-tune for this many epochs before the test
FINETUNE_EPOCHS = "finetune_epochs"
#: the instruction saying what the fine-tuning trains: one of FINETUNE_PARTS
FINETUNE_PART = "finetune_part"
#: the head alone, or the whole model (body and head)
FINETUNE_PARTS = HEAD, FULL = "head", "full"
#: the fine-tuned model's scores on the global test set
FINETUNED_ACCURACY, FINETUNED_MACRO_F1 = "finetuned_accuracy", "finetuned_macro_f1"


class FedBABUClient(BaseClient):
    """Body-only local training; fine-tuning when asked to evaluate."""

    trains_encoder_alone = True  # needs an encoder with parameters (not mclr's identity)
    instruction_keys = (FINETUNE_EPOCHS, FINETUNE_PART)
    personal_evaluation = True  # its fine-tuned model, scored by its own evaluation

    def trainable_parameters(self):
        return self.model.encoder.parameters()

    def evaluate(self, parameters, config):
        if FINETUNE_EPOCHS not in config:
            return super().evaluate(parameters, config)
        local = self.data.local_test() if config.get(protocol.LOCAL_EVAL) else None
        scores = (
            self.evaluate_local(parameters)[2] if local is not None else {}
        )  # the received model first
        self.set_parameters(parameters)
        hp = TrainConfig.from_mapping({**config, "local_epochs": int(config[FINETUNE_EPOCHS])})
        x, y = self.data.x[self.data.indices], self.data.y[self.data.indices]
        if config[FINETUNE_PART] == HEAD:
            train_head(self.model, x, y, hp, self.generator(config), self.device)
        else:
            indices = torch.arange(len(y))
            train_cross_entropy(
                self.model, x, y, indices, hp, self.generator(config), device=self.device
            )
        validation = self.data.local_validation()
        if validation is not None:
            x_val, y_val = (t.to(self.device) for t in validation)
            scores[protocol.PERSONAL_VALIDATION_ACCURACY] = evaluate_model(
                self.model, x_val, y_val, self.data.num_classes
            )[protocol.ACCURACY]
        if not config.get(protocol.READ_TEST, True):
            return 0.0, max(len(validation[1]) if validation else 0, 1), scores
        result = evaluate_model(
            self.model, *(t.to(self.device) for t in self.data.global_test()), self.data.num_classes
        )
        metrics = {
            FINETUNED_ACCURACY: result[protocol.ACCURACY],
            FINETUNED_MACRO_F1: result[protocol.MACRO_F1],
            **scores,
        }
        if local is not None:
            x_local, y_local = (t.to(self.device) for t in local)
            metrics[protocol.PERSONAL_LOCAL_ACCURACY] = evaluate_model(
                self.model, x_local, y_local, self.data.num_classes
            )[protocol.ACCURACY]
        return float(result[protocol.LOSS]), self.data.num_examples, metrics
