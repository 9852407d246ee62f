"""``privacy=dp_*``: Flower's DP wrappers around a method's strategy (noise of the stated
scale, clipping to the stated norm, on the server or through the client mod, also in
process), which methods may run under them, and the one-line errors of bad settings."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.client.mod import adaptiveclipping_mod, fixedclipping_mod
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import SimpleClientManager
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM, add_gaussian_noise_to_params

from fedimb.app.configuration import compose as config
from fedimb.app.configuration.keys import group_choices
from fedimb.app.privacy.client_mods import fit_through_mod
from fedimb.app.privacy.strategy import PrivateStrategy, with_privacy
from fedimb.app.privacy.table import payload_table
from fedimb.app.runtimes.in_process import InProcessFederation, InProcessNode
from fedimb.app.server.run_context import ServerRun
from fedimb.core.errors import ConfigError
from strategies.fedavg import FedAvgStrategy
from tests.strategy_rounds import fit_result

DIGITS = ["dataset=digits", "dropout=none", "partition=iid", "checkpoint.enabled=false"]


def private_fedavg(*overrides: str, num_clients: int = 4):
    """A DP-wrapped FedAvg strategy whose ``num_clients`` stand-in nodes are all sampled, at
    the start of round 1 (instructions sent): (strategy, nodes, the global model sent)."""
    cfg = config.compose([*DIGITS, f"num_clients={num_clients}", *overrides])
    strategy = with_privacy(FedAvgStrategy(run=ServerRun.build(cfg)), cfg)
    assert isinstance(strategy, PrivateStrategy)
    manager = SimpleClientManager()
    nodes = [InProcessNode(f"node-{i}", i) for i in range(num_clients)]
    for node in nodes:
        manager.register(node)
    params = strategy.initialize_parameters(manager)
    strategy.begin_round(1)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    return strategy, nodes, parameters_to_ndarrays(params)


def flat(arrays) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


# ------------------------------------------------------------------- the noise
def test_server_side_fixed_clipping_adds_noise_of_std_sigma_c_over_n():
    """Every client sends the model back unchanged: the clipped updates are zero, so the
    new global model minus the old one is the noise alone, N(0, σ·C/n) in every entry
    (σ = 0.5, C = 2, n = 4 sampled clients: std 0.25)."""
    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=0.5", "privacy.clipping_norm=2.0"
    )
    new, _ = strategy.aggregate_fit(1, [(n, fit_result(base)) for n in nodes], [])
    noise = flat(parameters_to_ndarrays(new)) - flat(base)
    assert noise.size > 10_000
    assert abs(noise.mean()) < 0.01
    assert noise.std() == pytest.approx(0.5 * 2.0 / 4, rel=0.03)
    assert strategy.round_log.extra["privacy.noise_std"] == pytest.approx(0.25)


def test_the_noise_is_flowers_own_draw_from_the_rounds_seed():
    """The same noise as a direct call of Flower's ``add_gaussian_noise_to_params`` on the
    noiseless average, with numpy seeded as the wrapper seeds it for the round: the
    wrapper's code, not a copy."""
    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=1.0", "privacy.clipping_norm=1.0"
    )
    new, _ = strategy.aggregate_fit(1, [(n, fit_result(base)) for n in nodes], [])
    np.random.seed(strategy._noise_seed(1))
    expected = add_gaussian_noise_to_params(ndarrays_to_parameters(base), 1.0, 1.0, 4)
    for got, want in zip(parameters_to_ndarrays(new), parameters_to_ndarrays(expected)):
        np.testing.assert_array_equal(got, want)
    assert strategy.inner.current_weights is not None  # the method continues from it
    np.testing.assert_array_equal(strategy.current_weights[0], parameters_to_ndarrays(new)[0])


# ---------------------------------------------------------------- the clipping
def with_update(base, delta_norm: float, seed: int = 0):
    """``base`` plus a random update of L2 norm ``delta_norm`` (over every array)."""
    rng = np.random.default_rng(seed)
    deltas = [rng.normal(size=a.shape).astype(a.dtype) for a in base]
    scale = delta_norm / np.linalg.norm(flat(deltas))
    return [a + (d * scale).astype(a.dtype) for a, d in zip(base, deltas)]


