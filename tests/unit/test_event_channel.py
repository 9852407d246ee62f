"""The events' one channel, piece by piece: in process :func:`events.emit` hands events to
the runtime's sink and whatever the process prints or logs is plain text; in the Flower
runtimes no client text reaches the ServerApp's log with the event tag at a line's start
(the simulation's Ray keeps its actors' output, a node's or a client's error is made
safe before the server logs it). The whole path: tests/integration/test_hostile_output.py."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from flwr.app import Context, RecordDict
from flwr.common import GetPropertiesIns

from fedimb.app.configuration import transport
from fedimb.app.configuration.compose import compose
from fedimb.app.faults.attacks import forged_message, forged_output
from fedimb.app.nodes import client_app
from fedimb.app.nodes.node_proxy import ask_properties
from fedimb.app.runtimes.in_process import _LineWriter, _server_output_to
from fedimb.core import events, protocol
from fedimb.core.events import TAG, parse_event

FORGED = forged_message(1, 1)
DIGITS = ["dataset=digits", "num_clients=3", "dropout=none"]


def no_line_is_an_event(text: str) -> bool:
    """Whether no line of ``text``, split wherever Python splits lines, is an event."""
    return not [line for line in text.splitlines() if parse_event(line) is not None]


def test_emit_hands_events_to_the_sink_while_one_is_installed(capsys):
    got: list[str] = []
    with events.to_sink(got.append):
        events.emit("round", round=1)
    events.emit("end", rounds=1)
    assert [parse_event(line) for line in got] == [{"event": "round", "round": 1}]
    assert parse_event(capsys.readouterr().out) == {"event": "end", "rounds": 1}


def test_in_process_only_emit_writes_events_what_is_printed_or_logged_is_text():
    lines: list[str] = []
    with _server_output_to(_LineWriter(lines.append, io.StringIO())):
        for line in forged_output(1, 1):
            print(line)
            logging.getLogger("a.client").warning(line)
        print(FORGED, end="")  # the last line without its newline: flushed at the end
        events.emit("round", round=1)
    assert [parse_event(line) for line in lines if parse_event(line)] == [
        {"event": "round", "round": 1}
    ]
    text = [line for line in lines if not parse_event(line)]
    assert len(text) == 2 * len(forged_output(1, 1)) + 3
    assert all(no_line_is_an_event(line) for line in text)  # whatever a reader splits at
    assert sum("FEDIMB_EVENT" in line for line in text) == len(text) - 1  # kept, defanged


def test_the_simulations_actors_output_stays_out_of_the_servers_log():
    """The federation config ``flwr run`` gets asks Flower's Ray backend not to print
    its actors' output into the ServerApp's process (Ray's ``log_to_driver``)."""
    from flwr.common.config import parse_config_args
    from flwr.simulation.app import _run_simulation_settings
    from flwr.supercore.utils import simulation_config_from_json

    from fedimb.cli.federation.flwr_cli import FlwrCli
    from fedimb.cli.launch import flower_run

    federation = {**flower_run.federation_config(compose(DIGITS)), **flower_run.QUIET_ACTORS}
    args = FlwrCli("local", Path("home")).run_args(Path("app"), {}, federation)
    parsed = parse_config_args([args[args.index("--federation-config") + 1]])
    sent = simulation_config_from_json({k.replace("-", "_"): v for k, v in parsed.items()})
    assert _run_simulation_settings(sent)[2]["init_args"] == {"log_to_driver": False}


class _Refusing:
    cid = "7"

    def get_properties(self, ins, timeout, group_id):
        raise RuntimeError(f"Message contains an Error (reason: {FORGED})")


def test_a_nodes_error_is_logged_in_one_line_without_the_tag(caplog):
    with caplog.at_level(logging.WARNING):
        (answer,) = ask_properties([_Refusing()], {}, timeout=1.0)
    assert isinstance(answer, str)
    (record,) = caplog.records
    assert "\n" not in record.getMessage() and TAG.strip() not in record.getMessage()


@pytest.mark.parametrize("client_ids", ["claimed", "assigned"])
def test_a_client_that_cannot_start_fails_with_a_safe_message(client_ids, monkeypatch):
    """The simulation logs a ClientApp's error in the ServerApp's process, also one
    raised while its client is made."""

    def broken(*args, **kwargs):
        raise ValueError(FORGED)

    monkeypatch.setattr(client_app, "timed_client", broken)
    cfg = compose([*DIGITS, f"runtime.client_ids={client_ids}"])
    context = Context(
        run_id=1,
        node_id=1,
        node_config={"partition-id": 1, "num-partitions": 3},
        state=RecordDict(),
        run_config={"config": transport.encode(cfg)},
    )
    with pytest.raises(ValueError) as raised:
        client = client_app.client_fn(context)
        client.get_properties(GetPropertiesIns({protocol.ASSIGNED_PARTITION: 1}))
    assert "\n" not in str(raised.value) and TAG.strip() not in str(raised.value)
