"""The base strategy every method's strategy subclasses: its settings, the round's
identity and checkpoint state, and Flower's fit step (discovery, sampling, dropout, the
instructions, then aggregation), timed and counted by :class:`RoundAccounting`.

The jobs live in mixins, each in its module: :mod:`.sampling` (discovery and sampling),
:mod:`.updates` and :mod:`.payload_checks` (checking what clients send), :mod:`.aggregation`
(from updates to the global model) and :mod:`.evaluation` (the server's test and the
local evaluation). A method overrides the one step it changes (usually
:meth:`fit_instructions` or :meth:`aggregate`) and calls ``super()`` for the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.common import (
    FitIns,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy
from torch import nn

from fedimb.app.runtimes.node_pool import client_registry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import protocol
from fedimb.core.settings import NoSettings, check_declared, read_declared
from fedimb.core.shrinking import ShrinkSettings
from fedimb.core.training import TRAIN_KEYS
from strategies.base.accounting import RoundAccounting
from strategies.base.aggregation import Aggregation
from strategies.base.clock import on_time_clients
from strategies.base.evaluation import Evaluation
from strategies.base.influence import InfluenceBounds
from strategies.base.payload_checks import PayloadChecks
from strategies.base.replies import FitFailures, FitReplies
from strategies.base.round_log import RoundLog
from strategies.base.sampling import ClientSampling
from strategies.base.updates import Layout, UpdateChecks


class BaseStrategy(
    ClientSampling,
    Evaluation,
    Aggregation,
    UpdateChecks,
    InfluenceBounds,
    PayloadChecks,
    Strategy,
):
    """Shared server behaviour of every fedimb method.

    Sampling is seeded and done over partition ids; the availability model (dropout)
    is applied to the sampled clients; updates with wrong shapes or non-finite values
    are rejected and counted; the global model is evaluated on the balanced test set.
    """

    #: whether the strategy scores personal models (:class:`strategies.base.PersonalEvaluation`)
    personal_evaluation = False
    #: whether round t's central test may run while round t+1 trains (the round loop
    #: then tests in the background, :meth:`detached_evaluation`): only where the next
    #: round does not depend on the test and the test touches nothing but its round's log
    evaluation_overlaps_next_round = False
    #: whether the server step is a weighted average of the clients' models and nothing
    #: else, so that asynchronous modes (``mode=fedasync|fedbuff``) can apply the updates
    #: as they arrive (:mod:`fedimb.app.server.async_loop`); methods with server state or
    #: stages need a synchronous round
    asynchronous = False
    #: the method's strategy settings (``method.strategy``), declared as a client's are:
    #: a frozen dataclass whose fields are the YAML keys, each typed, with a rule through
    #: ``setting(...)``; read into :attr:`settings`
    Settings: type = NoSettings

    @classmethod
    def check_settings(cls, settings) -> None:
        """One-line ``ConfigError`` for the first setting that is unknown, missing, of the
        wrong type or against its rule."""
        check_declared(cls.Settings, settings, "method.strategy")

    def __init__(self, *, run: ServerRun):
        self.run = run
        cfg = run.cfg
        self.settings = read_declared(self.Settings, cfg.method.strategy)
        self.registry = client_registry(cfg)
        self.train_hparams = {k: cfg.train[k] for k in TRAIN_KEYS}
        self.client_hparams = {k: v for k, v in cfg.method.client.items() if k != "_target_"}
        clash = set(self.train_hparams) & set(self.client_hparams)
        if clash:
            raise ValueError(f"method.client must not redefine training settings {sorted(clash)}")
        self.current_weights: list[np.ndarray] | None = None
        #: the simulated seconds of the rounds so far under a speed model (:mod:`.clock`)
        self.sim_time = 0.0
        self.round_updates: list = []  # the accepted updates of the round being aggregated
        normalize = cfg.get("normalize") or {}
        self.normalize_temperature = (
            float(normalize["temperature"]) if normalize.get("name") == "latent_cosine" else None
        )
        shrink = cfg.get("shrink")
        self.shrink = ShrinkSettings.from_config(shrink) if shrink is not None else None
        self._global_names: tuple[list[str], list[str]] | None = None
        self.round_log = RoundLog(0, "train")  # replaced by begin_round
        self.accounting = RoundAccounting(self.round_log)
        #: per client, the shape and dtype of every array it was sent this round
        self.sent_layouts: dict[int, Layout] = {}
        #: per client, the model it was sent this round (its update is measured from it)
        self.sent_models: dict[int, list[np.ndarray]] = {}
        self.clients_discovered = False
        self._payload_sizes: dict[str, object] | None = None

    # ------------------------------------------------------------------ identity
    def stage_of(self, server_round: int) -> str:
        """The phase a Flower round belongs to in a multi-stage method (shown in progress
        and metrics, sent to clients); single-stage methods train throughout."""
        return "train"

    def total_rounds(self) -> int:
        """Flower rounds the run takes; methods whose round is several Flower rounds
        (sequential chains, stages) override this."""
        return int(self.run.cfg.num_rounds)

    #: what ``num_rounds`` counts for this method (:meth:`total_rounds` gives Flower rounds)
    round_unit = "Flower round"

    def describe(self) -> dict[str, Any]:
        """Facts about the run reported once at the start (``num_rounds``: Flower rounds)."""
        model = self.run.new_model()
        return {
            "method": str(self.run.cfg.method.name),
            "num_parameters": int(sum(p.numel() for p in model.parameters())),
            "num_clients": self.run.num_clients,
            "num_rounds": self.total_rounds(),
            "round_unit": self.round_unit,
            "validation_chance": self.run.validation_chance,
        }

    #: attributes that make up the strategy's state besides the global weights; they are
    #: saved in every checkpoint and restored on resume (numpy arrays and plain data)
    checkpoint_attributes: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, Any]:
        return {
            "current_weights": self.current_weights,
            "sim_time": self.sim_time,
            **{name: getattr(self, name) for name in self.checkpoint_attributes},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def stop_before(self, server_round: int) -> str | None:
        """Why the run must end before round ``server_round`` (a spent privacy budget,
        :class:`fedimb.app.privacy.strategy.PrivateStrategy`), or None to run it."""
        return None

    def begin_round(self, server_round: int) -> None:
        """Called by the server before each round (round 0: initial evaluation)."""
        self.round_log = RoundLog(server_round, self.stage_of(server_round))
        self.accounting = RoundAccounting(self.round_log)

    def end_round(self, server_round: int) -> Parameters | None:
        """Called by the server after every round's fit step, even when no client was
        contacted; return new global parameters to replace the current ones (e.g. at
        the end of a multi-round chain), or None."""
        return None

    def round_record(self) -> dict[str, Any]:
        return self.round_log.to_record()

    def global_module(self) -> nn.Module:
        """The module whose ``state_dict`` the global arrays are: the whole model (a
        method whose global model is a part overrides this; LG-FedAvg: the head)."""
        return self.run.new_model()

    def global_arrays_named(self) -> tuple[list[str], list[str]]:
        """The global arrays' names (``state_dict`` order) and the parameters among them
        (the rest are buffers), read once from :meth:`global_module`."""
        if self._global_names is None:
            module = self.global_module()
            self._global_names = (
                list(module.state_dict()),
                [name for name, _ in module.named_parameters()],
            )
        return self._global_names

    # -------------------------------------------------------------- Flower: init
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.current_weights = self.run.initial_weights()
        return ndarrays_to_parameters(self.current_weights)

    # --------------------------------------------------------------- Flower: fit
    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        with self.accounting.phase("discover"):  # round 1: the clients' start-up
            self.discover_clients(client_manager)
        with self.accounting.phase("select"):
            available = self.sample_available_clients(server_round)
            instructions = self.fit_instructions(server_round, parameters, available)
            out = self.address_instructions(instructions)
            self.registry.fit_replies.clear()
        return out

    def sample_available_clients(self, server_round: int) -> list[int]:
        """The sampled clients the availability model (dropout) leaves this round, less
        those a deadline leaves out (:mod:`.clock`); the round's log counts them all."""
        sampled = self.sample_clients(server_round)
        available = self.run.availability.filter(server_round, sampled)
        self.round_log.sampled = len(sampled)
        self.round_log.dropped = len(sampled) - len(available)
        return on_time_clients(self, available)

    def address_instructions(
        self, instructions: dict[int, FitIns]
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Each client's instruction addressed to its node, counted as sent, and the
        model and instruction each client receives kept for checking and bounding its
        update (each distinct model decoded once)."""
        self.sent_layouts, self.sent_models, self.sent_configs = {}, {}, {}
        model_of: dict[int, list[np.ndarray]] = {}
        layout_of: dict[int, Layout] = {}
        out = []
        for pid, ins in instructions.items():
            key = id(ins.parameters)
            if key not in model_of:
                model_of[key] = parameters_to_ndarrays(ins.parameters)
                layout_of[key] = [(a.shape, a.dtype) for a in model_of[key]]
            self.sent_layouts[pid] = layout_of[key]
            self.sent_models[pid] = model_of[key]
            self.sent_configs[pid] = ins.config
            self.accounting.count_sent(ins)
            out.append((self.registry.proxy(pid), ins))
        return out

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        """Settings every client receives: round, stage, training and method settings."""
        config = {
            protocol.SERVER_ROUND: server_round,
            protocol.STAGE: self.stage_of(server_round),
            protocol.SEED: self.run.seed,
            **self.train_hparams,
            **self.client_hparams,
        }
        if self.normalize_temperature is not None:
            config[protocol.REPORT_LATENT] = True
        return config

    def fit_instructions(
        self, server_round: int, parameters: Parameters, clients: list[int]
    ) -> dict[int, FitIns]:
        """What each available client receives; by default the global model for all.

        Override to send different models (clusters, mediator chains) or payloads.
        """
        config = self.fit_config(server_round)
        return {pid: FitIns(parameters, dict(config)) for pid in clients}

    def aggregate_fit(
        self, server_round: int, results: FitReplies, failures: FitFailures
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        with self.accounting.phase("aggregate"):
            self.accounting.count_replies(self.registry.fit_replies)
            return self.aggregate_updates(server_round, results, failures)