def test_server_side_clipping_brings_a_long_update_to_the_norm_and_keeps_a_short_one():
    """σ = 0 (no noise), C = 1: four identical updates of norm 10 average to one of norm 1;
    four of norm 0.5 stay as they are."""
    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=0", "privacy.clipping_norm=1.0"
    )
    long = with_update(base, 10.0)
    new, _ = strategy.aggregate_fit(1, [(n, fit_result(long)) for n in nodes], [])
    step = flat(parameters_to_ndarrays(new)) - flat(base)
    assert np.linalg.norm(step) == pytest.approx(1.0, rel=1e-4)
    direction = flat(long) - flat(base)
    assert np.allclose(step, direction / 10.0, atol=1e-5)

    strategy, nodes, base = private_fedavg(
        "privacy=dp_server_fixed", "privacy.noise_multiplier=0", "privacy.clipping_norm=1.0"
    )
    short = with_update(base, 0.5)
    new, _ = strategy.aggregate_fit(1, [(n, fit_result(short)) for n in nodes], [])
    assert np.allclose(flat(parameters_to_ndarrays(new)), flat(short), atol=1e-6)


def test_the_client_mod_clips_in_process_as_a_clientapp_would():
    """The in-process runtime runs a fit instruction through Flower's own mod: an update of
    norm 6 comes back with norm C = 1.5."""
    base = [np.zeros((3, 4), np.float32), np.ones(5, np.float32)]
    ins = FitIns(parameters=ndarrays_to_parameters(base), config={KEY_CLIPPING_NORM: 1.5})
    trained = with_update(base, 6.0)
    ctxt = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    res = fit_through_mod(fixedclipping_mod, lambda _: fit_result(trained, n=7), ins, ctxt)
    step = flat(parameters_to_ndarrays(res.parameters)) - flat(base)
    assert np.linalg.norm(step) == pytest.approx(1.5, rel=1e-5)
    assert res.num_examples == 7 and res.metrics["train_loss"] == 1.0


@pytest.mark.parametrize("mod", [fixedclipping_mod, adaptiveclipping_mod])
def test_a_client_that_returns_its_model_unchanged_passes_the_mod(mod):
    """Flower's mods divide by the update's norm: an unchanged model goes back as it is."""
    base = [np.ones((2, 2), np.float32)]
    ins = FitIns(parameters=ndarrays_to_parameters(base), config={KEY_CLIPPING_NORM: 1.0})
    ctxt = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    res = fit_through_mod(mod, lambda _: fit_result(base), ins, ctxt)
    np.testing.assert_array_equal(parameters_to_ndarrays(res.parameters)[0], base[0])
    assert res.metrics.get("norm_bit", False) is False


def test_a_malformed_update_is_rejected_before_flowers_clipping():
    strategy, nodes, base = private_fedavg("privacy=dp_server_fixed", "privacy.noise_multiplier=0")
    wrong = [a.copy() for a in base]
    wrong[0] = np.zeros((3, 3), dtype=np.float32)
    results = [(nodes[0], fit_result(wrong))] + [(n, fit_result(base)) for n in nodes[1:]]
    new, _ = strategy.aggregate_fit(1, results, [])
    assert new is not None and strategy.round_log.rejected == 1
    assert any("client 0 rejected" in note for note in strategy.round_log.messages)


# ------------------------------------------------------------ runs in process
def run_rounds(overrides: list[str], rounds: int = 2):
    fed = InProcessFederation(
        [*DIGITS, "method=fedavg", "num_clients=4", f"num_rounds={rounds}", "train.local_epochs=1"]
        + overrides
    )
    records = [fed.round(r) for r in range(1, rounds + 1)]
    return fed, records


def test_client_and_server_side_fixed_clipping_give_the_same_model():
    """Clipping in the client mod or on the server, then the same seeded noise: one model."""
    dp = ["privacy.noise_multiplier=0.3", "privacy.clipping_norm=0.5"]
    server, _ = run_rounds(["privacy=dp_server_fixed", *dp])
    client, _ = run_rounds(["privacy=dp_client_fixed", *dp])
    for a, b in zip(
        parameters_to_ndarrays(server.parameters), parameters_to_ndarrays(client.parameters)
    ):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_adaptive_clipping_moves_the_norm_and_checkpoints_it():
    fed, records = run_rounds(["privacy=dp_client_adaptive", "privacy.noise_multiplier=0.1"])
    norms = [r["extra"]["privacy.clipping_norm"] for r in records]
    assert norms[0] != pytest.approx(0.1) and all(n > 0 for n in norms)
    state = fed.strategy.state_dict()
    assert state["privacy_clipping_norm"] == pytest.approx(norms[-1])
    fed.strategy.load_state_dict({**state, "privacy_clipping_norm": 0.7})
    assert fed.strategy.wrapper.clipping_norm == 0.7


