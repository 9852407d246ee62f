"""A run in which no client trained is a failed run; clients lost at the start are
counted with their causes. Fed fake ServerApp events, as every runtime's log delivers them."""

from __future__ import annotations

import json

import pytest

from fedimb.app.configuration.compose import compose
from fedimb.app.nodes.registry import ClientRegistry
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.core.events import emit_clients_lost, format_event, lost_clients_cause, parse_event
from strategies.base.sampling import lost_client_reasons
from tests.run_events import start_event

CFG = ["dataset=digits", "num_clients=3", "num_rounds=2", "runtime=in_process", "device=cpu"]
NO_DATA = "could not start: DataUnavailableError: device data /nope/device.npz does not exist"


def a_round(number: int, ok: int, errors: int = 0, messages: tuple[str, ...] = ()) -> str:
    clients = {
        "sampled": ok + errors,
        "succeeded": ok,
        "dropped": 0,
        "errors": errors,
        "rejected": 0,
        "nonfinite": 0,
        "failures": errors,
    }
    return format_event(
        "round",
        round=number,
        stage="train",
        seconds=1.0,
        test={"accuracy": 0.099},
        clients=clients,
        messages=list(messages),
    )


@pytest.fixture
def recorder(tmp_path):
    lines: list[str] = []
    recorder = RunRecorder(tmp_path, compose(CFG), echo=lines.append)
    recorder.feed(start_event(num_parameters=100, num_clients=3, num_rounds=2))
    recorder.feed(
        format_event("round", round=0, stage="train", seconds=0.0, test={"accuracy": 0.099})
    )
    recorder.lines = lines
    yield recorder
    recorder.close()


def lost_event(reasons: dict[str, int]) -> str:
    return format_event(
        "warning",
        message="...",
        num_clients=3,
        clients_lost=sum(reasons.values()),
        clients_lost_reasons=reasons,
    )


def test_a_run_in_which_no_client_trained_fails_with_the_lost_clients_cause(recorder):
    recorder.feed(lost_event({NO_DATA: 3}))
    recorder.feed(a_round(1, ok=0))
    recorder.feed(a_round(2, ok=0))
    recorder.feed(format_event("end", rounds=2, seconds=3.0))
    assert recorder.failure_reason() == f"no client trained in any round: 3 of 3 clients {NO_DATA}"
    summary = recorder.summary()
    assert summary["completed"] is False
    assert summary["clients_lost"] == 3 and summary["clients_lost_reasons"] == {NO_DATA: 3}


def test_without_lost_clients_the_cause_is_the_last_rounds_failure(recorder):
    recorder.feed(a_round(1, ok=0, errors=3, messages=("client 0 on node 7: RuntimeError: boom",)))
    recorder.feed(format_event("end", rounds=1, seconds=3.0))
    assert (
        recorder.failure_reason()
        == "no client trained in any round: client 0 on node 7: RuntimeError: boom"
    )
    assert recorder.summary()["completed"] is False


def test_a_run_that_lost_some_clients_completes_and_says_how_many_and_why(recorder):
    recorder.feed(lost_event({"did not connect": 1}))
    recorder.feed(a_round(1, ok=0))
    recorder.feed(a_round(2, ok=2))  # one round with an accepted update is enough
    recorder.feed(format_event("end", rounds=2, seconds=3.0))
    assert recorder.failure_reason() is None
    summary = recorder.summary()
    assert summary["completed"] is True
    assert summary["clients_lost"] == 1 and summary["clients_lost_reasons"] == {
        "did not connect": 1
    }
    assert json.loads(json.dumps(summary))["clients_lost"] == 1


def test_a_run_that_lost_no_client_reports_none_lost(recorder):
    recorder.feed(a_round(1, ok=3))
    recorder.feed(format_event("end", rounds=1, seconds=1.0))
    summary = recorder.summary()
    assert (
        summary["completed"] is True
        and summary["clients_lost"] == 0
        and summary["clients_lost_reasons"] == {}
    )


def test_lost_clients_are_a_node_failure_each_and_the_rest_did_not_connect():
    assert lost_client_reasons(3, ["E: no data", "E: no data"]) == {
        "could not start: E: no data": 2,
        "did not connect": 1,
    }
    assert lost_client_reasons(1, ["E: a", "E: b"]) == {"could not start: E: a": 1}  # an extra node
    assert lost_client_reasons(2, []) == {"did not connect": 2}
    assert (
        lost_clients_cause(1, {"could not start: E: a": 1})
        == "1 of 1 clients could not start: E: a"
    )
    assert (
        lost_clients_cause(3, {"did not connect": 1, "could not start: E: a": 1})
        == "2 of 3 clients lost: 1 did not connect; 1 could not start: E: a"
    )


def test_the_lost_clients_warning_is_printed_by_the_front_end(recorder, capsys):
    emit_clients_lost(3, {"did not connect": 2})
    line = capsys.readouterr().out.strip()
    assert parse_event(line)["clients_lost"] == 2
    recorder.feed(line)
    assert (
        recorder.lines[-1]
        == "[fedimb] warning: 2 of 3 clients did not connect; continuing without them"
    )


class FailingProxy:
    def __init__(self, cid: str, error: Exception | None):
        self.cid, self.error = cid, error

    def get_properties(self, ins, timeout, group_id):
        if self.error is not None:
            raise self.error
        return type("Res", (), {"properties": {"partition_id": 0, "num_examples": 5}})()


class Manager:
    def __init__(self, proxies):
        self.proxies = {p.cid: p for p in proxies}

    def num_available(self) -> int:
        return len(self.proxies)

    def all(self):
        return dict(self.proxies)


def test_the_registry_keeps_why_a_connected_node_could_not_start():
    wrapped = (
        "Message contains an Error (reason: "
        "<class 'fedimb.core.errors.DataUnavailableError'>:"
        "<'device data /nope/device.npz does not exist'>). "
        "It originated during client-side execution of a message."
    )
    manager = Manager([FailingProxy("a", ValueError(wrapped)), FailingProxy("b", None)])
    registry = ClientRegistry(capacity=3)
    registry.refresh(manager)
    assert registry.partition_ids() == [0]
    assert registry.unstarted_nodes(manager) == {
        "a": "DataUnavailableError: device data /nope/device.npz does not exist"
    }
    del manager.proxies["a"]  # a node that left is no longer a node that could not start
    assert registry.unstarted_nodes(manager) == {}
