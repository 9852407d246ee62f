"""FedETF client (Li et al., "No Fear of Classifier Biases: Neural Collapse Inspired
Federated Learning with Synthetic and Fixed Classifier", ICCV 2023).

The model (option ``etf_classifier``, :mod:`fedimb.core.models.etf`): encoder, a
learnable projection layer, the L2-normalised feature h, and logits β·hᵀW with W a
fixed simplex ETF that is never trained nor sent, β a learnable temperature.
Local training minimises the paper's balanced feature loss: the cross-entropy of the
logits shifted by log n_c, n_c the client's count of class c (the balanced softmax
of Ren et al., NeurIPS 2020; the authors' code counts an absent class as 1). The
server averages encoder, projection and β (FedAvg).

The personal model is the paper's local adaptation, as the authors' code runs
it: from the received global model, ``adapt_local_epochs`` epochs of the local
training above, then ``adapt_rounds`` alternations of ``adapt_epochs`` epochs that
fine-tune the ETF alone (plain SGD, ``adapt_etf_lr``) and ``adapt_epochs`` epochs that
fine-tune the projection layer alone (the run's optimiser, ``adapt_projection_lr``),
both by plain cross-entropy. It is rebuilt at every personal evaluation and never
leaves the client.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from clients.base_settings import setting
from fedimb.core import protocol
from fedimb.core.errors import ConfigError, at_least
from fedimb.core.models.etf import ETFClassifier, ProjectedEncoder
from fedimb.core.training import TrainConfig, make_optimizer, train_epochs

#: nothing travels beyond the model: the ETF is rebuilt from the seed in every process
PAYLOADS = protocol.BASE_PAYLOADS


def log_class_counts(counts) -> torch.Tensor:
    """log n_c of the client's label histogram, an absent class counted as 1 (the
    authors' code; the paper is silent)."""
    return torch.log(torch.as_tensor(counts, dtype=torch.float32).clamp_min(1.0))


def balanced_feature_loss(
    logits: torch.Tensor, y: torch.Tensor, log_counts: torch.Tensor
) -> torch.Tensor:
    """FedETF's balanced feature loss: −log(n_y·e^{z_y} / Σ_c n_c·e^{z_c}) with
    z = β·hᵀW the ETF logits, i.e. the cross-entropy of z + log n."""
    return nn.functional.cross_entropy(logits + log_counts.to(logits.device), y)


def require_etf_model(model: nn.Module) -> None:
    """One line unless the model has the ETF head (``model_options: etf_classifier``)."""
    if not (isinstance(model.head, ETFClassifier) and isinstance(model.encoder, ProjectedEncoder)):
        raise ConfigError(
            "FedETF needs method.model_options.etf_classifier (projection, normalised "
            "features and a fixed ETF head)"
        )


class FedETFClient(PersonalEvaluation, BaseClient):
    """Balanced feature loss on the fixed-ETF model; local adaptation as personal model."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        adapt_local_epochs: int = setting(at_least(0, integer=True))  # local training first
        adapt_rounds: int = setting(at_least(0, integer=True))  # ETF/projection alternations
        adapt_epochs: int = setting(at_least(0, integer=True))  # epochs of each half-step
        adapt_etf_lr: float = setting(at_least(0))  # SGD step size of the ETF fine-tuning
        adapt_projection_lr: float = setting(at_least(0))  # of the projection fine-tuning

    def before_training(self, config):
        require_etf_model(self.model)
        self.log_counts = log_class_counts(self.data.label_counts).to(self.device)

    def loss(self, x, y):
        return balanced_feature_loss(self.model(x), y, self.log_counts)

    def personal_model(self, parameters, config):
        """The received global model after the local adaptation (module docstring)."""
        self.set_parameters(parameters)
        require_etf_model(self.model)
        settings = self.settings_of(config)
        hp = TrainConfig.from_mapping(config)
        model = copy.deepcopy(self.model)
        log_counts = log_class_counts(self.data.label_counts).to(self.device)
        generator = self.generator(config)

        def train(params, optimizer, epochs, loss_fn):
            model.requires_grad_(False)
            for p in params:
                p.requires_grad_(True)
            train_epochs(
                model,
                self.data.x,
                self.data.y,
                self.data.indices,
                epochs=epochs,
                batch_size=hp.batch_size,
                optimizer=optimizer,
                loss_fn=loss_fn,
                generator=generator,
                device=self.device,
            )

        def cross_entropy(x, y):
            return nn.functional.cross_entropy(model(x), y)

        def balanced(x, y):
            return balanced_feature_loss(model(x), y, log_counts)

        if settings.adapt_local_epochs:
            params = list(model.parameters())
            train(params, make_optimizer(params, hp), settings.adapt_local_epochs, balanced)
        model.head.unfreeze()
        etf = [model.head.etf]
        projection = list(model.encoder.projection.parameters())
        etf_optimizer = torch.optim.SGD(etf, lr=settings.adapt_etf_lr)
        projection_hp = dataclasses.replace(hp, lr=settings.adapt_projection_lr)
        for _ in range(settings.adapt_rounds):
            train(etf, etf_optimizer, settings.adapt_epochs, cross_entropy)
            # a fresh optimiser (momentum) for each half-step, as in the authors' code
            projection_optimizer = make_optimizer(projection, projection_hp)
            train(projection, projection_optimizer, settings.adapt_epochs, cross_entropy)
        model.requires_grad_(False)
        return model.eval()
