"""A method's real strategy in the middle of round 1, without a Flower runtime: for tests
that feed it hand-made fit results."""

from __future__ import annotations

from flwr.common import FitRes, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import SimpleClientManager

from fedimb.app.configuration import compose as config
from fedimb.app.runtimes.in_process import OK, InProcessNode
from fedimb.cli.launch.preflight import build_strategy


def started_round(*overrides: str, num_clients: int = 3):
    """The strategy of ``overrides`` (IID, no dropout) after sending round 1's instructions
    to ``num_clients`` in-process nodes: (strategy, nodes, the global model's arrays)."""
    cfg = config.compose(
        [f"num_clients={num_clients}", "partition=iid", "dropout=none", *overrides]
    )
    strategy = build_strategy(cfg)
    manager = SimpleClientManager()
    nodes = [InProcessNode(f"node-{i}", i) for i in range(num_clients)]
    for node in nodes:
        manager.register(node)
    strategy.begin_round(1)
    params = strategy.initialize_parameters(manager)
    strategy.configure_fit(server_round=1, parameters=params, client_manager=manager)
    return strategy, nodes, parameters_to_ndarrays(params)


def fit_result(arrays, n: int = 10, **metrics) -> FitRes:
    """A successful fit result of ``arrays`` trained on ``n`` samples, reporting a training
    loss of 1 and ``metrics``."""
    return FitRes(
        status=OK,
        parameters=ndarrays_to_parameters(arrays),
        num_examples=n,
        metrics={"train_loss": 1.0, **metrics},
    )
