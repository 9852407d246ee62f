"""Layer-wise weight shrinking (``shrink=fedlws``, FedLWS) as a plug-in: the factors on
hand-computed models, and the option on averaging methods (refused where the server step
is no average of the client models)."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.configuration import compose as config
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.aggregate import weighted_average
from fedimb.core.errors import ConfigError
from fedimb.core.shrinking import ShrinkSettings, layer_groups, shrinking_factors, shrunk

#: β = 0.1, τ clipped to [0.05, 0.2]
SETTINGS = ShrinkSettings(beta=0.1, min_tau=0.05, max_tau=0.2)
#: a layer a.weight + a.bias (closed by the bias), a buffer, and b.weight after the last bias
NAMES = ["a.weight", "a.bias", "a.count", "b.weight"]
PARAMETERS = ["a.weight", "a.bias", "b.weight"]


def model(a_weight, a_bias, count, b_weight) -> list[np.ndarray]:
    return [
        np.array(a_weight, dtype=np.float32),
        np.array(a_bias, dtype=np.float32),
        np.array([count], dtype=np.int64),
        np.array(b_weight, dtype=np.float32),
    ]


def test_layers_close_at_each_bias_and_leave_buffers_out():
    assert layer_groups(NAMES, PARAMETERS) == [[0, 1], [3]]
    resnet = ["conv.weight", "bn.weight", "bn.bias", "bn.running_var", "fc.weight", "fc.bias"]
    params = ["conv.weight", "bn.weight", "bn.bias", "fc.weight", "fc.bias"]
    assert layer_groups(resnet, params) == [[0, 1, 2], [4, 5]]  # a conv joins its batch norm


def test_two_clients_two_layers_by_hand():
    """Previous global model w: layer 0 = (a.weight, a.bias) = (3, 0 | 4), ‖w_0‖ = 5;
    layer 1 = b.weight = (6, 8), ‖w_1‖ = 10. Client updates Δ_k = model_k − w:

    layer 0: Δ_1 = (0, 3 | 4), Δ_2 = (0, −3 | −4); Δ̄ = 0, both ‖Δ_k − Δ̄‖ = 5, spread 5;
      β·5 = 0.5 > max_tau: τ_0 = 0.2 (the clip binds). Weights (3/4, 1/4): the aggregate's
      Δ_0 = (0, 1.5 | 2), ‖Δ_0‖ = 2.5; γ_0 = 5 / (5 + 0.2·2.5) = 10/11.
    layer 1: Δ_1 = (1, 0), Δ_2 = (−1, 0); spread 1, τ_1 = 0.1 (inside [0.05, 0.2]);
      Δ_1 of the aggregate = (0.5, 0), ‖·‖ = 0.5; γ_1 = 10 / (10 + 0.1·0.5) = 200/201.

    The shrunk model: a.weight = (3, 1.5)·10/11, a.bias = 6·10/11, b.weight = (6.5, 8)·200/201;
    the counter (a buffer) stays the aggregate's 9."""
    previous = model([3, 0], [4], 7, [6, 8])
    clients = [model([3, 3], [8], 9, [7, 8]), model([3, -3], [0], 9, [5, 8])]
    aggregate = weighted_average(clients, [3, 1])
    layers = layer_groups(NAMES, PARAMETERS)
    gammas, taus = shrinking_factors(previous, aggregate, clients, layers, SETTINGS)
    np.testing.assert_allclose(taus, [0.2, 0.1], rtol=1e-12)
    np.testing.assert_allclose(gammas, [10 / 11, 200 / 201], rtol=1e-12)
    new = shrunk(aggregate, layers, gammas)
    np.testing.assert_allclose(new[0], np.array([3, 1.5]) * 10 / 11, rtol=1e-6)
    np.testing.assert_allclose(new[1], [6 * 10 / 11], rtol=1e-6)
    assert new[2].dtype == np.int64 and new[2].tolist() == [9]
    np.testing.assert_allclose(new[3], np.array([6.5, 8]) * 200 / 201, rtol=1e-6)
    assert [a.dtype for a in new] == [a.dtype for a in aggregate]


def test_the_spread_is_about_the_clients_unweighted_mean():
    """One layer w = (3, 4), ‖w‖ = 5; three clients Δ = (1, 0), (0, 0.75), (−1, −0.75)
    weighted (1, 1, 2): the aggregate's Δ = (−0.25, −0.1875), ‖Δ‖ = 0.3125. The unweighted
    mean Δ̄ = 0, distances 1, 0.75, 1.25: spread 1, τ = 0.1 (from the aggregate's Δ the
    mean distance would be 1.057; the norm of the mean |deviation| per weight 5/6).
    γ = 5 / (5 + 0.1·0.3125) = 160/161."""
    previous = [np.array([3.0, 4.0])]
    clients = [[np.array([4.0, 4.0])], [np.array([3.0, 4.75])], [np.array([2.0, 3.25])]]
    aggregate = weighted_average(clients, [1, 1, 2])
    gammas, taus = shrinking_factors(previous, aggregate, clients, [[0]], SETTINGS)
    np.testing.assert_allclose(taus, [0.1], rtol=1e-12)
    np.testing.assert_allclose(gammas, [160 / 161], rtol=1e-12)


