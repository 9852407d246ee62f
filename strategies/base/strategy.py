"""The base strategy: sampling, dropout, instructions, aggregation, evaluation.

Every method's strategy subclasses :class:`BaseStrategy` and overrides the one step
it changes (usually :meth:`fit_instructions` or :meth:`aggregate`), calling
``super()`` for the rest (DESIGN §4.3).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from fedimb.app.registry import ClientRegistry, check_workers_alive
from fedimb.app.run_context import ServerRun
from fedimb.core import events, payload, protocol, robust
from fedimb.core.aggregate import (
    contribution_factors,
    weight_diversity,
)
from fedimb.core.errors import check_rules
from fedimb.core.metrics import accuracy_distribution
from fedimb.core.training import TRAIN_KEYS
from strategies.base.round_log import ClientUpdate, RoundLog
from strategies.base.updates import UpdateChecks, parameters_nbytes


class BaseStrategy(UpdateChecks, Strategy):
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
    #: rules for the method's strategy settings (``method.strategy``), by name, e.g.
    #: ``{"weighting": one_of("uniform", "samples")}``; checked with the configuration
    setting_rules: dict = {}

    @classmethod
    def check_settings(cls, settings) -> None:
        """One-line ``ConfigError`` for the first setting that breaks its rule."""
        check_rules(cls.setting_rules, settings, "method.strategy")

    def __init__(self, *, run: ServerRun):
        self.run = run
        cfg = run.cfg
        # a node's first answer includes starting its ClientApp: allow the connect timeout
        self.registry = ClientRegistry(
            query_timeout=cfg.runtime.get("connect_timeout"), capacity=int(cfg.num_clients)
        )
        self.train_hparams = {k: cfg.train[k] for k in TRAIN_KEYS}
        self.client_hparams = {k: v for k, v in cfg.method.client.items() if k != "_target_"}
        clash = set(self.train_hparams) & set(self.client_hparams)
        if clash:
            raise ValueError(f"method.client must not redefine training settings {sorted(clash)}")
        self.current_weights: list[np.ndarray] | None = None
        normalize = cfg.get("normalize") or {}
        self.normalize_temperature = (
            float(normalize["temperature"]) if normalize.get("name") == "latent_cosine" else None
        )
        self.round_log = RoundLog(0, "train")  # replaced by begin_round
        #: per client, the shape and dtype of every array it was sent this round
        self._sent_models: dict[int, list[tuple[tuple[int, ...], np.dtype]]] = {}
        self._sent_at: float | None = None  # when this round's fit instructions were ready
        self._discovered = False

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
        }

    #: attributes that make up the strategy's state besides the global weights; they are
    #: saved in every checkpoint and restored on resume (numpy arrays and plain data)
    checkpoint_attributes: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, Any]:
        return {
            "current_weights": self.current_weights,
            **{name: getattr(self, name) for name in self.checkpoint_attributes},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def begin_round(self, server_round: int) -> None:
        """Called by the server before each round (round 0: initial evaluation)."""
        self.round_log = RoundLog(server_round, self.stage_of(server_round))

    def end_round(self, server_round: int) -> Parameters | None:
        """Called by the server after every round's fit step, even when no client was
        contacted; return new global parameters to replace the current ones (e.g. at
        the end of a multi-round chain), or None."""
        return None

    def round_record(self) -> dict[str, Any]:
        return self.round_log.to_record()

    # -------------------------------------------------------------- Flower: init
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.current_weights = self.run.initial_weights()
        return ndarrays_to_parameters(self.current_weights)

    # --------------------------------------------------------------- Flower: fit
    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        began = time.perf_counter()
        self._refresh_clients(client_manager)
        self.round_log.timing["discover"] = (
            time.perf_counter() - began
        )  # round 1: the clients' start-up
        began = time.perf_counter()
        sampled = self.sample_clients(server_round)
        available = self.run.availability.filter(server_round, sampled)
        self.round_log.sampled = len(sampled)
        self.round_log.dropped = len(sampled) - len(available)
        instructions = self.fit_instructions(server_round, parameters, available)
        self._sent_models = {}
        layout_of: dict[
            int, list[tuple[tuple[int, ...], np.dtype]]
        ] = {}  # decode each distinct model once
        out = []
        for pid, ins in instructions.items():
            key = id(ins.parameters)
            if key not in layout_of:
                layout_of[key] = [
                    (a.shape, a.dtype) for a in parameters_to_ndarrays(ins.parameters)
                ]
            self._sent_models[pid] = layout_of[key]
            self.round_log.bytes_down += parameters_nbytes(ins.parameters) + payload.nbytes(
                ins.config
            )
            out.append((self.registry.proxy(pid), ins))
        self.registry.fit_replies.clear()
        self._sent_at = time.perf_counter()
        self.round_log.timing["select"] = self._sent_at - began
        return out

    def _refresh_clients(self, client_manager: ClientManager) -> None:
        runtime = self.run.cfg.runtime
        wait = 0 if self._discovered else self.run.num_clients
        self.registry.refresh(
            client_manager, wait_for=wait, timeout=float(runtime.connect_timeout or 120)
        )
        for refusal in self.registry.take_refusals():  # a bad or duplicate identity claim
            self.round_log.note(refusal)
        if not self._discovered:
            missing = self.run.num_clients - len(self.registry.partition_ids())
            if missing > 0:
                unstarted = list(self.registry.unstarted_nodes(client_manager).values())
                events.emit_clients_lost(
                    self.run.num_clients, lost_client_reasons(missing, unstarted)
                )
            own = [pid for pid in self.registry.partition_ids() if self.registry.has_own_data(pid)]
            if own:
                self.round_log.note(
                    f"clients {', '.join(map(str, own))} bring their own data: their sample counts "
                    "are bounded by the sizes they announced on joining, which the server cannot check"
                )
            self._discovered = True

    def trainable_clients(self) -> list[int]:
        """Connected clients (partition ids) that hold training samples."""
        empty = self.run.empty_clients
        return [pid for pid in self.registry.partition_ids() if pid not in empty]

    def sample_clients(self, server_round: int) -> list[int]:
        """Seeded sample of ``fraction_fit`` of the connected clients with training
        samples (partition ids), without replacement: uniform, or with ``sampling=by_size``
        with probability proportional to their training samples (:func:`sampling_probabilities`)."""
        known = self.trainable_clients()
        if not known:
            return []
        cfg = self.run.cfg
        k = max(
            int(cfg.min_fit_clients), int(round(float(cfg.fraction_fit) * self.run.num_clients))
        )
        sizes = self.run.data.partition.counts[known].sum(axis=1)
        return draw_clients(
            self.run.seed, server_round, known, k, str(cfg.get("sampling", "uniform")), sizes
        )

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
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        began = time.perf_counter()
        replies = self.registry.fit_replies
        if (
            replies and self._sent_at is not None
        ):  # from the instructions to the first and the last reply
            self.round_log.timing.update(
                first_reply=min(replies) - self._sent_at, last_reply=max(replies) - self._sent_at
            )
        try:
            return self._aggregate_fit(server_round, results, failures)
        finally:
            self.round_log.timing["aggregate"] = time.perf_counter() - began

    def _aggregate_fit(
        self, server_round, results, failures
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        updates = self.accept_updates(results, failures)
        check_workers_alive(server_round, failures, len(results))
        minimum = int(self.run.cfg.get("min_successful_clients", 1))
        if len(updates) < minimum:
            if updates:
                self.round_log.note(
                    f"only {len(updates)} of the {minimum} updates a round needs "
                    "(min_successful_clients): global model unchanged"
                )
            return None, {}
        if updates[0].arrays and all(
            len(u.arrays) == len(updates[0].arrays)
            and all(a.shape == b.shape for a, b in zip(u.arrays, updates[0].arrays))
            for u in updates
        ):
            self.round_log.weight_diversity = weight_diversity([u.arrays for u in updates])
        self.round_log.client_metrics = self.aggregate_metrics(updates)
        new_weights = self.aggregate(server_round, updates)
        if new_weights is None or not self.adoptable(new_weights, "the aggregate"):
            return None, self.round_log.client_metrics
        self.current_weights = new_weights
        return ndarrays_to_parameters(new_weights), self.round_log.client_metrics

    def adoptable(self, weights: list[np.ndarray], what: str) -> bool:
        """Whether ``weights`` (a new global model, or server state every client will
        receive) may be adopted: every value finite. Otherwise the round notes why and
        the caller keeps what it had."""
        for i, arr in enumerate(weights):
            if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
                self.round_log.note(f"{what} holds NaN or Inf (array {i}): kept the previous one")
                return False
        return True

    def aggregate(self, server_round: int, updates: list[ClientUpdate]) -> list[np.ndarray] | None:
        """New global weights from accepted updates: FedAvg weighting by sample count."""
        weights = self.aggregation_weights(updates, [u.num_examples for u in updates])
        return self.average_models([u.arrays for u in updates], weights)

    def aggregation_weights(self, updates: list[ClientUpdate], base_weights) -> np.ndarray:
        """The per-client weights a strategy aggregates with: its own ν_r, multiplied by
        the contribution factors Λ_r when ``normalize=latent_cosine`` (eqs. 6–7; the
        caller's weighted average divides by Λ·ν). Every weighted aggregation goes
        through here, so the switch applies to every such method."""
        base = np.asarray(base_weights, dtype=np.float64)
        if self.normalize_temperature is None:
            return base
        latents = [u.payload.get(protocol.LATENT_MEAN) for u in updates]
        if any(z is None for z in latents):
            self.round_log.note("normalisation skipped: an update carries no latent_mean")
            return base
        return self.contribution_weighted(base, latents, [u.partition_id for u in updates])

    def average_models(
        self, arrays_list: list[list[np.ndarray]], weights
    ) -> list[np.ndarray] | None:
        """The client models combined by the configured ``aggregation`` rule (default: the
        weighted mean, unchanged), each update first clipped where ``max_update_norm`` says;
        None (and a note why) when the round has too few updates for the rule, so that the
        previous global model stays. Every method that averages client models calls this."""
        settings = robust.RobustSettings.from_config(self.run.cfg.get("aggregation"))
        new, reason = robust.combine(arrays_list, weights, self.current_weights, settings)
        if new is None:
            self.round_log.note(reason)
        return new

    def contribution_weighted(self, base: np.ndarray, latents, ids) -> np.ndarray:
        """Λ·ν for aggregation units (clients, or e.g. Astraea's mediators) with the given
        mean latents. A single unit keeps its weight (Λ of one client is undefined)."""
        if len(latents) < 2:
            return base
        factors = contribution_factors(np.stack(latents), self.normalize_temperature)
        self.round_log.extra.update({f"contribution.{i}": float(f) for i, f in zip(ids, factors)})
        return factors * base

    @staticmethod
    def aggregate_metrics(updates: list[ClientUpdate]) -> dict[str, float]:
        """Sample-weighted mean of every numeric client metric, over the clients that
        reported it (a client that leaves a metric out, or sends text, does not pull the
        others' mean towards zero)."""
        sums: dict[str, float] = {}
        totals: dict[str, int] = {}
        for u in updates:
            for key, value in payload.scalars(u.metrics).items():
                if math.isfinite(value):
                    sums[key] = sums.get(key, 0.0) + value * u.num_examples
                    totals[key] = totals.get(key, 0) + u.num_examples
        return {k: v / totals[k] for k, v in sums.items()}

    # ---------------------------------------------------------- Flower: evaluate
    #: whether the global model can be tested on the clients' local test sets (False where
    #: the clients hold other models than the one the server tests, e.g. FedConcat's)
    local_evaluation = True

    def local_evaluation_due(self, server_round: int, parameters: Parameters) -> bool:
        """Whether this round tests the global model on every client's local test set:
        where clients have local test sets (``evaluation.local_test_fraction`` or a data set
        that gives each client its own, Synthetic), every ``evaluation.local_every`` rounds
        and after the last (null: with every central test; 0: never)."""
        if (
            not (self.local_evaluation and self.run.has_local_tests)
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

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """The federated evaluation: in rounds :meth:`local_evaluation_due`, the global model
        to every connected client with training data, to test on its local test set
        (a measurement: dropout does not apply); where the server holds those test sets
        it tests them itself and sends nothing. The server also tests it (:meth:`evaluate`)."""
        if not self.clients_test_locally(server_round, parameters):
            return []
        ins = EvaluateIns(parameters, {**self.fit_config(server_round), protocol.LOCAL_EVAL: True})
        return [(self.registry.proxy(pid), ins) for pid in self.trainable_clients()]

    def clients_test_locally(self, server_round: int, parameters: Parameters) -> bool:
        """Whether the clients test the global model on their local test sets this round:
        a local evaluation is due and the server does not hold those test sets; where it
        does, it records the clients' accuracies here, computed on the server."""
        if not self.local_evaluation_due(server_round, parameters):
            return False
        if not self.run.holds_client_tests:
            return True
        self.log_local(
            "global",
            self.run.local_accuracies(parameters_to_ndarrays(parameters), self.trainable_clients()),
        )
        return False

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[tuple[ClientProxy, EvaluateRes] | BaseException],
    ) -> tuple[float | None, dict[str, Scalar]]:
        """The distribution of the clients' local accuracies (:meth:`record_local`)."""
        self.record_local(results)
        return None, {}

    def record_local(self, results: list[tuple[ClientProxy, EvaluateRes]]) -> None:
        """Each client's local accuracy of the global model (and of its personal model,
        where the round also tested those), with their distribution, in the round's log."""
        for key, name in (
            (protocol.LOCAL_ACCURACY, "global"),
            (protocol.PERSONAL_LOCAL_ACCURACY, "personal"),
        ):
            accuracies = {}
            for proxy, res in results:
                value = payload.scalars(res.metrics).get(key)
                if value is not None:
                    accuracies[int(self.registry.partition_of(proxy))] = float(value)
            if accuracies:
                self.log_local(name, accuracies)

    def log_local(self, model: str, accuracies: dict[int, float]) -> None:
        """The round's local accuracies of ``model`` ("global" or "personal"), each
        client's and their distribution."""
        self.round_log.local[model] = {
            **accuracy_distribution(accuracies),
            "accuracy": dict(sorted(accuracies.items())),
        }

    def should_evaluate(self, server_round: int) -> bool:
        every = int(self.run.cfg.evaluation.every)
        return server_round % every == 0 or server_round in (0, self.total_rounds())

    def evaluate(
        self, server_round: int, parameters: Parameters
    ) -> tuple[float, dict[str, Scalar]] | None:
        """Accuracy, macro-F1, per-class recall and loss on the balanced test set."""
        if not self.should_evaluate(server_round):
            return None
        return self._test(self.round_log, self.evaluation_weights(parameters))

    def _test(self, log: RoundLog, weights: list[np.ndarray]) -> tuple[float, dict[str, Scalar]]:
        log.test = self.run.evaluate(weights)
        return float(log.test["loss"]), {
            "accuracy": log.test["accuracy"],
            "macro_f1": log.test["macro_f1"],
        }

    def evaluation_may_overlap(self) -> bool:
        """Whether this run may test round t while round t+1 trains: the method allows it
        and no federated evaluation of personal models follows the test."""
        personal = self.run.cfg.evaluation.get("personal") or getattr(
            self, "ensemble_global_test", False
        )
        own_test = (
            type(self).evaluate is not BaseStrategy.evaluate
        )  # the detached test is the base one
        return self.evaluation_overlaps_next_round and not personal and not own_test

    def detached_evaluation(self, server_round: int, parameters: Parameters):
        """:meth:`evaluate` and :meth:`round_record` of this round as a function to call
        later, from another thread, after :meth:`begin_round` of the next round: what they
        read (the round's log, the weights to test) is captured now. The function returns
        the round's record and ``evaluate``'s result (None where the round is not tested)."""
        log = self.round_log
        weights = (
            self.evaluation_weights(parameters) if self.should_evaluate(server_round) else None
        )

        def finish() -> tuple[dict[str, Any], tuple[float, dict[str, Scalar]] | None]:
            result = None if weights is None else self._test(log, weights)
            return log.to_record(), result

        return finish

    def evaluation_weights(self, parameters: Parameters) -> list[np.ndarray]:
        """The weights of the model the server tests (override for composite models)."""
        return parameters_to_ndarrays(parameters)


def lost_client_reasons(missing: int, unstarted: list[str]) -> dict[str, int]:
    """Why ``missing`` clients never joined: one per connected node whose ClientApp failed
    (``unstarted``: each node's reason; more such nodes than missing clients are extra
    nodes), the rest did not connect. Each cause once, with how many clients it took."""
    reasons: dict[str, int] = {}
    for why in unstarted[:missing]:
        reasons[f"could not start: {why}"] = reasons.get(f"could not start: {why}", 0) + 1
    silent = missing - sum(reasons.values())
    if silent > 0:
        reasons["did not connect"] = silent
    return reasons


def draw_clients(
    seed: int, server_round: int, candidates: list[int], k: int, sampling: str, sizes: np.ndarray
) -> list[int]:
    """The ``k`` (at most all) of ``candidates`` that round ``server_round`` trains, without
    replacement, seeded by ``seed`` and the round alone; ``sizes`` are the candidates'
    training samples (for ``sampling=by_size``)."""
    rng = np.random.default_rng([seed, server_round, 0x5A3])
    p = sampling_probabilities(sampling, sizes)
    return sorted(
        int(c) for c in rng.choice(candidates, size=min(k, len(candidates)), replace=False, p=p)
    )


def sampling_probabilities(sampling: str, sizes: np.ndarray) -> np.ndarray | None:
    """Each client's chance to be drawn next: None (uniform) for ``uniform``; for
    ``by_size``, n_k / Σ n over the candidates — the q-FFL authors' release samples so
    (``--sampling=2``, "weights of sampling devices proportional to the number of local
    data points") and then averages the updates uniformly, as q-FedAvg's update does, so
    that q = 0 optimises the data-weighted objective Σ_k (n_k/n) F_k of the paper's eq. (2)."""
    if sampling == "uniform":
        return None
    sizes = np.asarray(sizes, dtype=np.float64)
    return sizes / sizes.sum()
