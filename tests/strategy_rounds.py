"""A method's real strategy in the middle of round 1, without a Flower runtime: for tests
that feed it hand-made fit results."""

from __future__ import annotations

from flwr.common import parameters_to_ndarrays
from flwr.server import SimpleClientManager

from fedimb.app import config
from fedimb.app.in_process import InProcessNode
from fedimb.cli.preflight import build_strategy


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
