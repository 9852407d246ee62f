"""The (ε, δ) account of ``privacy=dp_*`` runs: ε as Google's dp-accounting computes it
for the same events, the noise calibrated to what each round averages (the account's
premise), the account across a checkpoint, and the budget's refusals."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from flwr.common import parameters_to_ndarrays

from fedimb.app.configuration import compose as config
from fedimb.app.privacy import account
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.app.server import checkpoint
from fedimb.core.errors import ConfigError
from tests.strategy_rounds import fit_result
from tests.unit.test_privacy import DIGITS, flat, private_fedavg

FIXED = ["privacy=dp_server_fixed", "privacy.noise_multiplier=0.8", "privacy.clipping_norm=1.0"]


def federation(overrides: list[str], num_clients: int = 4) -> InProcessFederation:
    return InProcessFederation(
        [*DIGITS, "method=fedavg", f"num_clients={num_clients}", "train.local_epochs=1"]
        + ["num_rounds=3", *overrides]
    )


def direct_epsilons(event, rounds: int, delta: float) -> list[float]:
    """ε after each of ``rounds`` compositions of ``event``, from dp-accounting itself."""
    accountant = rdp.RdpAccountant(neighboring_relation=rdp.NeighborRel.REPLACE_ONE)
    spent = []
    for _ in range(rounds):
        accountant.compose(event)
        spent.append(accountant.get_epsilon(delta))
    return spent


# --------------------------------------------------------------- ε per round
def test_epsilon_after_each_round_is_dp_accountings_without_sampling():
    """Every client in every round: no amplification, a Gaussian of multiplier σ/2 per
    round (replace-one sensitivity 2·C·p_max, noise σ·C·p_max)."""
    fed = federation(FIXED)
    got = [fed.round(r)["extra"]["privacy.epsilon"] for r in (1, 2, 3)]
    delta = 4**-1.1
    assert got == pytest.approx(direct_epsilons(dp_event.GaussianDpEvent(0.4), 3, delta))
    assert got[0] < got[1] < got[2]


def test_epsilon_with_sampling_is_dp_accountings_sampled_without_replacement():
    """3 of 6 clients drawn uniformly without replacement each round: amplified as
    Wang et al.'s sampling without replacement, q = 3/6 (σ = 2: where that bound is the
    lower one)."""
    sampled = ["fraction_fit=0.5", "min_fit_clients=1", "privacy.noise_multiplier=2.0"]
    fed = federation([*FIXED, *sampled], num_clients=6)
    got = [fed.round(r)["extra"]["privacy.epsilon"] for r in (1, 2)]
    event = dp_event.SampledWithoutReplacementDpEvent(6, 3, dp_event.GaussianDpEvent(1.0))
    assert got == pytest.approx(direct_epsilons(event, 2, 6**-1.1))
    unsampled = direct_epsilons(dp_event.GaussianDpEvent(1.0), 2, 6**-1.1)
    assert got[1] < unsampled[1]  # the amplification is claimed


def test_at_low_noise_the_lower_unamplified_bound_is_taken():
    """σ = 0.8: Wang et al.'s bound for q = 1/2 exceeds the plain Gaussian's, so no
    amplification is claimed."""
    run = [*DIGITS, "num_clients=6", *FIXED, "fraction_fit=0.5", "min_fit_clients=1"]
    event = dp_event.SampledWithoutReplacementDpEvent(6, 3, dp_event.GaussianDpEvent(0.4))
    assert (
        direct_epsilons(event, 3, 6**-1.1)[-1]
        > direct_epsilons(dp_event.GaussianDpEvent(0.4), 3, 6**-1.1)[-1]
    )
    expected = direct_epsilons(dp_event.GaussianDpEvent(0.4), 3, 6**-1.1)
    assert account.planned_epsilons(config.compose([*run, "num_rounds=3"]), 3) == pytest.approx(
        expected
    )


def test_sampling_by_size_claims_no_amplification():
    """A client's chance proportional to its size is not the accountant's model: q = 1."""
    cfg = config.compose(
        [*DIGITS, "num_clients=6", *FIXED, "fraction_fit=0.5", "min_fit_clients=1"]
        + ["sampling=by_size"]
    )
    expected = direct_epsilons(dp_event.GaussianDpEvent(0.4), 2, 6**-1.1)
    assert account.planned_epsilons(cfg, 2) == pytest.approx(expected)


def test_a_resumed_account_continues_exactly(tmp_path):
    """The account travels through a checkpoint file: round 3 after a restart spends
    what an uninterrupted run's round 3 spends, and the model is the same."""
    whole = federation(FIXED)
    expected = [whole.round(r)["extra"]["privacy.epsilon"] for r in (1, 2, 3)]
    first = federation(FIXED)
    first.round(1), first.round(2)
    path = tmp_path / "checkpoint.npz"
    checkpoint.save(path, {"round": 2, "strategy": first.strategy.state_dict()})
    second = federation(FIXED)
    second.strategy.load_state_dict(checkpoint.load(path)["strategy"])
    second.server.parameters = first.server.parameters
    assert second.round(3)["extra"]["privacy.epsilon"] == pytest.approx(expected[2], rel=1e-12)
    for a, b in zip(
        parameters_to_ndarrays(whole.parameters), parameters_to_ndarrays(second.parameters)
    ):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------ the calibrated noise
