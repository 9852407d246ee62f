"""A server with one worker calls its clients in its own thread, and sorts their replies
into results and failures as Flower's ``fit_clients`` does."""

from __future__ import annotations

import threading

from flwr.common import Code, FitIns, FitRes, Parameters, Status
from flwr.server import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import FedAvg

from fedimb.app.runtimes.clients_in_turn import ClientsInTurn, call_in_turn

EMPTY = Parameters(tensors=[], tensor_type="numpy.ndarray")


class FakeProxy(ClientProxy):
    """A client that answers ``code``, or raises ``error``; notes the thread it ran in."""

    def __init__(self, cid: str, code: Code = Code.OK, error: Exception | None = None):
        super().__init__(cid)
        self.code, self.error = code, error
        self.thread: int | None = None

    def fit(self, ins, timeout, group_id):
        self.thread = threading.get_ident()
        if self.error is not None:
            raise self.error
        return FitRes(Status(self.code, "done"), EMPTY, 1, {"group": group_id})

    def get_properties(self, ins, timeout, group_id):
        raise NotImplementedError

    def get_parameters(self, ins, timeout, group_id):
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


def test_replies_are_sorted_as_flower_sorts_them_in_the_callers_thread():
    ok, refused = FakeProxy("ok"), FakeProxy("refused", code=Code.FIT_NOT_IMPLEMENTED)
    broken = FakeProxy("broken", error=RuntimeError("out of memory"))
    later = FakeProxy("later")
    instructions = [(p, FitIns(EMPTY, {})) for p in (ok, refused, broken, later)]

    results, failures = call_in_turn("fit", instructions, timeout=None, group_id=3)

    assert [proxy.cid for proxy, _ in results] == ["ok", "later"]  # in the order given
    assert all(res.metrics == {"group": 3} for _, res in results)
    assert failures[0][0] is refused and failures[0][1].status.code == Code.FIT_NOT_IMPLEMENTED
    assert isinstance(failures[1], RuntimeError) and str(failures[1]) == "out of memory"
    assert {p.thread for p in (ok, refused, broken, later)} == {threading.get_ident()}


def test_a_server_with_one_worker_trains_its_clients_in_its_own_thread():
    server = ClientsInTurn(client_manager=SimpleClientManager(), strategy=FedAvg())
    server.set_max_workers(1)
    clients = [FakeProxy("a"), FakeProxy("b")]
    for client in clients:
        server.client_manager().register(client)
    server.parameters = EMPTY

    result = server.fit_round(server_round=1, timeout=None)

    assert result is not None
    _, _, (results, failures) = result
    assert len(results) == 2 and not failures
    assert {c.thread for c in clients} == {threading.get_ident()}
