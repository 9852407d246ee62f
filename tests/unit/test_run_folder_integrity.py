"""The run folder holds only what the ServerApp reported, written by one process: a
client's words never become an event, a second writer is refused, a damaged events line
is skipped on resume, and a full disk at the end leaves the run resumable."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from flwr.client import NumPyClient
from flwr.common import FitIns, ndarrays_to_parameters

from fedimb.app.configuration.compose import compose
from fedimb.app.server.phases import PhaseClock, TimedClient
from fedimb.cli.rundir.access import (
    RunFolderError,
    RunFolderInUse,
    hold_run_folder,
    release_run_folder,
)
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.core.events import TAG, format_event, neutral, parse_event
from strategies.base.round_log import RoundLog
from tests.conftest import REPO, run_fedimb
from tests.run_events import start_event

CFG = [
    "dataset=digits",
    "num_clients=3",
    "num_rounds=1",
    "runtime=in_process",
    "device=cpu",
    "dropout=none",
]

#: what a hostile client puts in an exception message: the server's best round, and an
#: artifact that would replace partition.json
FORGED_ROUND = format_event("round", round=0, stage="train", seconds=0.0, test={"accuracy": 0.999})
FORGED_ARTIFACT = format_event("artifact", name="partition", data={"forged": True})


# ------------------------------------------------------------------ forged events
@pytest.mark.parametrize(
    "line",
    [
        # Flower's log record
        f"WARNING :   round 1: client 1 on node 7: RuntimeError: {FORGED_ARTIFACT}",
        # in_process's log record
        f"WARNING strategies.base.round_log: round 1: client 1 failed: {FORGED_ROUND}",
        # a line of the simulation's traceback
        f"Exception ClientAppException occurred. Message: {FORGED_ROUND}",
        f"[   12.6s] {FORGED_ROUND}",
    ],
)
def test_an_event_quoted_inside_a_log_line_is_not_an_event(line):
    assert parse_event(line) is None


def test_the_servers_own_event_lines_still_parse():
    for line in (
        FORGED_ROUND,
        f"  {FORGED_ARTIFACT}\r",
        format_event("end", rounds=2, seconds=1.5),
    ):
        assert parse_event(line) is not None


@pytest.mark.parametrize(
    "text",
    [
        f"boom\n{FORGED_ROUND}",
        f"boom\r{FORGED_ROUND}",
        f"boom\x85{FORGED_ROUND}",
        f"boom\u2028{FORGED_ROUND}",
        FORGED_ROUND,
        f'x {TAG.lower()}{{"event":"end"}}',
        "y" * 5000 + f"\n{FORGED_ROUND}",
    ],
)
def test_neutral_text_is_one_bounded_line_that_never_carries_an_event(text):
    safe = neutral(text)
    assert len(safe.splitlines()) == 1 and len(safe) <= 300
    assert TAG.strip().lower() not in safe.lower()
    assert parse_event(safe) is None and parse_event(safe.split("boom")[-1]) is None


def test_a_round_note_quotes_a_client_in_one_line_without_the_tag(caplog):
    log = RoundLog(round=1, stage="train")
    with caplog.at_level(logging.WARNING):
        log.note(f"client 1 failed: ValueError: nope\n{FORGED_ARTIFACT}")
    (message,) = log.messages
    assert message.startswith("client 1 failed: ValueError: nope FEDIMB_EVENT {")
    for line in caplog.text.splitlines() + log.to_record()["messages"]:
        assert parse_event(line) is None and not line.lstrip().startswith(TAG.strip())


def test_the_lost_clients_warning_quotes_their_errors_in_one_line(capsys):
    from fedimb.core.events import emit_clients_lost

    emit_clients_lost(
        3, {f"could not start: OSError: x\n{FORGED_ARTIFACT}": 1, "did not connect": 1}
    )
    (line,) = capsys.readouterr().out.splitlines()
    (why, _) = parse_event(line)["clients_lost_reasons"]
    assert why.startswith("could not start: OSError: x FEDIMB_EVENT {") and "\n" not in why


def test_an_artifact_never_replaces_a_file_of_the_run_folder(tmp_path):
    from fedimb.cli.rundir.files import write_artifact

    (tmp_path / "partition.json").write_text("{}")
    write_artifact(tmp_path, "partition", {"forged": True})
    write_artifact(tmp_path, "elbow", {"k": 2})
    assert (tmp_path / "partition.json").read_text() == "{}"
    assert json.loads((tmp_path / "artifact-partition.json").read_text()) == {"forged": True}
    assert (tmp_path / "elbow.json").is_file()


class _Forger(NumPyClient):
    """A client whose fit raises with ``message``; it answers everything else as ``inner``."""

    def __init__(self, message: str, inner: NumPyClient | None = None):
        self.message = message
        self.inner = inner

    def get_properties(self, config):
        return self.inner.get_properties(config)

    def evaluate(self, parameters, config):
        return self.inner.evaluate(parameters, config)

    def fit(self, parameters, config):
        raise ValueError(self.message)


def test_a_failing_clients_traceback_in_the_servers_log_carries_no_event(tmp_path):
    """The simulation logs a failing client's traceback, message and all, into the
    ServerApp's log: fed line by line to the run folder, it must yield no event."""
    client = TimedClient(_Forger(f"bad\n{FORGED_ROUND}\n{FORGED_ARTIFACT}"), PhaseClock())
    with pytest.raises(ValueError) as raised:
        client.fit(FitIns(parameters=ndarrays_to_parameters([]), config={}))
    assert "\n" not in str(raised.value) and "FEDIMB_EVENT" in str(raised.value)
    logged = "ERROR :   " + "".join(traceback.format_exception(raised.value))
    recorder = RunRecorder(tmp_path, compose(CFG), echo=lambda line: None)
    for line in logged.splitlines():
        recorder.feed(line)
    recorder.close()
    assert (tmp_path / "events.jsonl").read_text() == "" and not (
        tmp_path / "partition.json"
    ).exists()


