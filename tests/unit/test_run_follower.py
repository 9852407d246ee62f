"""The follower of a run on a SuperLink, against stand-ins for the ``flwr`` commands:
every log line is delivered once across cut and re-attached streams, a run that finished
without its final event is reported with Flower's status, a lost SuperLink ends the
wait after the patience."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fedimb.cli.federation.flwr_cli import FlwrCli, RunStatus
from fedimb.cli.launch.follower import RunFollower, RunLost
from fedimb.cli.launch.log_stream import LogCursor
from fedimb.core.events import format_event

LOG = [
    "INFO: starting ServerApp",
    format_event("start", num_rounds=2),
    "INFO: round 1",
    format_event("round", round=1),
    "INFO: round 2",
    format_event("round", round=2),
    format_event("end", rounds=2),
    "INFO: done",
]


def printer(
    lines: list[str], *, code: int = 0, partial: str | None = None, hang: bool = False
) -> list[str]:
    """A command that prints ``lines`` (and ``partial`` without its newline), then exits
    with ``code`` or, with ``hang``, stays silent until stopped."""
    script = (
        f"import sys, time\nfor line in {json.dumps(lines)}: print(line, flush=True)\n"
        f"sys.stdout.write({json.dumps(partial or '')}); sys.stdout.flush()\n"
        f"print('flwr says goodbye', file=sys.stderr, flush=True)\n"
        f"{'time.sleep(3600)' if hang else ''}\nsys.exit({code})\n"
    )
    return [sys.executable, "-c", script]


class FakeCli(FlwrCli):
    """``flwr log`` streams from ``streams`` one after the other; ``flwr list`` answers from
    ``statuses`` (its last answer repeats); ``flwr stop`` is recorded."""

    def __init__(self, streams: list[list[str]], statuses: list[RunStatus | None]):
        super().__init__("fake", Path("."))
        self.streams, self.statuses, self.stopped = list(streams), list(statuses), []
        self.attaches = 0

    def log_args(self, run_id: int) -> list[str]:
        self.attaches += 1
        return self.streams.pop(0)

    def status(self, run_id: int) -> RunStatus | None:
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def stop(self, run_id: int) -> bool:
        self.stopped.append(run_id)
        return True


class Recorder:
    def __init__(self):
        self.lines: list[str] = []
        self.notices: list[str] = []

    def complete(self) -> bool:
        return any('"event":"end"' in line for line in self.lines)

    def follower(self, cli: FlwrCli, patience: float = 30.0) -> RunFollower:
        return RunFollower(
            cli,
            self.lines.append,
            self.complete,
            self.notices.append,
            patience=patience,
            status_every=0.05,
        )

    def log_lines(self) -> list[str]:
        return [line for line in self.lines if line in LOG]


RUNNING, COMPLETED = RunStatus("running"), RunStatus("finished:completed")


def test_a_replayed_log_is_delivered_from_where_it_was_cut():
    delivered: list[str] = []
    cursor = LogCursor(delivered.append)
    for line in LOG[:3]:
        cursor.offer(line)
    cursor.reattach()
    fresh = [cursor.offer(line) for line in LOG]
    assert fresh == [False] * 3 + [True] * 5 and delivered == LOG


def test_an_attached_front_end_skips_the_events_its_run_folder_holds():
    delivered: list[str] = []
    cursor = LogCursor(delivered.append, events_known=2)  # start and round 1 are in events.jsonl
    for line in LOG:
        cursor.offer(line)
    assert delivered == LOG[4:]


CONNECTION = (
    "Using SuperLink: fedimb (127.0.0.1:9093)"  # flwr run's and flwr log's first stdout line
)


def test_a_cut_stream_is_followed_by_a_reattached_one_without_repeats():
    started = [CONNECTION, "Successfully started run 7", *LOG[:4]]
    cli = FakeCli([printer([CONNECTION, *LOG])], [RUNNING])
    recorder = Recorder()
    follower = recorder.follower(cli)
    assert follower.start(printer(started, code=1, partial=LOG[4][:5])) == 0
    assert follower.run_id == 7 and recorder.log_lines() == LOG and cli.attaches == 1
    assert any("re-attaching (flwr log 7 --stream)" in n for n in recorder.notices)


def test_a_run_that_finished_without_its_final_event_reports_flowers_status():
    failed = RunStatus("finished:failed", "ServerApp exited with code 1")
    cli = FakeCli([printer(LOG[:4])], [failed])
    recorder = Recorder()
    follower = recorder.follower(cli)
    follower.start(printer(["Successfully started run 3", *LOG[:2]], code=1))
    assert recorder.log_lines() == LOG[:4] and not recorder.complete()
    assert (
        follower.final_status == failed
        and str(failed) == "finished:failed (ServerApp exited with code 1)"
    )


def test_a_silent_stream_of_a_finished_run_is_ended_and_read_again():
    cli = FakeCli([printer(LOG)], [RUNNING, COMPLETED])
    recorder = Recorder()
    follower = recorder.follower(cli)
    assert follower.start(printer(["Successfully started run 5", *LOG[:3]], hang=True)) == 0
    assert recorder.log_lines() == LOG


def test_a_superlink_that_does_not_answer_ends_the_wait_after_the_patience():
    cli = FakeCli([], [None])
    recorder = Recorder()
    with pytest.raises(RunLost, match=r"lost run 9: .*runtime.reattach_seconds=0.2"):
        recorder.follower(cli, patience=0.2).start(
            printer(["Successfully started run 9", *LOG[:2]], code=1)
        )
    assert any("waiting for run 9: the SuperLink does not answer" in n for n in recorder.notices)


def test_a_superlink_of_the_front_ends_own_that_exited_is_not_waited_for():
    follower = Recorder().follower(FakeCli([], [None]), patience=3600)
    follower.link_gone = lambda: "the simulation's SuperLink exited"
    with pytest.raises(RunLost, match=r"^lost run 9: the simulation's SuperLink exited$"):
        follower.start(printer(["Successfully started run 9", *LOG[:2]], code=1))


def test_a_run_that_never_started_returns_flwrs_code_and_words():
    cli = FakeCli([], [RUNNING])
    recorder = Recorder()
    assert recorder.follower(cli).start(printer([], code=1)) == 1
    assert recorder.lines == ["flwr says goodbye"] and cli.attaches == 0


def test_stopping_a_running_run_asks_the_superlink():
    outcomes = {}
    for name, status, answers in (
        ("running", RUNNING, True),
        ("finished", COMPLETED, True),
        ("silent", RUNNING, False),
    ):
        cli = FakeCli([], [status])
        cli.stop = lambda run_id, cli=cli, answers=answers: cli.stopped.append(run_id) or answers
        follower = Recorder().follower(cli)
        follower.cursor.run_id = 4
        outcomes[name] = (follower.stop_run(), cli.stopped)
    assert outcomes == {
        "running": ("stopped run 4 (flwr stop)", [4]),
        "finished": ("run 4 is finished:completed", []),
        "silent": (
            "could not stop run 4: the SuperLink does not answer; stop it with flwr stop 4",
            [4],
        ),
    }


def run_folder(tmp_path: Path, *overrides: str) -> Path:
    from omegaconf import OmegaConf

    from fedimb.app.configuration.compose import compose

    OmegaConf.save(compose(["dataset=digits", *overrides]), tmp_path / "config.yaml")
    return tmp_path


@pytest.mark.parametrize(
    "case,expected",
    [
        (
            "simulated",
            r"ran with runtime=simulation: only a deployed run goes on without its front end",
        ),
        ("never started", r"names no Flower run \(superlink_run.json is missing or unreadable\)"),
        ("complete", r"is complete already \(summary.json\): nothing to attach to"),
    ],
)
def test_attach_refuses_a_run_folder_it_cannot_follow_in_one_line(tmp_path, case, expected):
    from fedimb.cli.commands.attach import attach_experiment
    from fedimb.core.errors import ConfigError

    run_dir = run_folder(tmp_path, *([] if case == "simulated" else ["runtime=deployment"]))
    if case == "complete":
        (run_dir / "superlink_run.json").write_text('{"run_id": 5, "address": "127.0.0.1:1"}')
        (run_dir / "summary.json").write_text('{"completed": true}')
    with pytest.raises(ConfigError, match=expected):
        attach_experiment(run_dir, [])


def test_the_events_an_attached_stream_repeats_are_those_of_the_last_attempt(tmp_path):
    from fedimb.cli.commands.attach import events_of_last_attempt

    events = ["start", "round", "round", "error", "start", "resume", "round"]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps({"event": e}) + "\n" for e in events))
    assert events_of_last_attempt(tmp_path) == 3
    assert events_of_last_attempt(tmp_path / "missing") == 0
