"""The run folder: turns the ServerApp's events into progress output and tidy files.

Files: ``metrics.csv`` (long format: round, stage, split, metric, value),
``summary.json``, ``curves.png``, next to ``config.yaml`` and ``partition.json``
written before the run, and ``flwr.log`` with everything Flower printed (each line
prefixed by the seconds since the run started) and ``events.jsonl`` with every event
the ServerApp sent (a resumed run continues from it). ``.fedimb.lock`` names the one
process that writes the folder (:mod:`fedimb.cli.rundir.access`). The lines printed
are :mod:`fedimb.cli.rundir.progress`'s, the summary :mod:`fedimb.cli.rundir.summary`'s.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fedimb.cli.rundir.access import unwritable
from fedimb.cli.rundir.events import EVENTS_FILE, read_events
from fedimb.cli.rundir.files import plot_curves, write_artifact, write_metrics_csv
from fedimb.cli.rundir.progress import Echo, _echo, done_text, launch_line, round_line, run_header
from fedimb.cli.rundir.summary import run_summary, trained_nothing, write_summary_json
from fedimb.core.events import lost_clients_cause, parse_event


def boxed_message(lines: list[str]) -> str | None:
    """The text of the last framed message (``╭─ Error ─╮ │ ... │ ╰─╯``) Flower's CLI printed."""
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("╭")]
    if not starts:
        return None
    text = []
    for line in lines[starts[-1] + 1 :]:
        if line.lstrip().startswith("╰"):
            break
        text.append(line.strip().strip("│").strip())
    return " ".join(t for t in text if t) or None


def _writes_run_folder(files: str):
    """A method that writes ``files`` of the run folder, with an ``OSError`` turned into
    a one-line :class:`~fedimb.cli.rundir.access.RunFolderError`."""

    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except OSError as err:
                raise unwritable(self.run_dir, err, files) from err

        return guarded

    return wrap


def _result_of(round_event: dict) -> dict:
    """A round's record without its timings, which say how long, not what."""
    return {k: v for k, v in round_event.items() if k not in ("timing", "timing_by_client")}


