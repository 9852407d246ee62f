"""The base strategy without a Flower runtime: discovery, sampling, dropout, validation."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays
from flwr.server import SimpleClientManager

from fedimb.app.configuration import compose as config
from fedimb.app.runtimes.in_process import InProcessNode
from fedimb.app.server.run_context import ServerRun
from fedimb.core.dropout import Availability
from strategies.fedavg import FedAvgStrategy
from tests.strategy_rounds import fit_result


def make_strategy(*overrides: str, num_clients: int = 4):
    cfg = config.compose([f"num_clients={num_clients}", "partition=iid", *overrides])
    strategy = FedAvgStrategy(run=ServerRun.build(cfg))
    manager = SimpleClientManager()
    # node ids are arbitrary; partition ids come from the nodes themselves
    nodes = [InProcessNode(f"node-{1000 - i}", i) for i in range(num_clients)]
    for node in nodes:
        manager.register(node)
    strategy.begin_round(1)
    return strategy, manager, nodes


def test_discovery_maps_nodes_to_partitions_and_sends_training_settings():
    strategy, manager, nodes = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    instructions = strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    assert [strategy.registry.partition_of(proxy) for proxy, _ in instructions] == [0, 1, 2, 3]
    assert [proxy.cid for proxy, _ in instructions] == [
        "node-1000",
        "node-999",
        "node-998",
        "node-997",
    ]
    config_sent = instructions[0][1].config
    assert (
        config_sent["lr"] == 0.01
        and config_sent["local_epochs"] == 5
        and config_sent["server_round"] == 1
    )
    assert strategy.round_log.sampled == 4 and strategy.round_log.dropped == 0
    model_bytes = sum(len(t) for t in params.tensors)
    assert strategy.round_log.bytes_down > 4 * model_bytes


def test_dropped_clients_are_not_contacted_and_counted():
    strategy, manager, _ = make_strategy("dropout.p=0.5", "seed=7", num_clients=10)
    params = strategy.initialize_parameters(manager)
    for rnd in range(1, 6):
        strategy.begin_round(rnd)
        instructions = strategy.configure_fit(
            server_round=rnd, parameters=params, client_manager=manager
        )
        contacted = sorted(strategy.registry.partition_of(p) for p, _ in instructions)
        assert contacted == Availability([0.5] * 10, 1, 7).filter(rnd, range(10))
        assert strategy.round_log.dropped == 10 - len(contacted)


def test_fraction_fit_samples_reproducibly():
    a, manager_a, _ = make_strategy("dropout=none", "fraction_fit=0.5", "seed=1", num_clients=10)
    b, manager_b, _ = make_strategy("dropout=none", "fraction_fit=0.5", "seed=1", num_clients=10)
    pa = a.initialize_parameters(manager_a)
    pb = b.initialize_parameters(manager_b)
    for rnd in (1, 2, 3):
        ia = a.configure_fit(server_round=rnd, parameters=pa, client_manager=manager_a)
        ib = b.configure_fit(server_round=rnd, parameters=pb, client_manager=manager_b)
        assert len(ia) == 5
        assert [a.registry.partition_of(p) for p, _ in ia] == [
            b.registry.partition_of(p) for p, _ in ib
        ]


def sampling_frequencies(sampling: str, rounds: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    """How often each of 10 Synthetic devices is drawn (one per round), and their sizes."""
    cfg = config.compose(
        [
            "dataset=synthetic",
            "partition=natural",
            "model=mclr",
            "num_clients=10",
            "dropout=none",
            "fraction_fit=0.1",
            f"sampling={sampling}",
        ]
    )
    strategy = FedAvgStrategy(run=ServerRun.build(cfg))
    manager = SimpleClientManager()
    for i in range(10):
        manager.register(InProcessNode(f"node-{i}", i))
    strategy.configure_fit(
        server_round=1, parameters=strategy.initialize_parameters(manager), client_manager=manager
    )
    drawn = np.zeros(10)
    for rnd in range(1, rounds + 1):
        (pid,) = strategy.sample_clients(rnd)
        drawn[pid] += 1
    return drawn / rounds, strategy.run.data.partition.counts.sum(axis=1)


def test_by_size_sampling_draws_clients_in_proportion_to_their_training_samples():
    uniform, sizes = sampling_frequencies("uniform")
    by_size, _ = sampling_frequencies("by_size")
    share = sizes / sizes.sum()
    assert share.max() > 0.3  # lognormal sizes: one device holds a large share
    # binomial standard error over 3,000 draws is at most 0.009
    assert np.abs(by_size - share).max() < 0.03
    assert np.abs(uniform - 0.1).max() < 0.03


def test_fedavg_weights_by_sample_count():
    strategy, manager, nodes = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    base = parameters_to_ndarrays(params)
    ones = [np.ones_like(a) for a in base]
    threes = [np.full_like(a, 3.0) for a in base]
    new, metrics = strategy.aggregate_fit(
        1, [(nodes[0], fit_result(ones, 1)), (nodes[1], fit_result(threes, 3))], []
    )
    merged = parameters_to_ndarrays(new)
    assert all(np.allclose(m, 2.5) for m in merged)  # (1*1 + 3*3) / 4
    assert metrics["train_loss"] == pytest.approx(1.0)
    assert strategy.round_log.succeeded == 2 and strategy.round_log.failures == 0
    assert strategy.round_log.weight_diversity == pytest.approx(
        sum(a.size for a in base)
    )  # ||1-2||^2 per weight


def test_updates_are_aggregated_in_partition_order_whatever_order_they_arrive_in():
    strategy, manager, nodes = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    base = parameters_to_ndarrays(params)
    arrived = [(nodes[pid], fit_result([a + pid for a in base], n=pid + 1)) for pid in (2, 0, 3, 1)]
    updates = strategy.accept_updates(arrived, [])
    assert [u.partition_id for u in updates] == [0, 1, 2, 3]
    assert [u.num_examples for u in updates] == [1, 2, 3, 4]


def test_nan_and_wrong_shape_updates_are_rejected_and_do_not_touch_the_model():
    strategy, manager, nodes = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    base = parameters_to_ndarrays(params)
    good = [a + 1 for a in base]
    nan = [a.copy() for a in base]
    nan[0].flat[0] = np.nan
    inf = [a.copy() for a in base]
    inf[-1].flat[0] = np.inf
    wrong_shape = [a.copy() for a in base]
    wrong_shape[0] = np.zeros((3, 3), dtype=np.float32)
    results = [
        (nodes[0], fit_result(good)),
        (nodes[1], fit_result(nan)),
        (nodes[2], fit_result(inf)),
        (nodes[3], fit_result(wrong_shape)),
    ]
    new, _ = strategy.aggregate_fit(1, results, [RuntimeError("node crashed")])
    assert all(np.array_equal(m, g) for m, g in zip(parameters_to_ndarrays(new), good))
    log = strategy.round_log
    assert (log.succeeded, log.rejected, log.nonfinite, log.errors) == (1, 3, 2, 1)
    assert any("NaN or Inf" in m for m in log.messages) and any("shapes" in m for m in log.messages)


def test_no_acceptable_update_keeps_the_global_model():
    strategy, manager, nodes = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    bad = [np.full_like(a, np.nan) for a in parameters_to_ndarrays(params)]
    new, _ = strategy.aggregate_fit(1, [(nodes[0], fit_result(bad))], [])
    assert new is None
    assert strategy.round_log.rejected == 1


def test_update_from_a_client_not_asked_is_rejected():
    strategy, manager, nodes = make_strategy("dropout.p=0.0")
    params = strategy.initialize_parameters(manager)
    assert strategy.configure_fit(server_round=1, parameters=params, client_manager=manager) == []
    new, _ = strategy.aggregate_fit(1, [(nodes[0], fit_result(parameters_to_ndarrays(params)))], [])
    assert new is None and strategy.round_log.rejected == 1


def test_server_evaluation_reports_accuracy_f1_recall_and_loss():
    strategy, manager, _ = make_strategy("dropout=none")
    params = strategy.initialize_parameters(manager)
    loss, metrics = strategy.evaluate(0, params)
    test = strategy.round_log.test
    assert loss == test["loss"] and 0 <= metrics["accuracy"] <= 1 and 0 <= metrics["macro_f1"] <= 1
    assert len(test["recall"]) == 10


def make_qffl(update: str):
    from strategies.qffl import QFFLStrategy

    cfg = config.compose(
        [
            "num_clients=2",
            "partition=iid",
            "dropout=none",
            "method=qffl",
            "method.strategy.q=1.0",
            f"method.strategy.update={update}",
        ]
    )
    strategy = QFFLStrategy(run=ServerRun.build(cfg))
    manager = SimpleClientManager()
    nodes = [InProcessNode(f"node-{i}", i) for i in range(2)]
    for node in nodes:
        manager.register(node)
    strategy.begin_round(1)
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    # the losses the server computes for the clients' data: the ones the tests report (1, 2)
    strategy.run.client_training_loss = lambda weights, pid: float(pid + 1)
    return strategy, nodes, parameters_to_ndarrays(params)


def test_qffl_loss_power_weights_models_by_loss_to_the_q():
    strategy, nodes, base = make_qffl("loss_power")
    ones = [np.ones_like(a) for a in base]
    fours = [np.full_like(a, 4.0) for a in base]
    new, _ = strategy.aggregate_fit(
        1,
        [
            (nodes[0], fit_result(ones, initial_loss=1.0)),
            (nodes[1], fit_result(fours, initial_loss=2.0)),
        ],
        [],
    )
    assert all(np.allclose(m, 3.0) for m in parameters_to_ndarrays(new))  # (1*1 + 2*4) / 3


def test_qffl_qfedavg_follows_algorithm_2_and_bad_update_names_fail():
    from fedimb.core.aggregate import qffl_update
    from fedimb.core.errors import ConfigError

    strategy, nodes, base = make_qffl("qfedavg")
    locals_ = [[a - 0.1 for a in base], [a + 0.2 for a in base]]
    new, _ = strategy.aggregate_fit(
        1,
        [
            (nodes[0], fit_result(locals_[0], initial_loss=1.0)),
            (nodes[1], fit_result(locals_[1], initial_loss=2.0)),
        ],
        [],
    )
    expected = qffl_update(base, locals_, [1.0, 2.0], q=1.0, lr=0.01)
    assert all(np.allclose(m, e, atol=1e-6) for m, e in zip(parameters_to_ndarrays(new), expected))
    with pytest.raises(ConfigError, match="method.strategy.update"):
        config.compose(["method=qffl", "method.strategy.update=qffl"])
