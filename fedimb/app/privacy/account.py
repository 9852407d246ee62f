"""The (ε, δ) account of a run under ``privacy=dp_*``, kept by Flower's own Rényi-DP
accountant (``flwr.serverapp.RdpAccountant``, the ``dp`` extra: Google's dp-accounting).

The guarantee is client-level and for the *replace-one* relation: two federations are
neighbours when one client's data is replaced by any other, the clients and their sample
counts (which every client sends in the clear when it joins, docs/privacy.md) staying
public. Each round releases one Gaussian mechanism: the weighted mean of the clipped
updates, whose replace-one L2 sensitivity is 2·C·p_max (p_max: the largest share of the
aggregate any client had, C the clipping norm that clipped them), plus noise of standard
deviation σ·C·p_max (:mod:`fedimb.app.privacy.calibration` makes Flower's wrappers add
exactly that). So every round's event has noise multiplier σ/2, whatever the weights
and whatever dropout left. Under adaptive clipping σ is Flower's combined multiplier of
the update and the clipped-count queries (Andrew et al., 2021, Thm. 1); replacing a
client changes the count by at most 1, so the pair is again a Gaussian of multiplier σ/2.

Amplification by sampling is claimed only where fedimb's sampler is the model the
accountant composes: ``sampling=uniform`` draws exactly m of the N clients uniformly
without replacement (:func:`strategies.base.sampling.draw_clients`), Flower's
``SamplingMethod.WITHOUT_REPLACEMENT`` (Wang, Balle and Kasiviswanathan, 2019, Thm. 27).
A round that draws from fewer than N clients (some hold no data or are not connected),
every round of ``sampling=by_size`` or of m = N, and every round of a run whose noise is
so low that the amplified bound is the larger one (:func:`amplified`) is composed with
q = 1: no amplification (which the accountant computes as the plain Gaussian)."""

from __future__ import annotations

import functools
import math
from typing import Any

from omegaconf import DictConfig

from fedimb.core.absl_handler import keep_absl_on_process_stderr
from fedimb.core.errors import ConfigError

#: the (sampling, relation) of every account fedimb keeps (Flower's names)
SAMPLING = "without-replacement"
RELATION = "replace-one"


def privacy_modules() -> Any:
    """Flower's accounting types; a one-line error where the ``dp`` extra is missing."""
    try:
        import dp_accounting  # noqa: F401  (Flower imports it only when an account starts)
        from flwr.supercore import privacy_accounting
    except ImportError as err:
        raise ConfigError(
            "privacy=dp_* keeps an (ε, δ) account with Flower's accountant, which needs the "
            "dp extra (dp-accounting): make install EXTRAS=dev,dp"
        ) from err
    keep_absl_on_process_stderr()  # dp-accounting has loaded absl's logging
    return privacy_accounting


def delta_of(cfg: DictConfig) -> float:
    """``privacy.delta``, or where null 1 / N^1.1 for N clients: below 1/N, as a
    client-level δ must be (a mechanism that publishes one client's data outright with
    probability 1/N would otherwise qualify)."""
    given = cfg.privacy.get("delta")
    return float(given) if given is not None else float(int(cfg.num_clients)) ** -1.1


def event_multiplier(cfg: DictConfig) -> float:
    """The noise multiplier of every round's event: σ/2 (replace-one, module docstring)."""
    return float(cfg.privacy.noise_multiplier) / 2


def sample_size(cfg: DictConfig) -> int:
    """The m clients a round draws: max(min_fit_clients, round(fraction_fit · N)), at most N."""
    n = int(cfg.num_clients)
    return min(n, max(int(cfg.min_fit_clients), int(round(float(cfg.fraction_fit) * n))))


def amplified(cfg: DictConfig, pool: int | None = None) -> bool:
    """Whether a round that draws from ``pool`` clients (None: all N) is amplified: the
    sampler is the accountant's model, and the amplified bound is the lower one for the
    planned rounds (at low noise Wang et al.'s bound exceeds the plain Gaussian's; either
    is a valid bound, and the choice depends on the configuration alone)."""
    n = int(cfg.num_clients)
    if not (str(cfg.sampling) == "uniform" and sample_size(cfg) < n and pool in (None, n)):
        return False
    return _spent(cfg, sample_size(cfg)) < _spent(cfg, n)


def _spent(cfg: DictConfig, sampled: int) -> float:
    """ε after ``num_rounds`` rounds that each draw ``sampled`` of the N clients."""
    pa, n = privacy_modules(), int(cfg.num_clients)
    accountant = new_accountant(cfg)
    event = pa.GaussianPrivacyEvent(event_multiplier(cfg), sampled, n)
    accountant.compose(event, count=int(cfg.num_rounds))
    return float(accountant.get_epsilon(delta_of(cfg)))


def new_accountant(cfg: DictConfig) -> Any:
    """Flower's accountant for the run, empty (None with noise multiplier 0: no account)."""
    if float(cfg.privacy.noise_multiplier) <= 0:
        return None
    pa = privacy_modules()
    max_epsilon = cfg.privacy.get("max_epsilon")
    config = pa.PrivacyConfig(
        target_delta=delta_of(cfg),
        population_size=int(cfg.num_clients),
        neighboring_relation=pa.NeighboringRelation(RELATION),
        sampling_method=pa.SamplingMethod(SAMPLING),
        max_epsilon=None if max_epsilon is None else float(max_epsilon),
    )
    from flwr.serverapp import RdpAccountant

    return RdpAccountant(config)


