"""The client side of personal evaluation (GRP-FED §4.1), a mixin for clients with a
personal model; :mod:`clients.base` exports it beside :class:`~clients.base.BaseClient`."""

from __future__ import annotations

import numpy as np
import torch
from flwr.common import NDArrays, Scalar
from torch import nn

from fedimb.core import payload, protocol
from fedimb.core.training import evaluate_model, predict


class PersonalEvaluation:
    """Client side of GRP-FED §4.1's personal evaluation, a mixin for methods with a
    personal model (pairs with :class:`strategies.base.PersonalEvaluation`): with
    ``personal_eval`` :meth:`evaluate` scores :meth:`personal_model` instead of the
    received model. Put it before :class:`BaseClient` in the bases."""

    personal_evaluation = True

    def evaluate(
        self, parameters: NDArrays, config: dict[str, Scalar]
    ) -> tuple[float, int, dict[str, Scalar]]:
        if not config.get(protocol.PERSONAL_EVAL):
            return super().evaluate(parameters, config)
        scores = (
            self.evaluate_local(parameters)[2] if config.get(protocol.LOCAL_EVAL) else {}
        )  # the global model first
        loss, count, metrics = self.evaluate_personal(parameters, config)
        return loss, count, {**scores, **metrics}

    def evaluate_personal(self, parameters: NDArrays, config: dict[str, Scalar]):
        """Macro-F1 of :meth:`personal_model` on the local test split (T_p) and on the
        global test set (T_r), and its accuracy on the client's own validation share; with
        ``return_probs`` also its global-test probabilities (for the ensemble that is the
        global output of local-only methods). With ``read_test`` false (tuning) only the
        validation share is scored."""
        model = self.personal_model(parameters, config)
        metrics: dict[str, Scalar] = {}
        loss, count = 0.0, 1
        validation = self.data.local_validation()
        if validation is not None:
            scores = self._scores(model, validation)
            metrics[protocol.PERSONAL_VALIDATION_ACCURACY] = scores[protocol.ACCURACY]
            loss, count = float(scores[protocol.LOSS]), int(len(validation[1]))
        if not config.get(protocol.READ_TEST, True):
            return loss, count, metrics
        local_test = self.data.local_test()
        if local_test is not None:
            local = self._scores(model, local_test)
            metrics.update(
                {
                    protocol.PERSONAL_LOCAL_F1: local[protocol.MACRO_F1],
                    protocol.PERSONAL_LOCAL_ACCURACY: local[protocol.ACCURACY],
                }
            )
        x_test, y_test = (t.to(self.device) for t in self.data.global_test())
        result = evaluate_model(model, x_test, y_test, self.data.num_classes)
        metrics.update(
            {
                protocol.PERSONAL_GLOBAL_F1: result[protocol.MACRO_F1],
                protocol.PERSONAL_GLOBAL_ACCURACY: result[protocol.ACCURACY],
            }
        )
        if config.get(protocol.RETURN_PROBS):
            probs = torch.softmax(predict(model, x_test), dim=1).cpu().numpy().astype(np.float32)
            metrics.update(payload.pack({protocol.GLOBAL_TEST_PROBS: probs}))
        return (
            float(result[protocol.LOSS]),
            max(int(len(local_test[1])) if local_test is not None else 0, 1),
            metrics,
        )

    def _scores(self, model: nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> dict:
        x, y = data
        return evaluate_model(model, x.to(self.device), y.to(self.device), self.data.num_classes)

    def personal_model(self, parameters: NDArrays, config: dict[str, Scalar]) -> nn.Module:
        """The model this client uses on its own data; for global-only methods the
        received global model."""
        self.set_parameters(parameters)
        return self.model