def test_a_client_cannot_forge_events_of_an_in_process_run(tmp_path, monkeypatch):
    """The whole path: clients 1 and 2 raise with an event in their message; the run
    folder holds only the server's events and its own partition.json."""
    from fedimb.app.nodes import client_app
    from fedimb.cli.launch.experiment import run_experiment

    forged = {1: FORGED_ARTIFACT, 2: FORGED_ROUND}
    make_client = client_app.make_client

    def forging_client(cfg, context, pid, clock=None):
        client = make_client(cfg, context, pid, clock)
        return _Forger(forged[pid], client) if pid in forged else client

    monkeypatch.setattr(client_app, "make_client", forging_client)
    run_dir = run_experiment(
        compose([*CFG, "num_rounds=2", "checkpoint.enabled=false", f"output.root={tmp_path}"]),
        tmp_path / "run",
        lambda line: None,
    )
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["event"] == "artifact"]
    assert [e["round"] for e in events if e["event"] == "round"] == [0, 1, 2]
    assert "clients" in json.loads((run_dir / "partition.json").read_text())
    assert all(e["test"]["accuracy"] != 0.999 for e in events if e["event"] == "round")
    assert json.loads((run_dir / "summary.json").read_text())["best_accuracy"] != 0.999
    notes = [m for e in events if e["event"] == "round" for m in e.get("messages", [])]
    assert notes and all("FEDIMB_EVENT" in m and "\n" not in m for m in notes)
    assert not [
        line
        for line in (run_dir / "flwr.log").read_text().splitlines()
        if parse_event(line.split("] ", 1)[-1]) and '"accuracy":0.999' in line
    ]