def round_event(cfg: DictConfig, pool: int | None = None) -> Any:
    """One round's event (``pool``: the clients the round drew from, None: all N)."""
    return gaussian_event(cfg, amplified(cfg, pool))


def gaussian_event(cfg: DictConfig, amplify: bool) -> Any:
    """A round's event, amplified by sampling m of the N clients or not (q = 1)."""
    n = int(cfg.num_clients)
    sampled = sample_size(cfg) if amplify else n
    return privacy_modules().GaussianPrivacyEvent(
        noise_multiplier=event_multiplier(cfg), sample_size=sampled, population_size=n
    )


def planned_epsilons(cfg: DictConfig, rounds: int) -> list[float]:
    """ε at δ after each of ``rounds`` rounds that draw from all N clients; empty
    without noise (σ = 0 gives no guarantee: ε is infinite)."""
    accountant = new_accountant(cfg)
    if accountant is None:
        return []
    event, delta, spent = round_event(cfg), delta_of(cfg), []
    for _ in range(rounds):
        accountant.compose(event)
        spent.append(accountant.get_epsilon(delta))
    return spent


def plan_line(cfg: DictConfig, rounds: int) -> str:
    """What the planned run spends, for the preflight: one line."""
    if float(cfg.privacy.noise_multiplier) <= 0:
        return "privacy: noise multiplier 0 clips but gives no (ε, δ) guarantee (ε = ∞)"
    spent = planned_epsilons(cfg, rounds)
    budget = cfg.privacy.get("max_epsilon")
    line = (
        f"privacy: {rounds} rounds spend ε = {spent[-1]:.3g} at δ = {delta_of(cfg):.3g} "
        f"(replace-one, a Gaussian of multiplier σ/2 = {event_multiplier(cfg):g} per round, "
        f"{_sampling_text(cfg)})"
    )
    if budget is not None:
        within = sum(1 for e in spent if e <= float(budget))
        line += f"; privacy.max_epsilon = {float(budget):g} " + (
            f"stops it after round {within}" if within < rounds else "covers every round"
        )
    return line


def _sampling_text(cfg: DictConfig) -> str:
    if amplified(cfg):
        return f"sampling {sample_size(cfg)} of {int(cfg.num_clients)} without replacement"
    return "no amplification by sampling"


def check_budget(cfg: DictConfig) -> None:
    """A ``privacy.max_epsilon`` that the first round already exceeds is refused."""
    budget = cfg.privacy.get("max_epsilon")
    if budget is None or float(cfg.privacy.noise_multiplier) <= 0:
        if budget is not None:
            raise ConfigError(
                "privacy.max_epsilon needs privacy.noise_multiplier > 0 (without noise ε is ∞)"
            )
        return
    first = planned_epsilons(cfg, 1)[0]
    if not math.isfinite(first) or first > float(budget):
        raise ConfigError(
            f"privacy.max_epsilon = {float(budget):g} is spent by the first round already "
            f"(ε = {first:.3g} at δ = {delta_of(cfg):.3g}): raise it or privacy.noise_multiplier"
        )


class RunAccount:
    """A run's account: one event per round that released a model, ε after each, the
    budget's verdict before the next, and its state for the checkpoint."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self.accountant = new_accountant(cfg)
        self.delta = delta_of(cfg)
        budget = cfg.privacy.get("max_epsilon")
        self.max_epsilon = None if budget is None else float(budget)

    @functools.cached_property
    def _events(self) -> dict[bool, Any]:
        """A round's event, by whether it drew from all N clients (:func:`amplified`
        decides that one by replaying the planned run, so once per run, not per round)."""
        return {True: round_event(self.cfg), False: gaussian_event(self.cfg, amplify=False)}

    def round_event(self, pool: int | None) -> Any:
        """The event of a round that drew from ``pool`` clients (None: all N)."""
        return self._events[pool in (None, int(self.cfg.num_clients))]

    def spend(self, pool: int | None) -> None:
        """Compose the event of a round that drew its clients from ``pool`` clients."""
        if self.accountant is not None:
            self.accountant.compose(self.round_event(pool))

    def epsilon(self) -> float:
        """ε at δ so far (∞ without noise, 0 before the first release)."""
        if self.accountant is None:
            return math.inf
        if self.accountant.num_releases == 0:
            return 0.0
        return float(self.accountant.get_epsilon(self.delta))

    def stop_reason(self, server_round: int, pool: int | None) -> str | None:
        """Why round ``server_round`` must not run: its release would exceed the budget."""
        if self.max_epsilon is None or self.accountant is None:
            return None
        if not self.accountant.would_exceed(self.round_event(pool), self.max_epsilon):
            return None
        return (
            f"privacy budget reached: round {server_round} would take ε above "
            f"privacy.max_epsilon = {self.max_epsilon:g} (spent: ε = {self.epsilon():.3g} at "
            f"δ = {self.delta:.3g}); the run stops after round {server_round - 1}"
        )

    def state_dict(self) -> dict[str, Any] | None:
        return None if self.accountant is None else self.accountant.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """The checkpointed events, replayed (a resumed run may change only the budget)."""
        if state is None or self.accountant is None:
            return
        config = dict(state["config"], max_epsilon=self.accountant.config.max_epsilon)
        self.accountant.load_state_dict({**state, "config": config})
