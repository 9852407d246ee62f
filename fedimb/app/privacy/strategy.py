"""A method's strategy behind one of Flower's own central-DP wrappers (``privacy=dp_*``).

Flower's wrappers (``flwr.server.strategy.DifferentialPrivacy*Clipping``) are plain
Flower strategies around another one: they clip the updates (server side) or ask the
clients to (client side, :mod:`fedimb.app.privacy.client_mods`), let the inner strategy
aggregate, and add Gaussian noise of standard deviation
noise_multiplier · clipping_norm / num_sampled_clients to the result; here that last
number is set each round so that the noise fits what the method actually averaged
(:meth:`PrivateStrategy._calibrate`), and each released round is composed into the
run's (ε, δ) account (:mod:`fedimb.app.privacy.account`). The round loop,
though, reads much more of a fedimb strategy than Flower's hooks (its run, rounds,
records, checkpoint state: :class:`fedimb.app.server.round_loop.RoundStrategy`).
:class:`PrivateStrategy` therefore routes Flower's fit hooks through the wrapper and
everything else, attributes included, to the method's strategy, and keeps the two
consistent: the method's strategy continues from the noised model the clients receive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.common import FitIns, FitRes, Parameters, Scalar, parameters_to_ndarrays
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    Strategy,
)
from flwr.supercore.differential_privacy import KEY_NORM_BIT, compute_stdv
from omegaconf import DictConfig

from fedimb.app.privacy import dp as privacy
from fedimb.app.privacy.account import RunAccount
from fedimb.app.server.wrapped_strategy import WrappedStrategy

#: the checkpoint key of an adaptive wrapper's current clipping norm
CLIPPING_NORM_STATE = "privacy_clipping_norm"
#: the checkpoint key of the run's privacy account (Flower's accountant's state)
ACCOUNT_STATE = "privacy_account"


class HeldBack(WrappedStrategy):
    """What Flower's wrapper wraps: the method's strategy, with the replies
    :class:`PrivateStrategy` kept out of the wrapper's clipping rejoined before the method
    aggregates. Those are updates of norm zero: there is nothing to clip, and Flower's
    clipping divides by the norm (``clip_inputs_inplace``), which would end the round."""

    own = frozenset({"inner", "held", "calibrate"})

    def __init__(self, inner: Strategy):
        super().__init__(inner)
        self.held: list[tuple[ClientProxy, FitRes]] = []
        #: called once the method has aggregated, before Flower's wrapper adds the noise
        self.calibrate: Callable[[], None] = lambda: None

    def aggregate_fit(self, server_round, results, failures):
        held, self.held = self.held, []
        aggregated = self.inner.aggregate_fit(server_round, [*results, *held], failures)
        self.calibrate()
        return aggregated


class ClientSideAdaptive(DifferentialPrivacyClientSideAdaptiveClipping):
    """Flower's wrapper, which adapts the clipping norm after the method aggregated and
    before it adds the noise: the noise is calibrated once more after the adaptation."""

    def _update_clip_norm(self, results: list[tuple[ClientProxy, FitRes]]) -> None:
        super()._update_clip_norm(results)
        self.strategy.calibrate()  # type: ignore[attr-defined]  # a HeldBack


def flower_wrapper(inner: Strategy, cfg: DictConfig) -> Strategy:
    """Flower's wrapper of the run's ``privacy`` option around ``inner`` (seen through
    :class:`HeldBack`), with its settings (checked by
    :func:`fedimb.app.privacy.dp.check_privacy`)."""
    inner = HeldBack(inner)
    name = privacy.privacy_name(cfg)
    settings = privacy.privacy_settings(cfg)
    sampled = privacy.num_sampled_clients(cfg)
    if isinstance(settings, privacy.FixedClipping):
        fixed = (
            DifferentialPrivacyClientSideFixedClipping
            if name in privacy.CLIENT_SIDE
            else DifferentialPrivacyServerSideFixedClipping
        )
        return fixed(inner, settings.noise_multiplier, settings.clipping_norm, sampled)
    adaptive = (
        ClientSideAdaptive
        if name in privacy.CLIENT_SIDE
        else DifferentialPrivacyServerSideAdaptiveClipping
    )
    return adaptive(
        inner,
        settings.noise_multiplier,
        sampled,
        initial_clipping_norm=settings.initial_clipping_norm,
        target_clipped_quantile=settings.target_clipped_quantile,
        clip_norm_lr=settings.clip_norm_lr,
        clipped_count_stddev=settings.clipped_count_stddev,
    )


def with_privacy(strategy: Strategy, cfg: DictConfig) -> Strategy:
    """``strategy`` itself with ``privacy=none``, else behind Flower's wrapper."""
    if privacy.privacy_name(cfg) == privacy.NONE or isinstance(strategy, PrivateStrategy):
        return strategy
    return PrivateStrategy(strategy, flower_wrapper(strategy, cfg), privacy.privacy_name(cfg))