def test_one_client_has_no_spread_and_a_zero_layer_is_kept():
    """One client: spread 0, so τ = min_tau = 0.05; w = (3, 4), Δ = (0, 2): γ = 5 / (5 +
    0.05·2) = 50/51. A layer whose previous weights are 0 keeps γ = 1."""
    previous = [np.array([3.0, 4.0]), np.zeros(2)]
    clients = [[np.array([3.0, 6.0]), np.ones(2)]]
    gammas, taus = shrinking_factors(previous, clients[0], clients, [[0], [1]], SETTINGS)
    np.testing.assert_allclose(taus, [0.05, 0.05])
    np.testing.assert_allclose(gammas, [50 / 51, 1.0], rtol=1e-12)


def test_settings_are_checked_in_one_line():
    assert ShrinkSettings.from_config({"name": "none"}) is None
    for section, expected in (
        ({"name": "fedlwz"}, "unknown shrink 'fedlwz'"),
        ({"name": "fedlws", "beta": -1, "min_tau": 0.01, "max_tau": 0.2}, "shrink.beta"),
        ({"name": "fedlws", "beta": 0.03, "min_tau": 0.3, "max_tau": 0.2}, "shrink.max_tau"),
    ):
        with pytest.raises(ConfigError, match=expected):
            ShrinkSettings.from_config(section)


DIGITS = ["dataset=digits", "num_clients=3", "dropout=none", "train.local_epochs=1"]


def test_the_method_is_fedavg_with_the_option_and_the_option_can_be_turned_off():
    cfg = config.compose(["method=fedlws", *DIGITS])
    assert cfg.shrink.name == "fedlws" and cfg.shrink.beta == 0.03
    assert cfg.method.strategy._target_ == "strategies.fedavg.FedAvgStrategy"
    assert config.compose(["method=fedlws", "shrink=none", *DIGITS]).shrink.name == "none"
    assert config.compose(["method=fedavg", *DIGITS]).shrink.name == "none"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["method=feddyn"], "method 'feddyn' does not average the client models, so shrink="),
        (["method=fednova"], "use shrink=none"),
        (["method=qffl", "method.strategy.update=qfedavg"], "does not average"),
        (["method=fedavg", "shrink.max_tau=0.001"], "shrink.max_tau must be >= 0.01"),
        (["method=fedavg", "privacy=dp_server_fixed"], "which shrink=fedlws rescales"),
    ],
)
def test_the_option_is_refused_in_one_line_where_it_does_not_apply(overrides, expected):
    with pytest.raises(ConfigError) as err:
        config.compose([*DIGITS, "shrink=fedlws", *overrides])
    assert expected in str(err.value) and "\n" not in str(err.value)


def recording(fed: InProcessFederation) -> list[tuple]:
    """(previous global, client models, the method's aggregate) of every round."""
    seen: list[tuple] = []
    method_aggregate = fed.strategy.aggregate

    def aggregate(server_round, updates):
        result = method_aggregate(server_round, updates)
        seen.append((fed.strategy.current_weights, [u.arrays for u in updates], result))
        return result

    fed.strategy.aggregate = aggregate
    return seen


@pytest.mark.parametrize("method", ["fedavg", "fedprox"])
def test_the_option_shrinks_what_an_averaging_method_aggregates(method):
    """Two rounds on digits: each new global model is the method's aggregate shrunk with the
    factors of the previous global model and the accepted client models, which the round
    records; in round 1 the aggregate is what the method gives without the option."""
    fed = InProcessFederation([f"method={method}", *DIGITS, "shrink=fedlws"])
    plain = InProcessFederation([f"method={method}", *DIGITS])
    seen = recording(fed)
    names, parameters = fed.strategy.global_arrays_named()
    layers = layer_groups(names, parameters)
    assert len(layers) == 3  # the MLP's two hidden layers and its head
    for rnd in (1, 2):
        record = fed.round(rnd)
        previous, clients, aggregate = seen[-1]
        gammas = [record["extra"][f"shrink.gamma.{i}"] for i in range(len(layers))]
        assert all(0 < g < 1 for g in gammas)
        expected, _ = shrinking_factors(previous, aggregate, clients, layers, fed.strategy.shrink)
        np.testing.assert_allclose(gammas, expected, rtol=1e-12)
        for new, old in zip(fed.strategy.current_weights, shrunk(aggregate, layers, gammas)):
            np.testing.assert_array_equal(new, old)
        if rnd == 1:
            plain.round(1)
            new = fed.strategy.current_weights
            for i, array in enumerate(plain.strategy.current_weights):
                gamma = next(g for layer, g in zip(layers, gammas) if i in layer)
                np.testing.assert_allclose(new[i], gamma * array, rtol=1e-5)
    assert not any("shrink" in message for message in record.get("messages", []))


def test_lg_fedavg_shrinks_its_global_head():
    fed = InProcessFederation(["method=lg_fedavg", *DIGITS, "shrink=fedlws"])
    assert fed.strategy.global_arrays_named()[0] == ["weight", "bias"]
    record = fed.round(1)
    assert 0 < record["extra"]["shrink.gamma.0"] < 1 and "shrink.gamma.1" not in record["extra"]
