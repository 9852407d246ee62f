"""FedConcat / FedConcat-ID server (Diao et al., "Exploiting Label Skews in Federated
Learning with Model Concatenation", AAAI 2024, Algorithm 1).

Stages within one run of ``num_rounds`` Flower rounds:

1. **cluster** — FedConcat: K-means on the clients' label distributions (eq. 2; with
   ``laplace_epsilon`` the clients noise them first). FedConcat-ID (``inferred: true``)
   spends round 1 on local training from the common initialisation and clusters the
   distributions inferred from those models (eq. 3). A client without an inferred
   distribution (dropped or failed in round 1) counts as uniform. A reported distribution
   or histogram that breaks its declaration (:data:`clients.fedconcat.PAYLOADS`)
   leaves its client out of the clustering (one note); it trains cluster 0's model, like
   a client that joins later.
2. **encoders** — one FedAvg model per cluster: each client trains its own cluster's
   model; clusters nobody trained in a round keep their model. Every cluster starts from
   the run's common initialisation.
3. **classifier** — the last ``classifier_rounds`` rounds: the K encoders (all layers
   but the last) are frozen and concatenated, sent once to each client (tracked per
   client: a client that missed the first classifier round gets them when it is next
   sampled), and all clients train one linear classifier on the K·d features by FedAvg.
   The final model {E, C} is tested every round.

The run folder gets ``clusters.json`` (assignments, distributions used, inferred or
not) and ``elbow.json``/``elbow.png`` (K-means inertia for K = 1..``elbow_max_k``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from flwr.common import FitIns, ndarrays_to_parameters

from clients.fedconcat import (
    INFER_SAMPLES,
    INFERRED_DISTRIBUTION,
    LABEL_DISTRIBUTION,
    LAPLACE_EPSILON,
    PAYLOADS,
    STAGE_CLASSIFIER,
    STAGE_CLUSTER,
    STAGE_ENCODERS,
)
from fedimb.core import events, protocol
from fedimb.core.aggregate import weighted_average
from fedimb.core.clustering import elbow_inertias, kmeans_clusters, label_distribution
from fedimb.core.errors import ConfigError, at_least, optional
from fedimb.core.models import get_weights, num_parameters
from fedimb.core.models.concat import (
    concatenated_model,
    encoders_to_payload,
    split_model_weights,
)
from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate


class FedConcatStrategy(BaseStrategy):
    """Label-distribution clustering, per-cluster FedAvg, concatenated encoders."""

    local_evaluation = (
        False  # until the last stage the clients hold their cluster's model, not the tested one
    )
    robust_aggregation = "none"  # per-cluster models, then a classifier: not one global average

    @staticmethod
    def refuses_tokens(settings) -> str | None:
        """FedConcat-ID's eq. 3 feeds the models standard-normal inputs, which have no
        counterpart among character numbers (a text data set's inputs)."""
        if not settings["inferred"]:
            return None
        return (
            "FedConcat-ID infers label distributions from random standard-normal inputs "
            "(eq. 3); use method=fedconcat"
        )

    checkpoint_attributes = (
        "clusters",
        "cluster_weights",
        "inferred_distributions",
        "encoders",
        "classifier",
        "has_extractor",
    )

    @classmethod
    def check_configuration(cls, cfg) -> None:
        """The run's rounds leave at least one encoder round after the clustering."""
        settings = cfg.method.strategy
        inferred = bool(settings.inferred)
        if int(cfg.num_rounds) - int(settings.classifier_rounds) <= (1 if inferred else 0):
            raise ConfigError(
                f"num_rounds={cfg.num_rounds} leaves no encoder round: it must exceed "
                f"method.strategy.classifier_rounds{' + 1 (inference round)' if inferred else ''}"
            )

    @dataclasses.dataclass(frozen=True)
    class Settings:
        num_clusters: int = setting(at_least(1, integer=True))
        classifier_rounds: int = setting(at_least(1, integer=True))
        inferred: bool = setting()
        infer_samples: int = setting(at_least(1, integer=True))
        laplace_epsilon: float | None = setting(optional(at_least(0, strict=True)))
        elbow_max_k: int = setting()

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.num_clusters = int(s.num_clusters)
        self.classifier_rounds = int(s.classifier_rounds)
        self.inferred = bool(s.inferred)
        self.infer_samples = int(s.infer_samples)
        self.laplace_epsilon = None if s.laplace_epsilon is None else float(s.laplace_epsilon)
        self.elbow_max_k = int(s.elbow_max_k)
        self.cluster_round = 1 if self.inferred else 0
        self.encoder_end = int(run.cfg.num_rounds) - self.classifier_rounds
        self.template = run.new_model()
        self.clusters: dict[int, int] | None = None
        self.cluster_weights: list[list[np.ndarray]] = []
        self.inferred_distributions: dict[int, np.ndarray] = {}
        self.encoders: list[list[np.ndarray]] = []
        self.classifier: list[np.ndarray] = []
        self.final_model = None
        self.has_extractor: set[int] = set()

    # --------------------------------------------------------------------- stages
    def stage_of(self, server_round: int) -> str:
        if 0 < server_round <= self.cluster_round:
            return STAGE_CLUSTER
        return STAGE_ENCODERS if server_round <= self.encoder_end else STAGE_CLASSIFIER

    def fit_config(self, server_round):
        return {**super().fit_config(server_round), INFER_SAMPLES: self.infer_samples}

    payloads = PAYLOADS

    def sample_clients(self, server_round):
        if self.stage_of(server_round) == STAGE_ENCODERS and self.clusters is None:
            self.cluster_by_label_distributions()
        return super().sample_clients(server_round)

    # ------------------------------------------------------------------ stage 1
    def cluster_by_label_distributions(self) -> None:
        """FedConcat: cluster the reported (optionally noised) label distributions."""
        pids = self.registry.partition_ids()
        if self.laplace_epsilon is None:
            reported = {
                p: (info.num_examples, info.label_counts)
                for p, info in self.registry.infos(pids).items()
            }
            counts = self.valid_answers(reported, protocol.LABEL_COUNTS, "the clustering")
            distributions = {p: label_distribution(c) for p, c in counts.items()}
        else:
            answers = self.registry.query(
                pids, {**self.fit_config(0), LAPLACE_EPSILON: self.laplace_epsilon}
            )
            distributions = self.valid_answers(
                {p: (a.get(protocol.NUM_EXAMPLES), a) for p, a in answers.items()},
                LABEL_DISTRIBUTION,
                "the clustering",
            )
        self.assign_clusters(distributions)

    def assign_clusters(self, distributions: dict[int, np.ndarray]) -> None:
        if not distributions:  # nobody reported a usable one: a single cluster
            self.round_log.note("no label distribution to cluster: one cluster")
            distributions = {
                p: np.full(self.run.num_classes, 1.0 / self.run.num_classes)
                for p in self.registry.partition_ids()
            }
        pids = sorted(distributions)
        matrix = np.stack([distributions[p] for p in pids])
        labels = kmeans_clusters(matrix, self.num_clusters, self.run.seed)
        self.clusters = {p: int(k) for p, k in zip(pids, labels)}
        self.cluster_weights = [
            list(self.run.initial_weights()) for _ in range(int(labels.max()) + 1)
        ]
        ks, inertias = elbow_inertias(matrix, self.elbow_max_k, self.run.seed)
        events.emit(
            "artifact",
            name="elbow",
            data={
                "x": ks,
                "y": inertias,
                "xlabel": "K",
                "ylabel": "inertia",
                "title": "K-means elbow",
            },
        )
        events.emit(
            "artifact",
            name="clusters",
            data={
                "inferred": self.inferred,
                "assignments": {str(p): k for p, k in self.clusters.items()},
                "distributions": {str(p): distributions[p].round(6).tolist() for p in pids},
            },
        )
        sizes = np.bincount(labels)
        self.round_log.extra.update(clusters=len(sizes), largest_cluster=int(sizes.max()))

    def load_state_dict(self, state):
        super().load_state_dict(state)
        if self.encoders:
            self.final_model = concatenated_model(self.template, self.encoders)

    # ----------------------------------------------------------- instructions
    def fit_instructions(self, server_round, parameters, clients):
        stage = self.stage_of(server_round)
        config = self.fit_config(server_round)
        if stage == STAGE_CLUSTER:
            return super().fit_instructions(server_round, parameters, clients)
        if stage == STAGE_ENCODERS:
            models = {k: ndarrays_to_parameters(w) for k, w in enumerate(self.cluster_weights)}
            return {p: FitIns(models[self.clusters.get(p, 0)], dict(config)) for p in clients}
        classifier = ndarrays_to_parameters(self.classifier)
        extractor = encoders_to_payload(self.encoders)
        return {
            p: FitIns(
                classifier, dict(config) if p in self.has_extractor else {**config, **extractor}
            )
            for p in clients
        }

    # ---------------------------------------------------------------- results
    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        stage = self.stage_of(server_round)
        if stage == STAGE_CLUSTER:
            for u in updates:
                self.inferred_distributions[u.partition_id] = u.payload[INFERRED_DISTRIBUTION]
            return None
        if stage == STAGE_ENCODERS:
            for k in range(len(self.cluster_weights)):
                members = [u for u in updates if self.clusters.get(u.partition_id, 0) == k]
                if members:
                    self.cluster_weights[k] = weighted_average(
                        [u.arrays for u in members], [u.num_examples for u in members]
                    )
            return None
        self.has_extractor.update(u.partition_id for u in updates)
        self.classifier = weighted_average(
            [u.arrays for u in updates], [u.num_examples for u in updates]
        )
        return self.classifier

    def end_round(self, server_round: int):
        if server_round == self.cluster_round:  # FedConcat-ID: cluster the inferred distributions
            uniform = np.full(self.run.num_classes, 1.0 / self.run.num_classes)
            self.assign_clusters(
                {
                    p: self.inferred_distributions.get(p, uniform)
                    for p in self.registry.partition_ids()
                }
            )
        if server_round == self.encoder_end:
            self.start_classifier_stage()
            return ndarrays_to_parameters(self.classifier)
        return None

    def start_classifier_stage(self) -> None:
        """Freeze and concatenate the cluster encoders; initialise the global classifier."""
        self.encoders = [split_model_weights(self.template, w)[0] for w in self.cluster_weights]
        self.final_model = concatenated_model(self.template, self.encoders)
        self.classifier = get_weights(self.final_model.head)
        self.round_log.extra.update(
            model_parameters=num_parameters(self.final_model),
            feature_width=self.final_model.feature_dim,
        )

    # ------------------------------------------------------------- evaluation
    def evaluate(self, server_round, parameters):
        stage = self.stage_of(server_round)
        if server_round > 0 and stage != STAGE_CLASSIFIER:
            if (
                stage == STAGE_ENCODERS
                and self.should_evaluate(server_round)
                and self.run.reads_test
            ):
                accuracies = [
                    self.run.evaluate(w, model=self.template)[protocol.ACCURACY]
                    for w in self.cluster_weights
                ]
                self.round_log.extra["cluster_accuracy_mean"] = float(np.mean(accuracies))
            return None
        if server_round == 0:
            return super().evaluate(server_round, parameters)
        if not self.should_evaluate(server_round):
            return None
        return self.test_on_server(
            self.round_log, self.encoders_and_classifier(), model=self.final_model
        )

    def encoders_and_classifier(self) -> list[np.ndarray]:
        """The final model's arrays in its state_dict order: encoders, then classifier."""
        return [w for ws in self.encoders for w in ws] + list(self.classifier)