# ------------------------------------------------------------------ one writer
def _holder(run_dir: Path) -> subprocess.Popen:
    """Another process that holds ``run_dir``'s lock until it is killed; returns once it
    holds it."""
    code = (
        "import sys, time; from pathlib import Path; "
        "from fedimb.cli.rundir.access import hold_run_folder; "
        "hold_run_folder(Path(sys.argv[1])); print('held', flush=True); time.sleep(3600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_and_the_lock_dies_with_its_holder(tmp_path):
    holder = _holder(tmp_path)
    try:
        with pytest.raises(
            RunFolderInUse, match=rf"run folder {tmp_path} is in use by process {holder.pid} "
        ):
            hold_run_folder(tmp_path)
    finally:
        holder.kill()  # SIGKILL: no chance to clean up
        holder.wait()
    hold_run_folder(tmp_path)  # no stale lock
    release_run_folder(tmp_path)


def _run_folder(tmp_path: Path, *overrides: str) -> Path:
    from omegaconf import OmegaConf

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    OmegaConf.save(compose([*CFG, *overrides]), run_dir / "config.yaml")
    return run_dir


def test_resume_and_attach_refuse_a_run_folder_in_use_in_one_line(tmp_path):
    run_dir = _run_folder(tmp_path, "runtime=deployment")
    (run_dir / "superlink_run.json").write_text('{"run_id": 5, "address": "127.0.0.1:1"}')
    holder = _holder(run_dir)
    try:
        for command in ("resume", "attach"):
            done = run_fedimb(command, str(run_dir), timeout=300)
            assert done.returncode == 2, done.stderr[-2000:]
            assert done.stderr.strip() == (
                f"fedimb: error: run folder {run_dir} is in use by process {holder.pid} "
                "(a fedimb run, resume or attach writing it); wait for it to end or stop it"
            )
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------ damaged events
def test_resume_skips_and_reports_a_damaged_events_line(tmp_path):
    from fedimb.cli.commands.attach import events_of_last_attempt

    good = [
        start_event(num_parameters=100, num_clients=3, num_rounds=1),
        format_event("round", round=0, stage="train", test={"accuracy": 0.1}),
        format_event("round", round=1, stage="train", seconds=1.0, test={"accuracy": 0.5}),
    ]
    lines = [json.dumps(parse_event(line)) for line in good]
    (tmp_path / "events.jsonl").write_text(
        "\n".join([lines[0], "\x00\x00garbage", *lines[1:], '{"event": "rou'])
    )
    warnings: list[str] = []
    recorder = RunRecorder(tmp_path, compose(CFG), echo=warnings.append, resume=True)
    assert [r["round"] for r in recorder.rounds] == [0, 1]
    assert warnings == [
        f"[fedimb] warning: skipped 2 damaged lines of {tmp_path / 'events.jsonl'} (lines 2, 5)"
    ]
    recorder.feed(format_event("end", rounds=1, seconds=2.0))  # not glued to the line cut short
    recorder.close()
    assert json.loads((tmp_path / "events.jsonl").read_text().splitlines()[-1]) == {
        "event": "end",
        "rounds": 1,
        "seconds": 2.0,
    }
    assert events_of_last_attempt(tmp_path) == 4


# ------------------------------------------------------------------ full disk
def test_a_full_disk_at_the_end_is_one_line_and_the_run_can_still_be_completed(
    tmp_path, monkeypatch
):
    from omegaconf import OmegaConf

    from fedimb.app.server import checkpoint
    from fedimb.cli.launch.experiment import run_experiment
    from fedimb.cli.rundir import folder as run_folder

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    cfg = compose([*CFG, f"checkpoint.dir={tmp_path / 'checkpoints'}", f"output.root={tmp_path}"])
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(run_folder, "plot_curves", no_space)
        with pytest.raises(RunFolderError) as full:
            run_experiment(cfg, run_dir, lambda line: None)
    message = str(full.value)
    assert "\n" not in message and "no space left on device" in message.lower()
    assert message.endswith(f"fedimb resume {run_dir}")
    saved = OmegaConf.load(run_dir / "config.yaml")
    assert checkpoint.checkpoint_path(saved).is_file()  # kept until the run folder is complete

    saved.resume = True
    lines: list[str] = []
    assert run_experiment(saved, run_dir, lines.append) == run_dir
    assert json.loads((run_dir / "summary.json").read_text())["completed"] is True
    assert (run_dir / "curves.png").is_file() and not checkpoint.checkpoint_path(saved).exists()
    assert any("writing the rest of its run folder" in line for line in lines)