class PrivateStrategy(WrappedStrategy):
    """The method's strategy (``inner``) with Flower's DP ``wrapper`` around its fit step.

    Flower's fit hooks go through the wrapper; evaluation goes straight to the method's
    strategy (the wrappers only pass it on); every other attribute, read or set, is the
    method's strategy's. Besides, per round: the noise is drawn from a generator seeded
    by the run's seed and the round (a seeded run repeats); a malformed update, which
    Flower's clipping could not subtract from the global model, is rejected before it
    (counted and noted as the method's own checks do); the method's strategy adopts the
    noised model; and the round's record reports the clipping norm, the noise's
    standard deviation and ε so far (``extra``: ``privacy.clipping_norm``,
    ``privacy.noise_std``, ``privacy.epsilon``)."""

    own = frozenset({"inner", "wrapper", "variant", "account", "pool", "clip_used"})

    def __init__(self, inner: Strategy, wrapper: Strategy, variant: str):
        super().__init__(inner)
        object.__setattr__(self, "wrapper", wrapper)
        object.__setattr__(self, "variant", variant)
        object.__setattr__(self, "account", RunAccount(inner.run.cfg))  # type: ignore[attr-defined]
        object.__setattr__(self, "pool", None)  # the clients this round was drawn from
        object.__setattr__(self, "clip_used", 0.0)  # the norm that clipped this round
        wrapper.strategy.calibrate = self._calibrate  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{self.wrapper!r} around {self.inner!r}"

    # ------------------------------------------------------------- Flower's hooks
    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        instructions = self.wrapper.configure_fit(server_round, parameters, client_manager)
        self.pool = _pool_size(self.inner)
        return instructions

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        log = self.inner.round_log
        if failures:  # Flower's wrappers then keep the model: the noise assumes every client
            log.errors += len(failures)
            log.note(
                f"{len(failures)} client(s) failed: privacy={self.variant} keeps the global "
                "model this round (Flower's wrappers aggregate only complete rounds)"
            )
        results = self._well_formed(results)
        held: list[tuple[ClientProxy, FitRes]] = []
        if self.variant not in privacy.CLIENT_SIDE:  # the wrappers that clip on the server
            sent = self.wrapper.current_round_params  # type: ignore[attr-defined]
            results, held = _split_unchanged(results, sent)
            self.wrapper.strategy.held = held  # type: ignore[attr-defined]
        self.clip_used = float(self.wrapper.clipping_norm)  # type: ignore[attr-defined]
        self.wrapper.num_sampled_clients = max(1, len(results))  # type: ignore[attr-defined]
        np.random.seed(self._noise_seed(server_round))  # Flower's wrappers draw from numpy's
        parameters, metrics = self.wrapper.aggregate_fit(server_round, results, failures)
        if parameters is not None:
            self.inner.current_weights = parameters_to_ndarrays(parameters)
        if not failures and (results or held):  # a release: a model, or a clipping norm
            self.account.spend(self.pool)
        log.extra["privacy.clipping_norm"] = float(self.wrapper.clipping_norm)  # type: ignore[attr-defined]
        log.extra["privacy.noise_std"] = compute_stdv(
            self.wrapper.noise_multiplier,  # type: ignore[attr-defined]
            self.wrapper.clipping_norm,  # type: ignore[attr-defined]
            self.wrapper.num_sampled_clients,  # type: ignore[attr-defined]
        )
        if self.account.accountant is not None:  # σ = 0: no guarantee, no ε
            log.extra["privacy.epsilon"] = self.account.epsilon()
        return parameters, metrics

    def _calibrate(self) -> None:
        """The noise's standard deviation for what the method aggregated: σ·C·p_max, with
        C the norm that clipped this round's updates (Flower's adaptive wrappers noise with
        the norm they have just adapted) and p_max the largest share of the aggregate any
        client had (the weighted mean's sensitivity, :mod:`.account`). Flower's wrappers
        add σ·norm/num_sampled_clients, so that is the number set here."""
        share = self.inner.round_log.largest_share
        if share is None:  # no average of client models was taken: assume the worst
            share = 1.0
        norm = float(self.wrapper.clipping_norm)  # type: ignore[attr-defined]
        self.wrapper.num_sampled_clients = norm / (self.clip_used * share)  # type: ignore[attr-defined]

    # ----------------------------------------------------------- fedimb's additions
    def stop_before(self, server_round: int) -> str | None:
        """Why round ``server_round`` must not run (the privacy budget), or None."""
        return self.account.stop_reason(server_round, _pool_size(self.inner))

    def state_dict(self) -> dict[str, Any]:
        """The method's state, an adaptive wrapper's clipping norm and the account."""
        state = dict(self.inner.state_dict())
        state[CLIPPING_NORM_STATE] = float(self.wrapper.clipping_norm)  # type: ignore[attr-defined]
        state[ACCOUNT_STATE] = self.account.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        if CLIPPING_NORM_STATE in state:
            self.wrapper.clipping_norm = float(state.pop(CLIPPING_NORM_STATE))  # type: ignore[attr-defined]
        self.account.load_state_dict(state.pop(ACCOUNT_STATE, None))
        self.inner.load_state_dict(state)

    def _noise_seed(self, server_round: int) -> int:
        sequence = np.random.SeedSequence([int(self.inner.run.seed), server_round, 0xD1F])
        return int(sequence.generate_state(1)[0])

    def _well_formed(
        self, results: list[tuple[ClientProxy, FitRes]]
    ) -> list[tuple[ClientProxy, FitRes]]:
        """The replies Flower's wrapper can process: as many arrays, of the shapes and
        dtypes, as the client was sent (its clipping subtracts the two) and, for client-side
        adaptive clipping, the clipping bit (it raises without). The others are rejected
        here, one note each; the method's own checks then see the rest."""
        kept = []
        for proxy, res in results:
            pid = self.inner.registry.partition_of(proxy)
            problem = self._malformed(self.inner.sent_layouts.get(pid), res)
            if problem is None and self.variant == "dp_client_adaptive":
                if KEY_NORM_BIT not in res.metrics:
                    problem = f"no '{KEY_NORM_BIT}' (the client-side clipping did not run)"
            if problem is not None:
                self.inner.round_log.rejected += 1
                self.inner.round_log.note(f"update of client {pid} rejected: {problem}")
                continue
            kept.append((proxy, res))
        return kept

    @staticmethod
    def _malformed(layout, res: FitRes) -> str | None:
        if layout is None:
            return "from a client that was not asked to train"
        try:
            arrays = parameters_to_ndarrays(res.parameters)
        except Exception as err:  # a crafted reply
            return f"undecodable parameters ({err})"
        got = [(a.shape, a.dtype) for a in arrays]
        if got != [(tuple(shape), dtype) for shape, dtype in layout]:
            return f"not a model like the one it was sent ({len(got)} arrays of {got[:2]}...)"
        return None


def _split_unchanged(
    results: list[tuple[ClientProxy, FitRes]], sent: list[np.ndarray]
) -> tuple[list[tuple[ClientProxy, FitRes]], list[tuple[ClientProxy, FitRes]]]:
    """(replies with an update to clip, replies that return the model they were sent)."""
    changed: list[tuple[ClientProxy, FitRes]] = []
    unchanged: list[tuple[ClientProxy, FitRes]] = []
    for item in results:
        arrays = parameters_to_ndarrays(item[1].parameters)
        same = all(np.array_equal(a, b) for a, b in zip(arrays, sent))
        (unchanged if same else changed).append(item)
    return changed, unchanged


def _pool_size(strategy: Strategy) -> int | None:
    """How many clients a round draws from now (None where the strategy cannot say)."""
    trainable = getattr(strategy, "trainable_clients", None)
    return len(trainable()) if callable(trainable) else None
