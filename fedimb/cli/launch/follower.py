"""Follow a run on a SuperLink to its end, through as many log streams as it takes.

``flwr run --stream`` ends when its connection does: a slow round, a loaded or distant
SuperLink, a dropped connection or a killed ``flwr`` process end the stream while the
ServerApp goes on. The follower then asks the SuperLink for the run's status
(``flwr list --run-id``) and, while the run is not finished, re-attaches to its log
(``flwr log <run-id> --stream``). Flower replays a run's log from its start, so the
follower skips the lines it has delivered already: every event reaches the run folder
once. It gives up only after ``patience`` seconds without a new line in which the
SuperLink did not answer or every stream ended at once; a run that finished without its
final event is reported with Flower's status and sub-status (``finished:failed``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fedimb.cli.federation.flwr_cli import FlwrCli, RunStatus
from fedimb.cli.federation.processes import FederationError
from fedimb.cli.launch.log_stream import LogCursor, LogStream

Notice = Callable[[str], None]

#: the line of ``flwr run`` (on its stdout) after which its stdout is the run's log
_STARTED = re.compile(r"Successfully started run (\d+)")

#: the line both ``flwr run`` and ``flwr log`` print first on stdout, before the run's log
_CONNECTION = re.compile(r"^Using SuperLink: ")

#: seconds a silent stream waits between status checks, and a stream-less follower between tries
STATUS_EVERY = 30.0


class RunLost(FederationError):
    """The follower lost the run: no new line for ``patience`` seconds and no stream or
    answer from the SuperLink."""


@dataclass
class RunFollower:
    """Delivers every line of one run's log once, from ``flwr run`` (:meth:`start`) or
    from a run started before (:meth:`attach`), until ``complete()`` says the run's
    final event arrived or the SuperLink says the run finished.

    ``on_line`` gets every line (the CLI's own messages too, for the run folder's log);
    ``notice`` the follower's progress lines (waiting, re-attaching and why).
    """

    cli: FlwrCli
    on_line: Callable[[str], None]
    complete: Callable[[], bool]
    notice: Notice
    on_started: Callable[[int], None] | None = None  # gets the run's id as soon as Flower names it
    link_gone: Callable[[], str | None] = lambda: (
        None
    )  # why a SuperLink of the front end's own is gone, if it is
    patience: float = 600.0  # seconds without a new line and without the run's stream
    status_every: float = STATUS_EVERY
    cursor: LogCursor = field(init=False)
    final_status: RunStatus | None = None  # the run's status where it ended without its final event
    _stream: LogStream | None = None
    _said: dict[str, float] = field(default_factory=dict)  # when each kind of notice was last given

    def __post_init__(self) -> None:
        self.cursor = LogCursor(self.on_line)

    @property
    def run_id(self) -> int | None:
        return self.cursor.run_id

    # ---------------------------------------------------------------- entry points
    def start(self, run_args: Sequence[str]) -> int:
        """Start the run with ``flwr run ... --stream`` and follow it; flwr's exit code
        (0 where a re-attached stream delivered the rest)."""
        try:
            code = self._pump(run_args, started=False)
            if self.complete() or self.run_id is None:  # done, or never started: flwr printed why
                return code
            return self._follow(code)
        finally:
            self.close()

    def attach(self, run_id: int, events_known: int = 0) -> int:
        """Follow the run ``run_id`` that an earlier front end started, skipping the
        first ``events_known`` events of its log (those its run folder holds)."""
        self.cursor.run_id = run_id
        self.cursor.events_known = events_known
        try:
            return self._follow(None)
        finally:
            self.close()

    def stop_run(self) -> str:
        """Stop the followed run on the SuperLink (``flwr stop``) unless it finished or
        never started; the line that says what became of it."""
        self.close()
        if self.run_id is None or self.complete():
            return ""
        status = self.cli.status(self.run_id)
        if status is not None and status.finished:
            return f"run {self.run_id} is {status.status}"
        if self.cli.stop(self.run_id):
            return f"stopped run {self.run_id} (flwr stop)"
        return (
            f"could not stop run {self.run_id}: the SuperLink does not answer; "
            f"stop it with flwr stop {self.run_id}"
        )

    # ---------------------------------------------------------------- internals
    def _follow(self, code: int | None) -> int:
        """Re-attach while the run is not finished; after it finished, one last stream
        delivers what the broken one missed."""
        assert self.run_id is not None
        self.cursor.last_new = time.monotonic()  # patience counts from the stream's end
        seen_finished = False
        while not self.complete():
            status = self.cli.status(self.run_id)
            gone = self.link_gone() if status is None else None
            if gone:
                raise RunLost(f"lost run {self.run_id}: {gone}")
            if status is None:
                self._give_up_after("the SuperLink does not answer about it")
                time.sleep(min(self.status_every, 5.0))
                continue
            if seen_finished:  # the stream after the finish delivered the whole log
                self.final_status = status
                break
            seen_finished = status.finished
            if seen_finished:
                self._say("finished", f"run {self.run_id} is {status}; reading the rest of its log")
            else:
                self._say(
                    "reattach",
                    f"the log stream of run {self.run_id} ended while the run is {status.status}; "
                    f"re-attaching (flwr log {self.run_id} --stream)",
                )
            before = self.cursor.lines_seen
            code = self._pump(self.cli.log_args(self.run_id), started=True)
            if self.cursor.lines_seen == before and not self.complete() and not seen_finished:
                self._give_up_after("its streams end without a new line")
                time.sleep(min(self.status_every, 5.0))
        return 0 if self.complete() else (code or 0)

    def _give_up_after(self, why: str) -> None:
        waited = time.monotonic() - self.cursor.last_new
        if waited > self.patience:
            raise RunLost(
                f"lost run {self.run_id}: no new log line for {waited:.0f}s and {why} "
                f"(runtime.reattach_seconds={self.patience:g})"
            )
        self._say(
            why,
            f"waiting for run {self.run_id}: {why} "
            f"({waited:.0f}s of {self.patience:g}s without a new line)",
        )

    def _say(self, kind: str, text: str) -> None:
        """A progress line; one of each kind at most every ``status_every`` seconds."""
        now = time.monotonic()
        if now - self._said.get(kind, -self.status_every) < self.status_every:
            return
        self._said[kind] = now
        self.notice(f"[fedimb] {text}")

    def _pump(self, args: Sequence[str], *, started: bool) -> int:
        """Run one ``flwr`` stream to its end, delivering its lines; its exit code. A
        stream silent for ``status_every`` seconds is checked: one whose run finished a
        check ago, or whose SuperLink has not answered for ``patience``, is ended."""
        self._stream = stream = LogStream(args, self.cli.home)
        self.cursor.reattach()
        in_log = False
        partial: str | None = None
        opened = quiet_since = unanswered_since = time.monotonic()
        finished_seen = heard = False
        while not stream.ended:
            item = stream.next(timeout=min(1.0, self.status_every))
            now = time.monotonic()
            if item is None:
                if now - quiet_since < self.status_every or self.run_id is None:
                    continue
                quiet_since = now
                status = self.cli.status(self.run_id)
                if status is not None:
                    unanswered_since = now
                # a stream that has said nothing yet may still be starting (a busy machine):
                # the finished run ends it only after it spoke, or after the patience
                spoke = heard or now - opened > self.patience
                if (
                    (status is not None and status.finished and finished_seen and spoke)
                    or now - unanswered_since > self.patience
                    or (status is None and self.link_gone())
                ):
                    break
                finished_seen = status is not None and status.finished
                continue
            source, line = item
            heard = True
            if line is None:
                continue
            quiet_since = now
            text = line.rstrip("\n")
            if source == "out" and not in_log and started and not _CONNECTION.match(text):
                in_log = True  # ``flwr log``: its log begins after the connection line
            if source == "err" or not in_log:
                self.on_line(text)
                match = _STARTED.search(text) if source == "out" else None
                if match:
                    self.cursor.run_id = int(match.group(1))
                    in_log = True
                    if self.on_started is not None:
                        self.on_started(self.cursor.run_id)
                continue
            if not line.endswith("\n"):  # cut mid-line: kept only if the stream ends well
                partial = text
                continue
            self.cursor.offer(text)
        stream.stop()
        code = stream.proc.wait()
        if partial is not None and code == 0:
            self.cursor.offer(partial)
        self._stream = None
        return code

    def close(self) -> None:
        if self._stream is not None:
            self._stream.stop()
            self._stream = None


def flwr_run(
    app_dir: Path,
    connection: str,
    home: Path,
    *,
    run_config: Mapping[str, object],
    federation_config: Mapping[str, object] | None = None,
    on_line: Callable[[str], None],
) -> int:
    """``flwr run <app> <connection> --stream`` with every output line to ``on_line``,
    for an app without fedimb's events (benchmarks of Flower itself): its exit code."""
    cli = FlwrCli(connection, home)
    follower = RunFollower(cli, on_line, complete=lambda: True, notice=on_line)
    return follower.start(cli.run_args(app_dir, run_config, federation_config))