def test_weighted_mean_noise_is_calibrated_to_the_largest_share():
    """Sample counts 10, 10, 10, 70: the mean's sensitivity is set by the client with
    70 % of the weight, so the noise std is σ·C·0.7, not Flower's σ·C/4."""
    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=0.5", "privacy.clipping_norm=2.0"
    )
    sizes = [10, 10, 10, 70]
    results = [(node, fit_result(base, n=n)) for node, n in zip(nodes, sizes)]
    new, _ = strategy.aggregate_fit(1, results, [])
    noise = flat(parameters_to_ndarrays(new)) - flat(base)
    assert noise.std() == pytest.approx(0.5 * 2.0 * 0.7, rel=0.03)
    assert strategy.round_log.extra["privacy.noise_std"] == pytest.approx(0.7)


def test_a_round_with_fewer_replies_gets_the_noise_of_its_own_mean():
    """3 of 4 sampled clients reply: the mean of 3 has sensitivity ∝ 1/3, so the noise
    std is σ·C/3 (Flower's wrapper, told 4 clients, would add σ·C/4)."""
    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=0.5", "privacy.clipping_norm=2.0"
    )
    new, _ = strategy.aggregate_fit(1, [(n, fit_result(base)) for n in nodes[:3]], [])
    noise = flat(parameters_to_ndarrays(new)) - flat(base)
    assert noise.std() == pytest.approx(0.5 * 2.0 / 3, rel=0.03)


@pytest.mark.parametrize("variant", ["dp_server_adaptive", "dp_client_adaptive"])
def test_adaptive_noise_uses_the_norm_that_clipped_the_round(variant):
    """Flower's adaptive wrappers adapt the norm before they noise; the noise must fit the
    norm the updates were clipped to (round 1: the initial 0.1), not the adapted one."""
    fed = federation([f"privacy={variant}", "privacy.noise_multiplier=0.1"])
    record = fed.round(1)
    wrapper = fed.strategy.wrapper
    assert record["extra"]["privacy.clipping_norm"] != pytest.approx(0.1)  # it adapted
    sizes = fed.run.data.partition.counts.sum(axis=1)  # FedAvg's weights
    expected = wrapper.noise_multiplier * 0.1 * sizes.max() / sizes.sum()
    assert record["extra"]["privacy.noise_std"] == pytest.approx(expected)


# -------------------------------------------------------------- the budget
def test_a_budget_the_first_round_exceeds_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="spent by the first round") as err:
        config.compose([*DIGITS, *FIXED, "privacy.max_epsilon=0.5"])
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="without noise ε is ∞"):
        config.compose(
            [*DIGITS, "privacy=dp_server_fixed", "privacy.noise_multiplier=0"]
            + ["privacy.max_epsilon=5"]
        )


def test_the_plan_names_the_round_the_budget_stops_after():
    cfg = config.compose([*DIGITS, "num_clients=4", *FIXED])
    spent = account.planned_epsilons(cfg, 5)
    budget = (spent[2] + spent[3]) / 2
    line = account.plan_line(
        config.compose([*DIGITS, "num_clients=4", *FIXED, f"privacy.max_epsilon={budget}"]), 5
    )
    assert f"ε = {spent[-1]:.3g}" in line and "stops it after round 3" in line


def test_the_run_stops_before_the_round_that_would_exceed_the_budget():
    cfg = config.compose([*DIGITS, "num_clients=4", *FIXED])
    spent = account.planned_epsilons(cfg, 3)
    fed = federation([*FIXED, f"privacy.max_epsilon={(spent[1] + spent[2]) / 2}"])
    assert fed.strategy.stop_before(1) is None
    fed.round(1), fed.round(2)
    reason = fed.strategy.stop_before(3)
    assert reason is not None and "stops after round 2" in reason


def test_without_the_dp_extra_the_configuration_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "dp_accounting", None)
    with pytest.raises(ConfigError, match="make install EXTRAS=dev,dp"):
        account.privacy_modules()


# ------------------------------------------------------ plan and old configurations
def test_fedimb_epsilon_prints_the_plan_round_by_round():
    from tests.conftest import run_fedimb

    run = [*DIGITS, "num_clients=4", *FIXED, "num_rounds=3"]
    result = run_fedimb("epsilon", *run, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout.strip().splitlines()
    spent = account.planned_epsilons(config.compose(run), 3)
    assert out[0].startswith(f"privacy: 3 rounds spend ε = {spent[-1]:.3g}")
    assert out[-1] == f"| 3 | {spent[-1]:.4g} |" and len(out) == 2 + 3 + 1
    refused = run_fedimb("epsilon", *DIGITS, "privacy=none", timeout=300)
    assert refused.returncode != 0 and "privacy=none spends no ε" in refused.stderr


def test_a_saved_fixed_clipping_configuration_loses_its_retired_key():
    """Version 2 wrote privacy.num_sampled_clients for the fixed variants too; today's
    options do not declare it there, so reading the run folder drops it (and the
    adaptive variants keep theirs)."""
    from omegaconf import OmegaConf

    from fedimb.app.configuration.upgrade import upgrade

    for variant, kept in (("dp_server_fixed", False), ("dp_client_adaptive", True)):
        saved = OmegaConf.to_container(config.compose([*DIGITS, f"privacy={variant}"]))
        saved["config_version"] = 2
        saved["privacy"]["num_sampled_clients"] = 5
        upgraded = upgrade(saved)
        assert ("num_sampled_clients" in upgraded.privacy) is kept
