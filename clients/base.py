"""The base client: parameters in and out, data, the training loop, evaluation, state.

A method's client subclasses :class:`BaseClient` and overrides small hooks —
:meth:`loss`, :meth:`before_training`, :meth:`after_backward`, :meth:`after_step`,
:meth:`after_training`, :meth:`trainable_parameters` — never the loop, so that every
method trains with the same loop. Its settings (``Settings``, :mod:`clients.base_settings`)
arrive in every instruction and are read typed: ``self.settings`` (read by :meth:`fit`
before the hooks run) or :meth:`settings_of` in a hook given the instruction; state that
must outlive a round goes through :meth:`load_state` / :meth:`save_state` (to
``Context.state``, or to disk where one process serves many clients).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np
import torch
from flwr.app import Context
from flwr.client import NumPyClient
from flwr.common import NDArrays, Scalar
from torch import nn

from clients import base_settings
from clients.base_personal import PersonalEvaluation
from fedimb.core import payload, protocol
from fedimb.core.client_state import ClientState, ContextState
from fedimb.core.data.client_data import ClientData
from fedimb.core.errors import ConfigError
from fedimb.core.models import EncoderHeadNet, get_weights, set_weights
from fedimb.core.training import (
    TrainConfig,
    TrainResult,
    evaluate_model,
    make_optimizer,
    predict,
    seeded_generator,
    train_epochs,
)

__all__ = ["BaseClient", "PersonalEvaluation"]


class BaseClient(NumPyClient):
    """Local side of FedAvg; the hooks below are what methods change."""

    #: whether the client scores a personal model (:class:`PersonalEvaluation`)
    personal_evaluation = False
    #: whether the method trains or swaps the encoder apart from the head, so that the
    #: model's encoder needs parameters (checked with the configuration)
    trains_encoder_alone = False
    #: whether the method reads or rebuilds the head as a linear layer (its weight and
    #: bias), so that a model option replacing the head (``cosine_head``,
    #: ``etf_classifier``) is refused with the configuration
    needs_linear_head = False
    #: the instruction keys the method itself adds (no setting may be named so)
    instruction_keys: tuple[str, ...] = ()

    @dataclasses.dataclass(frozen=True)
    class Settings:
        """The method's settings (``method.client``), one field each (:func:`setting`)."""

    @classmethod
    def read_settings(cls, values):
        """The method's settings read from ``values`` (an instruction or the YAML
        section), typed: how a strategy reads a client setting it needs."""
        return base_settings.read_settings(cls.Settings, values)

    @classmethod
    def check_settings(cls, settings) -> None:
        """One-line ``ConfigError`` for the first setting that is not as ``Settings``
        declares it (:func:`clients.base_settings.check_settings`), before any training."""
        base_settings.check_settings(cls.Settings, settings, cls.instruction_keys)

    def __init__(
        self,
        *,
        context: Context,
        data: ClientData,
        model: EncoderHeadNet,
        device: torch.device,
        model_factory: Callable[[], EncoderHeadNet] | None = None,
        state: ClientState | None = None,
    ):
        self.context = context
        #: where :meth:`save_state` keeps arrays between rounds (default: ``Context.state``)
        self.state = state if state is not None else ContextState(context)
        self.data = data
        self.model = model.to(device)
        self.device = device
        self.model_factory = model_factory
        self.config: dict[str, Scalar] = {}
        self.settings = None  # the last instruction's (settings_of)

    def receive(self, config: dict[str, Scalar]) -> None:
        """Keep this instruction and read the method's settings from it (:meth:`fit`
        begins with it)."""
        self.config = dict(config)
        self.settings_of(config)

    def settings_of(self, config: dict[str, Scalar]):
        """The method's settings in the instruction ``config``, typed (``Settings``), kept
        as :attr:`settings` for the hooks that get no instruction (``loss``)."""
        self.settings = base_settings.read_settings(self.Settings, config)
        return self.settings

    def fresh_model(self) -> EncoderHeadNet:
        """A new model with the run's common initialisation (for state that starts there)."""
        if self.model_factory is None:
            raise RuntimeError("this client was built without a model factory")
        return self.model_factory().to(self.device)

    # ------------------------------------------------------------------ plumbing
    def get_properties(self, config: dict[str, Scalar]) -> dict[str, Scalar]:
        """Identity and label histogram, asked once by the server (partition id)."""
        identity = (
            {protocol.PARTITION_ID: -1, protocol.DEVICE_KEY: self.data.device_key}
            if self.data.device_key
            else {protocol.PARTITION_ID: self.data.partition_id}
        )
        return {
            **identity,
            protocol.NUM_EXAMPLES: self.data.num_examples,
            **payload.pack({protocol.LABEL_COUNTS: self.data.label_counts}),
        }

    def get_parameters(self, config: dict[str, Scalar]) -> NDArrays:
        return get_weights(self.model)

    def set_parameters(self, parameters: NDArrays) -> None:
        set_weights(self.model, parameters)

    def fit(
        self, parameters: NDArrays, config: dict[str, Scalar]
    ) -> tuple[NDArrays, int, dict[str, Scalar]]:
        self.set_parameters(parameters)
        self.receive(config)
        hp = TrainConfig.from_mapping(config)
        self.before_training(config)
        optimizer = make_optimizer(self.trainable_parameters(), hp)
        result = train_epochs(
            self.model,
            self.data.x,
            self.data.y,
            self.data.indices,
            epochs=hp.local_epochs,
            batch_size=hp.batch_size,
            optimizer=optimizer,
            loss_fn=self.loss,
            generator=self.generator(config),
            device=self.device,
            after_backward=self.after_backward,
            after_step=self.after_step,
        )
        metrics: dict[str, Scalar] = {
            protocol.TRAIN_LOSS: result.mean_loss,
            protocol.LOCAL_STEPS: result.steps,
        }
        metrics.update(self.after_training(config, result))
        if config.get(protocol.REPORT_LATENT):
            metrics.update(payload.pack({protocol.LATENT_MEAN: self.mean_latent()}))
        return self.get_parameters({}), self.data.num_examples, metrics

    def evaluate(
        self, parameters: NDArrays, config: dict[str, Scalar]
    ) -> tuple[float, int, dict[str, Scalar]]:
        """Loss and accuracy of the received model on this client's local test set
        (``local_eval``), else on its training data."""
        if config.get(protocol.LOCAL_EVAL):
            return self.evaluate_local(parameters)
        self.set_parameters(parameters)
        idx = self.data.indices
        result = evaluate_model(
            self.model,
            self.data.x[idx].to(self.device),
            self.data.y[idx].to(self.device),
            self.data.num_classes,
        )
        return (
            float(result[protocol.LOSS]),
            self.data.num_examples,
            {protocol.ACCURACY: float(result[protocol.ACCURACY])},
        )

    def evaluate_local(self, parameters: NDArrays) -> tuple[float, int, dict[str, Scalar]]:
        """The received (global) model on this client's local test set: its accuracy there
        is one point of the accuracy distribution over clients."""
        self.set_parameters(parameters)
        local = self.data.local_test()
        if local is None:
            raise ConfigError(
                "a local evaluation was asked for, but this client has no local test set"
            )
        x, y = local
        result = evaluate_model(
            self.model, x.to(self.device), y.to(self.device), self.data.num_classes
        )
        return (
            float(result[protocol.LOSS]),
            int(len(y)),
            {protocol.LOCAL_ACCURACY: float(result[protocol.ACCURACY])},
        )

    def local_loss(self) -> float:
        """Mean cross-entropy of the current model on the local training data (e.g. of
        the received global model, before training: q-FFL's F_k)."""
        idx = self.data.indices
        return float(
            evaluate_model(
                self.model,
                self.data.x[idx].to(self.device),
                self.data.y[idx].to(self.device),
                self.data.num_classes,
            )[protocol.LOSS]
        )

    def mean_latent(self) -> np.ndarray:
        """Mean final-hidden-layer representation (encoder output) of the local training
        data under the current model (contribution normalisation, Algorithm 1)."""
        idx = self.data.indices
        return (
            predict(self.model.encoder, self.data.x[idx].to(self.device)).mean(dim=0).cpu().numpy()
        )

    def generator(self, config: dict[str, Scalar]) -> torch.Generator:
        """Shuffling order seeded by (seed, round, client): reproducible in any runtime."""
        return seeded_generator(
            int(config.get(protocol.SEED, 0)),
            int(config.get(protocol.SERVER_ROUND, 0)),
            self.data.partition_id,
        )

    # --------------------------------------------------------------------- hooks
    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Batch loss; plain cross-entropy."""
        return nn.functional.cross_entropy(self.model(x), y)

    def trainable_parameters(self) -> Iterable[nn.Parameter]:
        """Parameters the optimiser updates (e.g. FedBABU: the body only)."""
        return self.model.parameters()

    def before_training(self, config: dict[str, Scalar]) -> None:
        """Runs after the global model is loaded, before the first step."""

    def after_backward(self) -> None:
        """Runs after every backward pass, before the optimiser step (edit gradients here)."""

    def after_step(self) -> None:
        """Runs after every optimiser step."""

    def after_training(self, config: dict[str, Scalar], result: TrainResult) -> dict[str, Scalar]:
        """Extra metrics or named payloads (``fedimb.core.payload.pack``) to return."""
        return {}

    # --------------------------------------------------------------------- state
    def load_state(self, name: str) -> dict[str, np.ndarray] | None:
        """Named arrays saved by :meth:`save_state` in an earlier round, or None."""
        return self.state.load(name)

    def save_state(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        """Keep named arrays for later rounds: in ``Context.state`` (kept by Flower with
        the node) or on disk (:mod:`fedimb.core.client_state`)."""
        self.state.save(name, arrays)
