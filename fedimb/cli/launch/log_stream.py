"""One ``flwr run``/``flwr log`` stream's lines, and which lines of a replayed log are new.

Flower replays a run's log from its start to every ``flwr log --stream``: the
:class:`LogCursor` remembers how far the run folder got, so that a re-attached stream
delivers only what is new. Used by :mod:`fedimb.cli.launch.follower`.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fedimb.cli.federation.processes import flower_env, stop_process_tree
from fedimb.core.events import parse_event


@dataclass
class LogCursor:
    """Which lines of a run's log were delivered, so that a re-attached stream, which
    Flower replays from the start, delivers only new ones.

    ``lines_seen`` counts the log lines delivered in this process; ``events_known`` the
    events of this run the run folder held before (``fedimb attach``): a replayed line is
    new when it lies past both.
    """

    deliver: Callable[[str], None]
    lines_seen: int = 0
    events_known: int = 0
    run_id: int | None = None
    last_new: float = field(default_factory=time.monotonic)  # when the last new line arrived
    _index: int = 0
    _events: int = 0

    def reattach(self) -> None:
        self._index = self._events = 0

    def offer(self, line: str) -> bool:
        """One line of the run's log (a stream's stdout); whether it was new."""
        self._index += 1
        is_event = parse_event(line) is not None
        self._events += is_event
        past_events = self._events > self.events_known or (
            not is_event and self._events >= self.events_known
        )
        if self._index <= self.lines_seen or not past_events:
            return False
        self.lines_seen = self._index
        self.last_new = time.monotonic()
        self.deliver(line)
        return True


@dataclass
class LogStream:
    """One ``flwr`` process whose stdout and stderr lines arrive on one queue."""

    args: Sequence[str]
    home: Path
    lines: queue.Queue = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            list(self.args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=flower_env(self.home),
            text=True,
            errors="replace",
            start_new_session=True,
            bufsize=1,
        )
        self._open = 2
        for name, pipe in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._read, args=(name, pipe), daemon=True).start()

    def _read(self, name: str, pipe) -> None:
        for line in pipe:
            self.lines.put((name, line))
        self.lines.put((name, None))

    def next(self, timeout: float) -> tuple[str, str | None] | None:
        """(``out`` or ``err``, line) — a line without its newline when the process
        ended mid-line, None as the line when that pipe ended; None after ``timeout``."""
        try:
            item = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if item[1] is None:
            self._open -= 1
        return item

    @property
    def ended(self) -> bool:
        return self._open == 0

    def stop(self) -> None:
        """Stop the process (by process group, as every process fedimb starts) and close
        its pipes."""
        stop_process_tree(self.proc, grace=10.0)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
