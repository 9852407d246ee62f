"""Astraea server (Duan et al., "Self-Balancing Federated Learning With Global Imbalanced
Data in Mobile Systems", Algorithms 1–3, §3.3).

Initialization (§3.3): the clients' label histograms give the global class counts; the
z-score plan (Algorithm 2, :func:`fedimb.core.aggregate.zscore_plan`) goes to every
client, which rebalances its data and reports its new histogram. No data moves.

Mapping onto Flower rounds (docs/methods.md, "Astraea on Flower rounds"): ``num_rounds``
counts synchronization rounds; each groups the sampled clients into mediators of at most
γ by KLD (Algorithm 3, :func:`fedimb.core.aggregate.schedule_mediators`) and takes
E_m·L Flower rounds, L the longest chain. In each, every unfinished mediator sends its
model to the next client of its chain, whose result becomes the mediator's model
(sequential SGD inside a mediator, mediators in parallel, Algorithm 1); a dropped or
failed client is skipped. The mediators' models are then averaged weighted by n_m.

Untrusted histograms: every reported histogram is checked (non-negative integers, one per
class, summing to the client's sample count); a client whose histogram is missing or
invalid is left out of the plan and of the mediators (one note). The plan's ratios are
clipped to ``max_ratio``: Algorithm 2 bounds an augmented class's size, not its ratio, so
one client announcing a huge class would make every client copy its minority samples
without bound.

Ablations: ``augment: false`` skips the plan (rescheduling only); ``reschedule: false``
gives every client its own mediator, i.e. FedAvg on rebalanced data (augmentation only).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from flwr.common import FitIns, ndarrays_to_parameters

from clients.astraea import PAYLOADS, ZSCORE_RATIOS
from fedimb.core import payload, protocol
from fedimb.core.aggregate import weighted_average, zscore_plan
from fedimb.core.errors import at_least, one_of
from fedimb.core.rebalance import beyond_plan, clip_ratios, grouped_by_kld, mean_kl
from fedimb.core.settings import setting
from strategies.base import BaseStrategy, ClientUpdate, parameters_nbytes

SCHEDULES = ("every_round", "once")


class AstraeaStrategy(BaseStrategy):
    """Z-score rebalancing and KLD-scheduled mediators with sequential chains."""

    round_unit = "synchronization round"  # num_rounds counts them
    robust_aggregation = "none"  # it averages mediator models, each a chain of clients

    payloads = PAYLOADS
    checkpoint_attributes = (
        "ratios",
        "counts",
        "fixed_mediators",
        "mediators",
        "mediator_of",
        "mediator_weights",
        "mediator_trained",
        "mediator_latents",
        "sync_bytes",
    )

    @dataclasses.dataclass(frozen=True)
    class Settings:
        augment: bool = setting()
        reschedule: bool = setting()
        tau_d: float = setting(at_least(0, strict=True))
        gamma: int = setting(at_least(1, integer=True))
        mediator_epochs: int = setting(at_least(1, integer=True))
        schedule: str = setting(one_of(*SCHEDULES))
        max_ratio: float = setting(at_least(1))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.augment, self.reschedule = bool(s.augment), bool(s.reschedule)
        self.tau_d, self.gamma, self.mediator_epochs = (
            float(s.tau_d),
            int(s.gamma),
            int(s.mediator_epochs),
        )
        self.schedule = s.schedule
        self.max_ratio = float(s.max_ratio)
        cfg = run.cfg
        self.clients_per_sync = min(
            run.num_clients,
            max(int(cfg.min_fit_clients), int(round(float(cfg.fraction_fit) * run.num_clients))),
        )
        self.chain_length = min(self.gamma, self.clients_per_sync) if self.reschedule else 1
        self.steps_per_sync = self.mediator_epochs * self.chain_length
        self.model_bytes = parameters_nbytes(ndarrays_to_parameters(run.initial_weights()))
        self.ratios: np.ndarray | None = None
        self.counts: dict[int, np.ndarray] = {}  # label counts after the plan
        self.fixed_mediators: list[list[int]] | None = None
        self.mediators: list[list[int]] = []
        self.mediator_of: dict[int, int] = {}
        self.mediator_weights: list[list[np.ndarray]] = []
        self.mediator_trained: list[set[int]] = []
        # each mediator's last latent of each trained client
        self.mediator_latents: list[dict[int, np.ndarray]] = []
        self.sync_bytes = 0

    # ------------------------------------------------------------- round mapping
    def total_rounds(self) -> int:
        return int(self.run.cfg.num_rounds) * self.steps_per_sync

    def position(self, server_round: int) -> tuple[int, int]:
        """(synchronization round, 1-based; step within it, 0-based) of a Flower round."""
        return (server_round - 1) // self.steps_per_sync + 1, (
            server_round - 1
        ) % self.steps_per_sync

    def should_evaluate(self, server_round: int) -> bool:
        """The global model only changes at the end of a synchronization round."""
        if server_round == 0:
            return True
        sync, step = self.position(server_round)
        every = int(self.run.cfg.evaluation.every)
        return step == self.steps_per_sync - 1 and (
            sync % every == 0 or sync == int(self.run.cfg.num_rounds)
        )

    def training_size(self, pid: int) -> int:
        """A client trains on its data after the plan: the size of the histogram it reported."""
        counts = self.counts.get(pid)
        return super().training_size(pid) if counts is None else int(np.asarray(counts).sum())

    # ------------------------------------------------------------ initialization
    def fit_config(self, server_round):
        config = super().fit_config(server_round)
        if self.ratios is not None:
            config.update(payload.pack({ZSCORE_RATIOS: self.ratios}))
        return config

    def initialize(self) -> None:
        """§3.3 initialization: global counts -> z-score plan -> clients rebalance and report.

        Every histogram is checked first (:meth:`valid_answers`); a client whose histogram
        is missing or invalid is left out of the plan and of the mediators."""
        pids = self.registry.partition_ids()
        original = self.valid_answers(
            {
                p: (info.num_examples, info.label_counts)
                for p, info in self.registry.infos(pids).items()
            },
            protocol.LABEL_COUNTS,
            "the plan",
            self.matches_partition,
        )
        global_counts = (
            np.sum(list(original.values()), axis=0) if original else np.zeros(self.run.num_classes)
        )
        if self.augment:
            augmented, downsampled, ratios = zscore_plan(global_counts, self.tau_d)
        else:
            augmented, downsampled, ratios = [], [], np.ones(self.run.num_classes)
        self.ratios = self.clipped_ratios(ratios)
        answers = self.registry.query(sorted(original), self.fit_config(0))
        rebalanced = self.valid_answers(
            {
                p: (answers[p].get(protocol.NUM_EXAMPLES), answers[p])
                for p in answers
                if p in original
            },
            protocol.LABEL_COUNTS,
            "the mediators",  # a histogram's sum weighs its mediator: it must not be inflated
            lambda p, counts: beyond_plan(original[p], counts, self.ratios),
        )
        self.counts = {
            p: rebalanced.get(p, original[p])
            for p in original
            if p in rebalanced or p not in answers
        }
        self.round_log.extra.update(
            augment_classes=len(augmented),
            downsample_classes=len(downsampled),
            samples_before=int(global_counts.sum()),
            samples_after=int(sum(c.sum() for c in self.counts.values())),
        )

    def matches_partition(self, pid: int, counts: np.ndarray) -> str | None:
        """Why a histogram is not client ``pid``'s, or None: where the server holds the
        client's partition it knows the histogram (a device with its own data is taken at
        its word); a client that inflates a class would skew everyone's plan."""
        if self.registry.has_own_data(pid) or np.array_equal(
            counts, self.run.client_label_counts(pid)
        ):
            return None
        return "differs from the histogram of its partition"

    def clipped_ratios(self, ratios: np.ndarray) -> np.ndarray:
        """The plan's ratios clipped to ``max_ratio`` (:func:`fedimb.core.rebalance.clip_ratios`):
        one client's inflated histogram must not make every client copy its minority
        samples without bound."""
        clipped, note = clip_ratios(ratios, self.max_ratio)
        if note is not None:
            self.round_log.note(note)
        return clipped

    # ----------------------------------------------------------------- mediators
    def sample_clients(self, server_round: int) -> list[int]:
        """The clients whose turn it is in this Flower round, one per unfinished chain."""
        if self.ratios is None:
            self.initialize()
        sync, step = self.position(server_round)
        if step == 0:
            self.start_sync_round(sync)
        return sorted(
            m[step % len(m)] for m in self.mediators if step < self.mediator_epochs * len(m)
        )

    def mediators_of(self, sampled: list[int]) -> list[list[int]]:
        """The sampled clients grouped into mediators (each its own without rescheduling;
        with ``schedule: once``, the groups of all clients, made once)."""
        if not self.reschedule:
            return [[p] for p in sampled]
        if self.schedule != "once":
            return grouped_by_kld(sampled, self.counts, self.gamma)
        if self.fixed_mediators is None:
            self.fixed_mediators = grouped_by_kld(sorted(self.counts), self.counts, self.gamma)
        chosen = set(sampled)
        return [m for m in ([p for p in g if p in chosen] for g in self.fixed_mediators) if m]

    def start_sync_round(self, sync: int) -> None:
        sampled = [p for p in super().sample_clients(sync) if p in self.counts]
        mediators = self.mediators_of(sampled)
        self.mediators = mediators
        self.mediator_of = {p: i for i, m in enumerate(mediators) for p in m}
        self.mediator_weights = [self.current_weights] * len(mediators)
        self.mediator_trained = [set() for _ in mediators]
        self.mediator_latents = [{} for _ in mediators]
        self.sync_bytes = 0
        self.round_log.extra.update(
            mediators=len(mediators),
            mediator_kl=mean_kl([np.sum([self.counts[p] for p in m], axis=0) for m in mediators]),
            client_kl=mean_kl([self.counts[p] for p in sampled]),
        )

    def fit_instructions(self, server_round, parameters, clients):
        """Each client receives its mediator's current model."""
        config = self.fit_config(server_round)
        models: dict[int, object] = {}
        instructions = {}
        for pid in clients:
            m = self.mediator_of[pid]
            if m not in models:
                models[m] = ndarrays_to_parameters(self.mediator_weights[m])
            instructions[pid] = FitIns(models[m], dict(config))
        return instructions

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        """A client's result becomes its mediator's model; the global model waits for
        the end of the synchronization round (:meth:`end_round`)."""
        for update in updates:
            m = self.mediator_of[update.partition_id]
            self.mediator_weights[m] = update.arrays
            self.mediator_trained[m].add(update.partition_id)
            if protocol.LATENT_MEAN in update.payload:
                self.mediator_latents[m][update.partition_id] = update.payload[protocol.LATENT_MEAN]
        return None

    def end_round(self, server_round: int):
        sync, step = self.position(server_round)
        self.sync_bytes += self.round_log.bytes_down + self.round_log.bytes_up
        self.round_log.extra.update(sync_round=sync, step=step)
        if step != self.steps_per_sync - 1:
            return None
        c = sum(len(m) for m in self.mediators)
        self.round_log.extra.update(
            sync_bytes=self.sync_bytes,
            paper_sync_bytes=2 * self.model_bytes * (math.ceil(c / self.gamma) + c),
        )
        trained = [m for m, members in enumerate(self.mediator_trained) if members]
        if not trained:
            return None
        sizes = np.array(
            [sum(float(self.counts[p].sum()) for p in self.mediator_trained[m]) for m in trained]
        )
        if self.normalize_temperature is not None and all(
            self.mediator_latents[m] for m in trained
        ):
            # a mediator's latent: its clients' latents weighted by their sample counts
            latents = [
                np.average(
                    np.stack(list(self.mediator_latents[m].values())),
                    axis=0,
                    weights=[float(self.counts[p].sum()) for p in self.mediator_latents[m]],
                )
                for m in trained
            ]
            sizes = self.contribution_weighted(sizes, latents, [f"mediator{m}" for m in trained])
        self.current_weights = weighted_average([self.mediator_weights[m] for m in trained], sizes)
        return ndarrays_to_parameters(self.current_weights)