def test_a_payload_method_runs_only_when_its_payloads_are_accepted_unprotected():
    """ReBaFL's clients send class prototypes and their per-class counts beside the update."""
    with pytest.raises(ConfigError, match=r"privacy.payloads=unprotected") as err:
        config.compose([*DIGITS, "method=rebafl", "privacy=dp_server_fixed"])
    assert "prototypes_counts" in str(err.value) and "\n" not in str(err.value)
    fed = InProcessFederation(
        [*DIGITS, "method=rebafl", "num_clients=3", "num_rounds=1", "train.local_epochs=1"]
        + ["privacy=dp_server_fixed", "privacy.payloads=unprotected"]
    )
    assert fed.round(1)["clients"]["succeeded"] == 3


# ------------------------------------------------------------------- the rules
@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["privacy=dp_server_fixed", "privacy.clipping_norm=0"],
            "privacy.clipping_norm must be > 0",
        ),
        (["privacy=dp_server_fixed", "privacy.noise_multiplier=-1"], "privacy.noise_multiplier"),
        (["privacy=dp_client_fixed", "privacy.noise_multiplier=abc"], "must be a number"),
        (["privacy=dp_server_fixed", "privacy.num_sampled_clients=0"], "num_sampled_clients"),
        (["privacy=dp_server_fixed", "privacy.payloads=maybe"], "privacy.payloads"),
        (["privacy=dp_server_adaptive", "privacy.target_clipped_quantile=2"], "in [0, 1]"),
        (["privacy=dp_server_adaptive", "privacy.clip_norm_lr=0"], "privacy.clip_norm_lr"),
        (["privacy=dp_server_adaptive", "privacy.noise_multiplier=1"], "2 · privacy.clipped"),
        (["privacy=dp_client_adaptive", "privacy.clipped_count_stddev=-1"], "clipped_count_std"),
        (["privacy=dp_server_fixed", "aggregation=median"], "use aggregation=mean"),
        (["privacy=dp_server_fixed", "normalize=latent_cosine"], "latent_mean"),
        (["privacy=dp_server_fixed", "model=resnet"], "BatchNorm"),
        (["privacy=dp_server_fixed", "method=scaffold"], "control_delta"),
        (["privacy=dp_server_fixed", "method=local"], "does not average"),
        (["privacy=dp_server_fixed", "method=astraea"], "does not average"),
        (["privacy=dp_server_fixed", "method=fedconcat"], "does not average"),
        (["privacy=dp_server_fixed", "method=lg_fedavg"], "has no global model"),
        (["privacy=dp_server_fixed", "method=qffl", "method.strategy.update=qfedavg"], "average"),
        (["privacy=dpx"], "unknown privacy 'dpx'"),
        (["privacy.clipping_norm=1"], "privacy=none has no clipping_norm"),
    ],
)
def test_every_bad_setting_is_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        config.compose([*DIGITS, "num_clients=4", *overrides])
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_num_sampled_clients_defaults_to_the_clients_sampled_per_round():
    from fedimb.app.privacy.dp import num_sampled_clients

    run = [*DIGITS, "num_clients=10", "privacy=dp_server_fixed"]
    assert num_sampled_clients(config.compose([*run, "fraction_fit=0.35"])) == 4  # round(3.5)
    assert num_sampled_clients(config.compose([*run, "fraction_fit=0.1"])) == 1
    adaptive = [*run, "privacy=dp_server_adaptive", "privacy.num_sampled_clients=7"]
    assert num_sampled_clients(config.compose(adaptive)) == 7


def test_the_docs_table_is_the_methods_declarations():
    """docs/tables/privacy_payloads.md is what benchmarks/accuracy/privacy.py --table-only
    writes from the declarations, one row per method (rewritten here where out of date:
    tests.generated)."""
    from benchmarks.common import DOCS_TABLES
    from tests.generated import keep_current

    path = DOCS_TABLES / "privacy_payloads.md"
    header = "<!-- written by benchmarks/accuracy/privacy.py; rerun it to update -->"
    table = payload_table()
    keep_current(path, "\n".join([header, "", *table]) + "\n")
    rows = [line.split("|")[1].strip() for line in table[2:]]
    assert rows == group_choices("method")