class RunRecorder:
    """Consumes ``flwr run --stream`` lines for one run."""

    def __init__(
        self,
        run_dir: Path,
        cfg: DictConfig,
        echo: Echo = _echo,
        resume: bool = False,
        on_round: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self._clock = clock  # elapsed time and ETA on the progress lines
        self._launched = clock()
        self.run_dir = run_dir
        self.on_round = on_round  # each round this recorder accepts (experiment tracking)
        self.cfg = cfg
        self.echo = echo
        self.start: dict[str, Any] = {}
        self.rounds: list[dict[str, Any]] = []
        self.end: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.lost: dict[
            str, Any
        ] = {}  # the clients the run went on without (a ``clients_lost`` warning)
        self.flower_status: Any = (
            None  # the SuperLink's status of a run that ended without its final event
        )
        self._recent: list[str] = []
        events = run_dir / EVENTS_FILE
        if (
            resume and events.exists()
        ):  # the interrupted attempt's rounds, until the server says where it resumes
            for event in read_events(events, echo):
                self._replay(event)
        mode = "a" if resume else "w"
        log = run_dir / "flwr.log"
        self._log_lines = (
            len(log.read_text(errors="replace").splitlines()) if resume and log.exists() else 0
        )
        self._log = open(run_dir / "flwr.log", mode, encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._events = open(events, mode, encoding="utf-8")  # noqa: SIM115 - closed in close()
        if resume and events.stat().st_size and not events.read_bytes().endswith(b"\n"):
            self._events.write(
                "\n"
            )  # a line cut short stays one damaged line, not the start of the next
        self._t0 = time.perf_counter()

    def _replay(self, event: dict[str, Any]) -> None:
        if event.get("event") == "start":  # a new attempt: not ended (yet)
            self.start = {k: v for k, v in event.items() if k != "event"}
            self.end = None
        elif event.get("event") == "round":
            self.rounds.append({k: v for k, v in event.items() if k != "event"})
        elif event.get("event") == "end":  # an attached front end finds the run ended
            self.end = {k: v for k, v in event.items() if k != "event"}

    def announce(self) -> None:
        """Say what the front end starts, before a wait for the run's first event (a
        simulation's Ray takes most of a minute on a small machine)."""
        line = launch_line(self.cfg)
        if line is not None:
            self.echo(line)

    # ---------------------------------------------------------------- streaming
    @_writes_run_folder("flwr.log, events.jsonl")
    def feed(self, line: str) -> None:
        self._log.write(f"[{time.perf_counter() - self._t0:7.1f}s] {line}\n")
        self._log_lines += 1
        event = parse_event(line)
        if event is None:
            if line.strip():
                self._recent = (self._recent + [line])[-40:]
            return
        self._events.write(json.dumps(event) + "\n")
        self._events.flush()
        kind = event.pop("event")
        if kind == "start":
            self.start = event
            self.echo(run_header(self.cfg, event))
        elif kind == "round":  # a round replaces any earlier record of it (a restarted attempt)
            if any(_result_of(r) == _result_of(event) for r in self.rounds):
                # a resumed server repeats its checkpointed round (its timings may differ)
                return
            self.rounds = [r for r in self.rounds if r["round"] < event["round"]] + [event]
            self.echo(self.progress_line(event))
            if self.on_round is not None:
                self.on_round(event)
            for message in event.get("messages", []):  # failures and rejections, naming the client
                self.echo(f"    ! {message}")
        elif kind == "end":
            self.end = event
            if event.get("stopped"):  # ended before num_rounds on purpose (a privacy budget)
                self.echo(f"[fedimb] {event['stopped']}")
        elif kind == "error":  # its type and message, where it was raised, its line in flwr.log
            where = f" at {event['where']}" if event.get("where") else ""
            self.errors.append(f"{event.get('message')}{where}, flwr.log line {self._log_lines}")
        elif kind == "artifact":
            write_artifact(self.run_dir, str(event.get("name")), event.get("data"))
        elif kind == "resume":
            self.rounds = [r for r in self.rounds if r["round"] <= int(event["round"])]
            self.echo(f"[fedimb] resuming after round {event['round']}")
        elif kind == "warning":
            if "clients_lost" in event:
                self.lost = event
            self.echo(f"[fedimb] warning: {event.get('message')}")

    def progress_line(self, r: dict[str, Any]) -> str:
        """Round ``r``'s progress line, with the time since launch and the ETA."""
        total = int(self.start.get("num_rounds") or self.cfg.num_rounds)
        trained = [x.get("seconds", 0.0) for x in self.rounds if x["round"] > 0]
        return round_line(r, total, self._clock() - self._launched, trained)

    def done_line(self) -> str:
        """The completed run's last line before its folder: how long, final and best test
        accuracy."""
        return done_text(self.rounds, self._clock() - self._launched)

    def trained_nothing(self) -> bool:
        """Whether no client's update was accepted in any round (see :func:`trained_nothing`)."""
        return trained_nothing(self.rounds)

    def untrained_cause(self) -> str:
        """Why no client trained: the clients lost at the start, else the last round's
        first failure, else its counts (every sampled client dropped out, or none sampled)."""
        if self.lost:
            return lost_clients_cause(
                int(self.lost.get("num_clients", self.cfg.num_clients)),
                self.lost.get("clients_lost_reasons") or {},
            )
        last = [r for r in self.rounds if r["round"] > 0][-1]
        if last.get("messages"):
            return str(last["messages"][0])
        clients = last.get("clients") or {}
        return f"{clients.get('sampled', 0)} sampled, {clients.get('dropped', 0)} dropped out"

    def failure_reason(self) -> str | None:
        """Why the run did not complete, or None if it did."""
        if self.end is not None:
            return (
                f"no client trained in any round: {self.untrained_cause()}"
                if self.trained_nothing()
                else None
            )
        flower = f"; Flower: run {self.flower_status}" if self.flower_status is not None else ""
        if self.errors:
            return self.errors[-1] + flower
        boxed = boxed_message(self._recent)
        if boxed:
            return boxed + flower
        for line in reversed(self._recent):
            if "Error" in line or "error" in line or "Exception" in line:
                return line.strip()[-300:] + flower
        return f"the run ended without its final event{flower}"

    def close(self) -> None:
        for handle in (self._log, self._events):
            if not handle.closed:
                handle.close()

    # ------------------------------------------------------------------- files
    @_writes_run_folder("metrics.csv, summary.json, curves.png")
    def finish(self) -> dict[str, Any]:
        """Write metrics.csv, curves.png and summary.json; return the summary. summary.json
        comes last and whole (written aside, then renamed): it marks a complete folder."""
        self.close()
        write_metrics_csv(self.run_dir / "metrics.csv", self.rounds)
        summary = self.summary()
        if self.rounds:
            plot_curves(
                self.run_dir / "curves.png",
                self.rounds,
                title=f"{summary['method']} on {summary['dataset']}",
            )
        write_summary_json(self.run_dir, summary)
        return summary

    def summary(self) -> dict[str, Any]:
        """What summary.json says about the run so far (see :func:`run_summary`)."""
        return run_summary(
            self.cfg,
            self.start,
            self.rounds,
            self.end,
            self.lost,
            time.perf_counter() - self._t0,
            self.run_dir,
        )
