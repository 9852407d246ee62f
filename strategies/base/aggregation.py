"""From a round's accepted updates to the new global model (a part of
:class:`strategies.base.BaseStrategy`): the minimum of successful clients, the round's
training metrics and weight diversity, the method's aggregation with the configured rule
and the optional contribution normalisation, the optional layer-wise shrinking of its
result, and the check that keeps a non-finite model out."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from flwr.common import Parameters, Scalar, ndarrays_to_parameters

from fedimb.app.nodes.node_proxy import check_workers_alive
from fedimb.app.server.run_context import ServerRun
from fedimb.core import payload, protocol, robust
from fedimb.core.aggregate import weight_diversity
from fedimb.core.contribution import contribution_factors
from fedimb.core.shrinking import (
    ShrinkSettings,
    check_shape,
    layer_groups,
    shrinking_factors,
    shrunk,
)
from strategies.base.replies import FitFailures, FitReplies
from strategies.base.round_log import ClientUpdate, RoundLog


class AggregationHost(Protocol):
    """What :class:`Aggregation` reads of the strategy it is part of (its own methods
    that call one another are listed too)."""

    run: ServerRun
    round_log: RoundLog
    current_weights: list[np.ndarray] | None
    #: the round's accepted updates (the clients a robust rule's choices name)
    round_updates: list[ClientUpdate]
    #: T of ``normalize=latent_cosine``, None without contribution normalisation
    normalize_temperature: float | None
    #: ``shrink=fedlws``'s settings, None without layer-wise shrinking
    shrink: ShrinkSettings | None

    def accept_updates(self, results: FitReplies, failures: list[Any]) -> list[ClientUpdate]: ...
    def aggregate(
        self, server_round: int, updates: list[ClientUpdate]
    ) -> list[np.ndarray] | None: ...
    def aggregate_metrics(self, updates: list[ClientUpdate]) -> dict[str, float]: ...
    def adoptable(self, weights: list[np.ndarray], what: str) -> bool: ...
    def aggregation_weights(self, updates: list[ClientUpdate], base_weights: Any) -> np.ndarray: ...
    def average_models(
        self, arrays_list: list[list[np.ndarray]], weights: Any
    ) -> list[np.ndarray] | None: ...
    def contribution_weighted(self, base: np.ndarray, latents: Any, ids: Any) -> np.ndarray: ...
    def global_arrays_named(self) -> tuple[list[str], list[str]]: ...
    def shrunk_global(
        self, weights: list[np.ndarray], updates: list[ClientUpdate]
    ) -> list[np.ndarray]: ...


class Aggregation:
    """The server's step from accepted updates to the next global model."""

    def aggregate_updates(
        self: AggregationHost, server_round: int, results: FitReplies, failures: FitFailures
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """Flower's ``aggregate_fit`` without its timing: the accepted updates, then (with
        at least ``min_successful_clients``) the method's :meth:`aggregate`; the global
        model stays where too few updates arrive or the aggregate is not finite."""
        updates = self.accept_updates(results, failures)
        self.round_updates = updates
        check_workers_alive(server_round, failures, len(results))
        minimum = int(self.run.cfg.min_successful_clients)
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
        if new_weights is not None and self.shrink is not None:
            new_weights = self.shrunk_global(new_weights, updates)
        if new_weights is None or not self.adoptable(new_weights, "the aggregate"):
            return None, self.round_log.client_metrics
        self.current_weights = new_weights
        return ndarrays_to_parameters(new_weights), self.round_log.client_metrics

    def adoptable(self: AggregationHost, weights: list[np.ndarray], what: str) -> bool:
        """Whether ``weights`` (a new global model, or server state every client will
        receive) may be adopted: every value finite. Otherwise the round notes why and
        the caller keeps what it had."""
        for i, arr in enumerate(weights):
            if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
                self.round_log.note(f"{what} holds NaN or Inf (array {i}): kept the previous one")
                return False
        return True

    def aggregate(
        self: AggregationHost, server_round: int, updates: list[ClientUpdate]
    ) -> list[np.ndarray] | None:
        """New global weights from accepted updates: FedAvg weighting by sample count."""
        weights = self.aggregation_weights(updates, [u.num_examples for u in updates])
        return self.average_models([u.arrays for u in updates], weights)

    def aggregation_weights(
        self: AggregationHost, updates: list[ClientUpdate], base_weights
    ) -> np.ndarray:
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
        self: AggregationHost, arrays_list: list[list[np.ndarray]], weights
    ) -> list[np.ndarray] | None:
        """The client models combined by the configured ``aggregation`` rule (default: the
        weighted mean, unchanged), each update first clipped where ``max_update_norm`` says;
        None (and a note why) when the round has too few updates for the rule, so that the
        previous global model stays. The clients the rule sets aside (left out, clipped or
        down-weighted) are counted in the round's record and named in a note; its buckets
        are drawn from the run's seed and the round. Every method that averages client
        models calls this."""
        shares = np.asarray(weights, dtype=np.float64)
        if len(shares) and shares.sum() > 0:
            largest = float(shares.max() / shares.sum())
            self.round_log.largest_share = max(self.round_log.largest_share or 0.0, largest)
        settings = robust.RobustSettings.from_config(self.run.cfg.aggregation)
        seed = np.random.SeedSequence([self.run.seed, self.round_log.round]).generate_state(1)[0]
        new, reason, aside = robust.combine_recorded(
            arrays_list, weights, self.current_weights, settings, rng_seed=int(seed)
        )
        if new is None:
            self.round_log.note(reason)
        # the rule's indices back to clients: a model that is an accepted update's arrays
        pid_of = {id(u.arrays): u.partition_id for u in self.round_updates}
        set_aside = sorted(
            {pid_of[id(arrays_list[i])] for i in aside if id(arrays_list[i]) in pid_of}
        )
        if set_aside:
            self.round_log.set_aside.update(set_aside)
            self.round_log.note(
                f"aggregation={settings.name} set aside client(s) {', '.join(map(str, set_aside))}"
            )
        return new

    def contribution_weighted(self: AggregationHost, base: np.ndarray, latents, ids) -> np.ndarray:
        """Λ·ν for aggregation units (clients, or e.g. Astraea's mediators) with the given
        mean latents. A single unit keeps its weight (Λ of one client is undefined)."""
        if len(latents) < 2:
            return base
        factors = contribution_factors(np.stack(latents), self.normalize_temperature)
        self.round_log.extra.update({f"contribution.{i}": float(f) for i, f in zip(ids, factors)})
        return factors * base

    def shrunk_global(
        self: AggregationHost, weights: list[np.ndarray], updates: list[ClientUpdate]
    ) -> list[np.ndarray]:
        """``shrink=fedlws``: the method's new global model with each layer l times γ_l, from
        the previous global model and the accepted client models (FedLWS; the authors'
        ``server_funct.py``, ``fedlws``). Applied to what the method's :meth:`aggregate`
        returns, so a server step (FedAvgM's momentum, SCAFFOLD's server rate) is part
        of the global update Δ_l, as the paper's η_g·g is. The round records γ_l and τ_l
        per layer; unchanged (and a note why) where the models' arrays do not match."""
        assert self.shrink is not None and self.current_weights is not None
        previous, clients = self.current_weights, [u.arrays for u in updates]
        names, parameters = self.global_arrays_named()
        problem = check_shape(previous, clients, names)
        if problem is not None:
            self.round_log.note(f"shrinking skipped: {problem}")
            return weights
        layers = layer_groups(names, parameters)
        gammas, taus = shrinking_factors(previous, weights, clients, layers, self.shrink)
        self.round_log.extra.update({f"shrink.gamma.{i}": float(g) for i, g in enumerate(gammas)})
        self.round_log.extra.update({f"shrink.tau.{i}": float(t) for i, t in enumerate(taus)})
        return shrunk(weights, layers, gammas)

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
