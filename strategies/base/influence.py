"""Bounded influence (a part of :class:`strategies.base.BaseStrategy`): what a client
reports that the server cannot check against its own data is bounded relative to the
round's other clients before it weighs that client or feeds a server step
(:mod:`fedimb.core.influence`, the ``influence`` settings). Each cut is counted in the
round's record (``clients.bounded``, the clients in ``influence.bounded``) and noted like
a rejection; the largest ratio to the others' median each bound saw is kept in the
round's ``extra`` (``influence.<what>``), so that a run shows how close its honest
clients came to a bound.

Bounded here: the update w_client − w_sent of every client (its L2 norm,
``update_ratio``), the sample count of a device with its own data (``ratio`` times the
others' sizes), a loss a
method weighs with where the server cannot recompute it (a device's with its own data:
``loss_ratio``; GRP-FED's training loss: ``loss_ratio`` times the loss of the model the
client was sent, or the round's median of those).
Methods bound their own statistics with :meth:`InfluenceBounds.bounded_vectors`
(``statistic_ratio``), and a
server step that re-trains or calibrates keeps its result only where
:meth:`InfluenceBounds.validated` allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import protocol
from fedimb.core.influence import (
    InfluenceSettings,
    bound_above,
    bound_norms,
    bound_within,
    cosines_to_median,
    references,
)
from fedimb.core.robust import clip_update
from strategies.base.round_log import ClientUpdate, RoundLog


class InfluenceHost(Protocol):
    """What :class:`InfluenceBounds` reads of the strategy it is part of."""

    run: ServerRun
    registry: ClientRegistry
    round_log: RoundLog
    current_weights: list[np.ndarray] | None
    #: per client, the model it was sent this round
    sent_models: dict[int, list[np.ndarray]]

    @property
    def influence(self) -> InfluenceSettings: ...
    def record_ratio(self, what: str, values: np.ndarray, two_sided: bool = False) -> None: ...


def _update_norm(arrays: Sequence[np.ndarray], sent: Sequence[np.ndarray]) -> float:
    squared = sum(
        float(np.sum((a.astype(np.float64) - s) ** 2))
        for a, s in zip(arrays, sent)
        if np.issubdtype(a.dtype, np.floating)
    )
    return float(np.sqrt(squared))


class InfluenceBounds:
    """The base strategy's bounds on what clients report."""

    @property
    def influence(self: InfluenceHost) -> InfluenceSettings:
        return InfluenceSettings.from_config(self.run.cfg.get("influence"))

    def record_ratio(
        self: InfluenceHost, what: str, values: np.ndarray, two_sided=False, floor: float = 0.0
    ) -> None:
        """``influence.<what>`` in the round's extra: the largest ratio of a client's
        value to its reference (the others' median, at least ``floor``; either way up
        where ``two_sided``), over every call of the round (one per class, say)."""
        reference = references(values, floor)
        known = np.isfinite(reference) & (reference > 0)
        if not known.any():
            return
        ratios = values[known] / reference[known]
        if two_sided:
            ratios = np.maximum(ratios, 1.0 / np.maximum(ratios, 1e-300))
        key = f"influence.{what}"
        self.round_log.extra[key] = max(float(ratios.max()), self.round_log.extra.get(key, 0.0))

    def bound_update_norms(self: InfluenceHost, updates: list[ClientUpdate]) -> None:
        """Each update's w_client − w_sent scaled down, in place, to at most
        ``update_ratio`` times the others' median norm or the sent model's norm, whichever
        is larger: a model of 1e19 values (finite, within the float checks) would
        otherwise make the next global model 1e16 and every honest client after it
        non-finite. The model's norm is the floor because honest update norms differ
        widely under label skew: a client with many samples takes many more steps
        (docs/faults.md#bounded-influence has the measurements)."""
        ratio = self.influence.update_ratio
        norms = np.array(
            [_update_norm(u.arrays, self.sent_models[u.partition_id]) for u in updates]
        )
        sent = {id(m): m for m in (self.sent_models[u.partition_id] for u in updates)}
        floor = float(np.median([_update_norm(m, [0.0] * len(m)) for m in sent.values()]))
        self.record_ratio("update_norm", norms, floor=floor)
        if ratio is None:
            return
        bounded, cut = bound_above(norms, ratio, floor)
        for i in cut:
            u = updates[i]
            u.arrays = clip_update(u.arrays, self.sent_models[u.partition_id], float(bounded[i]))
            self.round_log.bound(
                u.partition_id,
                f"update norm {norms[i]:.3g} cut to {bounded[i]:.3g} "
                f"({ratio:g}x the others' median or the model's norm)",
            )

    def bounded_num_examples(self: InfluenceHost, pid: int, num_examples: int) -> int:
        """A device's sample count (it brought its own data, so the server cannot count
        it) at most ``ratio`` times the median of the other clients' sizes (their
        partitions, or what the other devices announced); a partition's client reports
        at most what the server counted, which :meth:`check_num_examples` checks."""
        ratio = self.influence.ratio
        if ratio is None or not self.registry.has_own_data(pid):
            return num_examples
        others = [p for p in self.registry.partition_ids() if p != pid]
        sizes = [
            self.registry.info(p).num_examples
            if self.registry.has_own_data(p)
            else int(self.run.data.partition.counts[p].sum())
            for p in others
        ]
        if not sizes:
            return num_examples
        ceiling = int(ratio * float(np.median(sizes)))
        if num_examples <= ceiling:
            return num_examples
        self.round_log.bound(
            pid, f"num_examples {num_examples:,} cut to {ceiling:,} ({ratio:g}x the others' median)"
        )
        return ceiling

    def bounded_losses(self: InfluenceHost, updates: list[ClientUpdate], key: str) -> np.ndarray:
        """The losses ``key`` the updates report, a device's with its own data (the
        server holds no data to check it against) kept within ``loss_ratio`` of the
        others' median: a loss weighs its client through a power (F^q, q = 10: 1.25
        times the loss is ~9 times the weight). The other clients' losses are checked
        against the server's own computation (:meth:`check_reported_loss`,
        :meth:`bounded_by_received_loss`)."""
        losses = np.array([float(u.metrics[key]) for u in updates])
        self.record_ratio(f"{key}", losses, two_sided=True)
        ratio = self.influence.loss_ratio
        if ratio is None:
            return losses
        bounded, cut = bound_within(losses, ratio)
        out = losses.copy()
        for i in cut:
            pid = updates[i].partition_id
            if not self.registry.has_own_data(pid):
                continue
            out[i] = bounded[i]
            self.round_log.bound(
                pid,
                f"{key} {losses[i]:.4g} bounded to {bounded[i]:.4g} "
                f"(within {ratio:g}x the others' median)",
            )
        return out

    def bounded_by_received_loss(
        self: InfluenceHost, updates: list[ClientUpdate], losses: np.ndarray, key: str
    ) -> np.ndarray:
        """Training losses (``key``) each at most ``loss_ratio`` times a reference the
        server computes where it holds the client's data: the loss of the model the
        client was sent on that data, or the round's median of those losses where that is
        larger. Training usually lowers the loss it starts from, but not always: at a
        high learning rate an honest client whose classes the model already fits (a
        received loss near 0) reported many times it (docs/faults.md#bounded-influence);
        the median keeps such a client's room. A loss inflated within the bound (1.25
        times: ~9 times the weight under F^q, q = 10) is not found here: GRP-FED's replay
        of the training (on by default) and ``loss_at=received`` check the loss exactly.
        Off, with the other loss bound, where ``influence.loss_ratio`` is null."""
        out = np.array(losses, dtype=np.float64)
        ratio = self.influence.loss_ratio
        if ratio is None:  # loss bounds off
            return out
        received = {}
        for i, u in enumerate(updates):
            pid = u.partition_id
            if self.registry.has_own_data(pid):
                continue
            sent = self.sent_models.get(pid) or self.current_weights
            received[i] = self.run.client_training_loss(sent, pid)
        if not received:
            return out
        typical = float(np.median(list(received.values())))
        reference = {i: max(loss, typical) for i, loss in received.items()}
        self.round_log.extra[f"influence.{key}_to_received"] = max(
            out[i] / r for i, r in reference.items()
        )
        for i, r in reference.items():
            if out[i] > ratio * r:
                self.round_log.bound(
                    updates[i].partition_id,
                    f"{key} {out[i]:.4g} cut to {ratio * r:.4g}, {ratio:g}x the loss "
                    "of the model it was sent (or the round's median of those)",
                )
                out[i] = ratio * r
        return out

    def bounded_vectors(
        self: InfluenceHost, pids: Sequence[int], vectors: Sequence[np.ndarray], what: str
    ) -> list[np.ndarray]:
        """Arrays the clients ``pids`` report for one server step (a class's mean, its
        covariance, a gradient, a control delta), each scaled down to at most
        ``statistic_ratio`` times the median of the others' L2 norms."""
        ratio = self.influence.statistic_ratio
        norms = np.array([float(np.linalg.norm(np.asarray(v, dtype=np.float64))) for v in vectors])
        self.record_ratio(what.split(" ")[0], norms)
        if ratio is None:
            return list(vectors)
        bounded, cut, norms = bound_norms(vectors, ratio)
        for i in cut:
            self.round_log.bound(
                pids[i],
                f"{what} of norm {norms[i]:.3g} cut to {ratio:g}x the others' median",
            )
        return bounded

    def agreeing_counts(
        self: InfluenceHost,
        pids: Sequence[int],
        rows: Sequence[np.ndarray],
        counts: Sequence[np.ndarray],
        anchors: np.ndarray,
        what: str,
    ) -> list[np.ndarray]:
        """Each client's count per class (``counts``, C entries), zero where its row for
        the class (``rows``, C x d) points away from the median direction of the class's
        holders and its anchor (``anchors``' row: FedNH's current prototype): a cosine
        below ``min_cosine`` (a sign-flipped class mean keeps its norm and its bounds).
        The largest 1 − cosine of the round is its ``influence.<what>_disagreement``."""
        out = [np.array(c, copy=True) for c in counts]
        least = self.influence.min_cosine
        stacked, weights = np.asarray(rows, dtype=np.float64), np.asarray(counts)
        key = f"influence.{what}_disagreement"
        for c in range(len(anchors)):
            cosines = cosines_to_median(stacked[:, c], weights[:, c] > 0, anchors[c])
            known = np.isfinite(cosines)
            if not known.any():
                continue
            worst = float(1.0 - cosines[known].min())
            self.round_log.extra[key] = max(worst, self.round_log.extra.get(key, 0.0))
            if least is None:
                continue
            for i in np.nonzero(known & (cosines < least))[0]:
                out[i][c] = 0
                self.round_log.bound(
                    pids[i],
                    f"{what} of class {c} set aside: cosine {cosines[i]:.3f} with the "
                    f"median of its class (below {least:g})",
                )
        return out

    def validated(
        self: InfluenceHost, before: list[np.ndarray], after: list[np.ndarray], what: str
    ) -> bool:
        """Whether a server step's result ``after`` may replace ``before``: always without
        a validation share; with one, where it does not score lower on it (a step fed by
        clients' statistics is only as good as they are). The two scores go into the
        round's extra (``<what>.validation_before`` / ``_after``)."""
        if not self.run.has_validation:
            return True
        scores = [
            float(self.run.evaluate(w, split="validation")[protocol.ACCURACY])
            for w in (before, after)
        ]
        key = what.replace(" ", "_")
        self.round_log.extra.update(
            {f"{key}.validation_before": scores[0], f"{key}.validation_after": scores[1]}
        )
        if scores[1] >= scores[0]:
            return True
        self.round_log.note(
            f"{what} scores {scores[1]:.4f} on the validation share, below the "
            f"{scores[0]:.4f} of the model it would replace: not adopted"
        )
        return False
