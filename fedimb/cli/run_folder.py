"""The run folder: turns the ServerApp's events into progress output and tidy files.

Files (DESIGN §4.8): ``metrics.csv`` (long format: round, stage, split, metric, value),
``summary.json``, ``curves.png``, next to ``config.yaml`` and ``partition.json``
written before the run, and ``flwr.log`` with everything Flower printed (each line
prefixed by the seconds since the run started) and ``events.jsonl`` with every event
the ServerApp sent (a resumed run continues from it).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig

from fedimb.cli.run_files import plot_curves, traffic_to_target, write_artifact, write_metrics_csv
from fedimb.core.errors import FedimbError
from fedimb.core.metrics import DISTRIBUTION_STATS
from fedimb.core.events import parse_event

Echo = Callable[[str], None]


def _echo(text: str) -> None:
    print(text, flush=True)


def _fmt(value: Any, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def boxed_message(lines: list[str]) -> str | None:
    """The text of the last framed message (``╭─ Error ─╮ │ ... │ ╰─╯``) Flower's CLI printed."""
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("╭")]
    if not starts:
        return None
    text = []
    for line in lines[starts[-1] + 1:]:
        if line.lstrip().startswith("╰"):
            break
        text.append(line.strip().strip("│").strip())
    return " ".join(t for t in text if t) or None


class RunFolderError(FedimbError, OSError):
    """The run folder cannot be written (disk full, read-only, removed)."""


def unwritable(run_dir: Path, err: OSError, files: str) -> RunFolderError:
    """The one-line error for ``err`` while writing ``files`` of the run folder."""
    return RunFolderError(f"cannot write the run folder {run_dir}: {err.strerror or err} ({err.filename or files})")


