"""GRP-FED server (Wang et al., Algorithm 1 lines 1–14): adaptive loss-power aggregation.

After each round, σ_t is the standard deviation (population) of the participants'
global training losses L^g_m; q moves by eq. 2 (:func:`fedimb.core.aggregate.adaptive_q`;
round 1 keeps q_0), and the new global model is Σ λ_m·θ_m with
λ_m = (L^g_m)^q / Σ_i (L^g_i)^q over the participants (eq. 3). An update whose
loss is missing, non-finite or not positive is rejected.

Readings the paper leaves open (the defaults are the rule as implemented first):

- ``lambda_over``: ``participants`` normalises λ over the round's participants;
  ``all`` reads eq. 3's "Σ_{i=1}^{M}" over all M clients: every client seen so far
  keeps its last loss, the participants get their share of Σ over those, and the
  rest of the weight stays on the current global model (the clients that did not
  train hold it). Clients never sampled are left out, since their loss is unknown.
- ``q_min`` / ``q_max``: bounds on q after eq. 2 (null: unbounded). Eq. 2 changes q
  by less than 2·η_q per round and its sum telescopes to about η_q·ln(σ_T/σ_1), so
  from q_0 = 10 q stays near 10 unless σ changes by orders of magnitude.
- the loss L^g itself is chosen on the client (``method.client.loss_at``).

A loss weighs its client through a power (q = 10: 1.25 times the loss is ~9 times the
weight), and the paper's L^g_m is measured while the client trains, where the server
cannot see it. Where the server holds the client's data (every client but a device with
its own), it replays that training (``replay_training``, on by default): L^g_m is the
mean batch cross-entropy of the global model, the batch order is seeded by (seed, round,
client), so the replay gives the loss the client must report, and an update whose loss
differs by more than :data:`REPLAY_TOLERANCE` is rejected. Off, the loss is only bounded
(:meth:`strategies.base.influence.InfluenceBounds.bounded_by_received_loss`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from clients.grpfed import LOSS_AT_RECEIVED, GRPFEDClient
from fedimb.core import payload, protocol
from fedimb.core.aggregate import adaptive_q, loss_power_weights
from fedimb.core.errors import ConfigError, one_of
from fedimb.core.settings import setting
from strategies.base import (
    BaseStrategy,
    ClientUpdate,
    PersonalEvaluation,
)

#: how far a reported training loss may differ from the server's replay of that training
#: (relative): the same float32 steps in another order of summation, or on another
#: device, drift apart in their last bits only; an inflation that moves the weight is 25 %
REPLAY_TOLERANCE = 0.02


class GRPFEDStrategy(PersonalEvaluation, BaseStrategy):
    """Aggregation weights (L^g_m)^q with an adaptive q."""

    checkpoint_attributes = ("q", "sigma", "last_loss")
    robust_aggregation = "clip"  # the loss powers are the method: mean only, with clipping

    @classmethod
    def check_settings(cls, settings) -> None:
        """Its setting rules, and q_min <= q_max where both bounds are set."""
        super().check_settings(settings)
        q_min, q_max = settings.get("q_min"), settings.get("q_max")
        if q_min is not None and q_max is not None and q_min > q_max:
            raise ConfigError(f"method.strategy.q_min ({q_min}) must not exceed q_max ({q_max})")

    @dataclasses.dataclass(frozen=True)
    class Settings:
        q0: float = setting()
        eta_q: float = setting()
        lambda_over: str = setting(one_of("participants", "all"))
        q_min: float | None = setting()
        q_max: float | None = setting()
        replay_training: bool = setting()

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.q_bounds = (
            -np.inf if s.q_min is None else float(s.q_min),
            np.inf if s.q_max is None else float(s.q_max),
        )
        self.q = float(np.clip(float(s.q0), *self.q_bounds))
        self.eta_q = float(s.eta_q)
        self.lambda_over = s.lambda_over
        self.loss_key = (
            protocol.INITIAL_LOSS
            if GRPFEDClient.read_settings(self.client_hparams).loss_at == LOSS_AT_RECEIVED
            else protocol.TRAIN_LOSS
        )
        self.replay_training = bool(s.replay_training) and self.loss_key == protocol.TRAIN_LOSS
        self.sigma: float | None = None
        self.last_loss: dict[int, float] = {}

    def check_update(self, pid, arrays, res):
        return (
            super().check_update(pid, arrays, res)
            or self.check_reported_loss(pid, res, self.loss_key)
            or self.check_training_loss(pid, res)
        )

    def check_training_loss(self, pid: int | None, res) -> str | None:
        """Why the training loss client ``pid`` reports is not the one the server's replay
        of its training gives (``replay_training``; every client whose data the server
        holds), or None."""
        if not self.replay_training or pid is None or self.registry.has_own_data(pid):
            return None
        reported = payload.scalars(res.metrics)[self.loss_key]
        replayed = self.run.replayed_training_loss(
            self.sent_models[pid], pid, self.sent_configs[pid]
        )
        gap = abs(reported - replayed) / max(abs(reported), abs(replayed))
        key = (
            "influence.train_loss_replay_gap"  # the round's largest: how close honest clients come
        )
        self.round_log.extra[key] = max(gap, self.round_log.extra.get(key, 0.0))
        if math.isclose(reported, replayed, rel_tol=REPLAY_TOLERANCE):
            return None
        return (
            f"{self.loss_key} {reported:.6g} is not the loss its training gives "
            f"({replayed:.6g}, replayed by the server)"
        )

    def aggregate(self, server_round: int, updates: list[ClientUpdate]):
        losses = self.bounded_losses(updates, self.loss_key)
        if self.loss_key == protocol.TRAIN_LOSS and not self.replay_training:
            losses = self.bounded_by_received_loss(updates, losses, self.loss_key)
        sigma = float(losses.std())
        q = (
            self.q
            if self.sigma is None
            else float(np.clip(adaptive_q(self.q, self.sigma, sigma, self.eta_q), *self.q_bounds))
        )
        if np.isfinite(sigma) and np.isfinite(q):  # q weighs every later round: never adopt NaN/Inf
            self.q, self.sigma = q, sigma
        else:
            self.round_log.note(
                f"loss spread not finite (sigma {sigma:g}, q {q:g}): q and sigma kept"
            )
        self.round_log.extra.update(q=self.q, loss_std=sigma, loss_max=float(losses.max()))
        self.last_loss.update({u.partition_id: float(loss) for u, loss in zip(updates, losses)})
        if self.lambda_over == "participants":
            weights = self.aggregation_weights(updates, loss_power_weights(losses, self.q))
            return self.average_models([u.arrays for u in updates], weights)
        known = sorted(self.last_loss)
        lam = dict(zip(known, loss_power_weights([self.last_loss[pid] for pid in known], self.q)))
        shares = np.array([lam[u.partition_id] for u in updates])
        weights = self.aggregation_weights(updates, shares)
        kept = max(0.0, 1.0 - float(shares.sum()))  # the non-participants' share: the current model
        self.round_log.extra["lambda_participants"] = float(shares.sum())
        return self.average_models(
            [*[u.arrays for u in updates], self.current_weights], [*weights, kept]
        )
