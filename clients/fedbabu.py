"""FedBABU client (Oh et al., ICLR 2022).

Training: only the body (encoder) is updated; the head keeps its random initialisation
for the whole federation. Evaluation: the received model's head is fine-tuned on the
client's local data for ``finetune_epochs`` (the personalisation step of the paper),
then the fine-tuned model is tested on the global balanced test set. Where the round
also tests locally (``local_eval``), the received model is first tested on the
client's local test set, and the fine-tuned one after it (its personal model).
"""

from __future__ import annotations

import torch
from torch import nn

from clients.base import BaseClient
from fedimb.core import protocol
from fedimb.core.training import (
    TrainConfig,
    evaluate_model,
    make_optimizer,
    predict,
    train_epochs,
)


class FedBABUClient(BaseClient):
    """Body-only local training; head fine-tuning when asked to evaluate."""

    trains_encoder_alone = True  # needs an encoder with parameters (not mclr's identity)

    def trainable_parameters(self):
        return self.model.encoder.parameters()

    def evaluate(self, parameters, config):
        if "finetune_epochs" not in config:
            return super().evaluate(parameters, config)
        local = self.data.local_test() if config.get(protocol.LOCAL_EVAL) else None
        scores = (
            self.evaluate_local(parameters)[2] if local is not None else {}
        )  # the received model first
        self.set_parameters(parameters)
        hp = TrainConfig.from_mapping({**config, "local_epochs": int(config["finetune_epochs"])})
        # The body is frozen while the head is tuned: compute the local features once.
        features = predict(self.model.encoder, self.data.x[self.data.indices].to(self.device))
        labels = self.data.y[self.data.indices].to(self.device)
        head = self.model.head
        train_epochs(
            head,
            features,
            labels,
            torch.arange(len(labels)),
            epochs=hp.local_epochs,
            batch_size=hp.batch_size,
            optimizer=make_optimizer(head.parameters(), hp),
            loss_fn=lambda fb, yb: nn.functional.cross_entropy(head(fb), yb),
            generator=self.generator(config),
            device=self.device,
        )
        result = evaluate_model(
            self.model, *(t.to(self.device) for t in self.data.global_test()), self.data.num_classes
        )
        metrics = {
            "finetuned_accuracy": result["accuracy"],
            "finetuned_macro_f1": result["macro_f1"],
            **scores,
        }
        if local is not None:
            x_local, y_local = (t.to(self.device) for t in local)
            metrics[protocol.PERSONAL_LOCAL_ACCURACY] = evaluate_model(
                self.model, x_local, y_local, self.data.num_classes
            )["accuracy"]
        return float(result["loss"]), self.data.num_examples, metrics