def _writes_run_folder(files: str):
    """A method that writes ``files`` of the run folder, with an ``OSError`` turned into
    a one-line :class:`RunFolderError`."""

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

    def __init__(self, run_dir: Path, cfg: DictConfig, echo: Echo = _echo, resume: bool = False,
                 on_round: Callable[[dict[str, Any]], None] | None = None):
        self.run_dir = run_dir
        self.on_round = on_round  # each round this recorder accepts (experiment tracking)
        self.cfg = cfg
        self.echo = echo
        self.start: dict[str, Any] = {}
        self.rounds: list[dict[str, Any]] = []
        self.end: dict[str, Any] | None = None
        self.errors: list[str] = []
        self._recent: list[str] = []
        events = run_dir / "events.jsonl"
        if resume and events.exists():  # the interrupted attempt's rounds, until the server says where it resumes
            for line in events.read_text().splitlines():
                self._replay(json.loads(line))
        mode = "a" if resume else "w"
        log = run_dir / "flwr.log"
        self._log_lines = len(log.read_text(errors="replace").splitlines()) if resume and log.exists() else 0
        self._log = open(run_dir / "flwr.log", mode, encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._events = open(events, mode, encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._t0 = time.perf_counter()

    def _replay(self, event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            self.start = {k: v for k, v in event.items() if k != "event"}
        elif event.get("event") == "round":
            self.rounds.append({k: v for k, v in event.items() if k != "event"})

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
            self.echo(
                f"[fedimb] {event.get('method')} on {self.cfg.dataset.name}: {event.get('num_clients')} clients, "
                f"{event.get('num_rounds')} rounds, {event.get('num_parameters'):,} parameters"
            )
        elif kind == "round":  # a round replaces any earlier record of it (a restarted attempt)
            if any(_result_of(r) == _result_of(event) for r in self.rounds):
                return  # a resumed server repeats its checkpointed round (its timings may differ): known here
            self.rounds = [r for r in self.rounds if r["round"] < event["round"]] + [event]
            self.echo(self.progress_line(event))
            if self.on_round is not None:
                self.on_round(event)
            for message in event.get("messages", []):  # failures and rejections, naming the client
                self.echo(f"    ! {message}")
        elif kind == "end":
            self.end = event
        elif kind == "error":  # its type and message, where it was raised, its line in flwr.log
            where = f" at {event['where']}" if event.get("where") else ""
            self.errors.append(f"{event.get('message')}{where}, flwr.log line {self._log_lines}")
        elif kind == "artifact":
            write_artifact(self.run_dir, str(event.get("name")), event.get("data"))
        elif kind == "resume":
            self.rounds = [r for r in self.rounds if r["round"] <= int(event["round"])]
            self.echo(f"[fedimb] resuming after round {event['round']}")
        elif kind == "warning":
            self.echo(f"[fedimb] warning: {event.get('message')}")

    def progress_line(self, r: dict[str, Any]) -> str:
        test = r.get("test") or {}
        total = int(self.start.get("num_rounds") or self.cfg.num_rounds)
        head = f"round {r['round']:>{len(str(total))}}/{total}"
        if r.get("stage") and r["stage"] != "train":
            head += f" [{r['stage']}]"
        if (r.get("extra") or {}).get("sync_round") is not None:
            head += f" [sync round {r['extra']['sync_round']}]"
        parts = [head]
        if test:
            parts.append(f"acc {_fmt(test.get('accuracy'))}  f1 {_fmt(test.get('macro_f1'))}  loss {_fmt(test.get('loss'))}")
        clients = r.get("clients")
        if clients and r["round"] > 0:
            failed = clients["failures"]
            detail = f"{clients['succeeded']} ok, {failed} failed"
            if failed:
                detail += f" ({clients['dropped']} dropped, {clients['errors']} errors, {clients['rejected']} rejected)"
            parts.append(detail)
        parts.append(f"{r.get('seconds', 0.0):.1f}s")
        return " | ".join(parts)

    def failure_reason(self) -> str | None:
        """Why the run did not complete, or None if it did."""
        if self.end is not None:
            return None
        if self.errors:
            return self.errors[-1]
        boxed = boxed_message(self._recent)
        if boxed:
            return boxed
        for line in reversed(self._recent):
            if "Error" in line or "error" in line or "Exception" in line:
                return line.strip()[-300:]
        return "the run ended without its final event"

    def close(self) -> None:
        for handle in (self._log, self._events):
            if not handle.closed:
                handle.close()

    # ------------------------------------------------------------------- files
    @_writes_run_folder("metrics.csv, summary.json, curves.png")
    def finish(self) -> dict[str, Any]:
        """Write metrics.csv, summary.json and curves.png; return the summary."""
        self.close()
        write_metrics_csv(self.run_dir / "metrics.csv", self.rounds)
        summary = self.summary()
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if self.rounds:
            plot_curves(self.run_dir / "curves.png", self.rounds, title=f"{summary['method']} on {summary['dataset']}")
        return summary

    def summary(self) -> dict[str, Any]:
        cfg = self.cfg
        tested = [r for r in self.rounds if (r.get("test") or {}).get("accuracy") is not None]
        trained = [r for r in self.rounds if r["round"] > 0]
        best = max(tested, key=lambda r: r["test"]["accuracy"], default=None)
        final = tested[-1] if tested else None
        seconds = [r.get("seconds", 0.0) for r in trained]
        target = cfg.evaluation.get("target_accuracy")
        to_target = traffic_to_target(self.rounds, target) if target is not None else None
        return {
            "method": str(cfg.method.name),
            "dataset": str(cfg.dataset.name),
            "model": str(cfg.model.name),
            "partition": str(cfg.partition.name),
            "dropout": str(cfg.dropout.name),
            "runtime": str(cfg.runtime.name),
            "num_clients": int(cfg.num_clients),
            "seed": int(cfg.seed),
            # rounds and rounds_planned count Flower rounds; num_rounds is the configuration's
            # value in the method's own unit (Astraea: synchronization rounds)
            "rounds": len(trained),
            "rounds_planned": int(self.start.get("num_rounds") or cfg.num_rounds),
            "num_rounds": int(cfg.num_rounds),
            "num_rounds_unit": str(self.start.get("round_unit", "Flower round")),
            "completed": self.end is not None,
            "final_accuracy": final["test"]["accuracy"] if final else None,
            "final_macro_f1": final["test"].get("macro_f1") if final else None,
            "final_loss": final["test"].get("loss") if final else None,
            "best_accuracy": best["test"]["accuracy"] if best else None,
            "best_round": best["round"] if best else None,
            "num_parameters": self.start.get("num_parameters"),
            "bytes_up": sum((r.get("bytes") or {}).get("up", 0) for r in trained),
            "bytes_down": sum((r.get("bytes") or {}).get("down", 0) for r in trained),
            "target_accuracy": target,
            "round_to_target": to_target[0] if to_target else None,
            "bytes_to_target": to_target[1] if to_target else None,
            "wall_seconds": round(time.perf_counter() - self._t0, 3),
            "server_seconds": round(self.end["seconds"], 3) if self.end else None,
            "first_round_seconds": round(seconds[0], 3) if seconds else None,
            "mean_round_seconds_after_first": round(sum(seconds[1:]) / len(seconds[1:]), 3) if len(seconds) > 1 else None,
            **self.local_summary(),
            "run_dir": str(self.run_dir),
        }

    def local_summary(self) -> dict[str, Any]:
        """The last local evaluation's accuracy distribution over clients, per model
        (``local_accuracy_average``, ``..._worst_10``, ``..._best_10``, ``..._variance`` in
        %²; ``personal_`` after ``local_`` for personal models); nothing without one."""
        last = next((r["local"] for r in reversed(self.rounds) if r.get("local")), {})
        return {
            f"local_{'' if model == 'global' else model + '_'}accuracy_{stat}": stats.get(stat)
            for model, stats in last.items() for stat in DISTRIBUTION_STATS
        }
