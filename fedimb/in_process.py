"""A federation in one process: the real strategy and clients driven round by round,
without Flower's runtime (no SuperLink, no Ray, no messages).

Unit tests use it to run methods quickly; the performance benchmark uses it as the
"plain loop" that does exactly the local training and aggregation of a fedimb run, so
the difference in time is the framework."""

from __future__ import annotations

from flwr.app import Context, RecordDict
from flwr.common import (
    Code,
    EvaluateRes,
    FitRes,
    GetPropertiesRes,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server import SimpleClientManager
from flwr.server.client_proxy import ClientProxy

from fedimb import config
from fedimb.client_app import make_client
from fedimb.server_run import ServerRun

OK = Status(code=Code.OK, message="ok")


class InProcessNode(ClientProxy):
    """A node that answers the partition-id query; training happens in the driver."""

    def __init__(self, cid: str, partition_id: int, make_client=None):
        super().__init__(cid)
        self.partition_id = partition_id
        self.make_client = make_client  # answers properties queries with a real client if given
        self.context = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})

    def get_properties(self, ins, timeout, group_id):
        if self.make_client is not None:
            return GetPropertiesRes(status=OK, properties=self.make_client(self).get_properties(ins.config))
        return GetPropertiesRes(status=OK, properties={"partition_id": self.partition_id, "num_examples": 10})

    def get_parameters(self, ins, timeout, group_id):
        raise NotImplementedError

    def fit(self, ins, timeout, group_id):
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


class InProcessFederation:
    """Drives a strategy and its clients round by round in this process."""

    def __init__(self, overrides: list[str]):
        self.cfg = config.compose(overrides)
        self.run = ServerRun.build(self.cfg)
        self.strategy = config.build_component(self.cfg.method.strategy, run=self.run)
        self.manager = SimpleClientManager()
        self.nodes = [InProcessNode(f"node-{pid}", pid, self.client) for pid in range(int(self.cfg.num_clients))]
        for node in self.nodes:
            self.manager.register(node)
        self.strategy.begin_round(0)
        self.parameters = self.strategy.initialize_parameters(self.manager)

    def client(self, node: InProcessNode):
        return make_client(self.cfg, node.context, node.partition_id)

    def round(self, server_round: int) -> dict:
        s = self.strategy
        s.begin_round(server_round)
        results = []
        for proxy, ins in s.configure_fit(server_round=server_round, parameters=self.parameters, client_manager=self.manager):
            arrays, n, metrics = self.client(proxy).fit(parameters_to_ndarrays(ins.parameters), ins.config)
            results.append((proxy, FitRes(status=OK, parameters=ndarrays_to_parameters(arrays), num_examples=n, metrics=metrics)))
        if results:
            new, _ = s.aggregate_fit(server_round, results, [])
            if new is not None:
                self.parameters = new
        ended = s.end_round(server_round)
        if ended is not None:
            self.parameters = ended
        s.evaluate(server_round, self.parameters)
        evaluations = []
        for proxy, ins in s.configure_evaluate(server_round=server_round, parameters=self.parameters, client_manager=self.manager):
            loss, n, metrics = self.client(proxy).evaluate(parameters_to_ndarrays(ins.parameters), ins.config)
            evaluations.append((proxy, EvaluateRes(status=OK, loss=loss, num_examples=n, metrics=metrics)))
        if evaluations:
            s.aggregate_evaluate(server_round, evaluations, [])
        return s.round_record()
