"""The run folder: turns the ServerApp's events into progress output and tidy files.

Files (DESIGN §4.8): ``metrics.csv`` (long format: round, stage, split, metric, value),
``summary.json``, ``curves.png``, next to ``config.yaml`` and ``partition.json``
written before the run, and ``flwr.log`` with everything Flower printed (each line
prefixed by the seconds since the run started) and ``events.jsonl`` with every event
the ServerApp sent (a resumed run continues from it). ``.fedimb.lock`` names the one
process that writes the folder (:func:`hold_run_folder`).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fedimb.cli.run_files import (
    CLIENT_OUTCOMES,
    plot_curves,
    traffic_to_target,
    write_artifact,
    write_metrics_csv,
)
from fedimb.core.errors import FedimbError
from fedimb.core.events import lost_clients_cause, parse_event
from fedimb.core.metrics import DISTRIBUTION_STATS

Echo = Callable[[str], None]


def _echo(text: str) -> None:
    """One line to stdout in one write, so that the lines of sweep jobs running side by
    side (``hydra/launcher=joblib``) never break into each other; such lines start with
    their job's number."""
    sys.stdout.write(f"{side_by_side_job_tag()}{text}\n")
    sys.stdout.flush()


def side_by_side_job_tag() -> str:
    """``[job 3] `` in a sweep job that runs beside others (any launcher but Hydra's
    basic one, which runs one job at a time); empty otherwise."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return ""
    hydra_cfg = HydraConfig.get()
    launcher = str(hydra_cfg.launcher.get("_target_", ""))
    if hydra_cfg.mode != RunMode.MULTIRUN or launcher.endswith(".BasicLauncher"):
        return ""
    return f"[job {hydra_cfg.job.num}] "


def _fmt(value: Any, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def format_duration(seconds: float) -> str:
    """``48s``, ``1m02s``, ``2h05m``: a span as a person reads it."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def eta_seconds(round_seconds: list[float], remaining: int) -> float | None:
    """The time the ``remaining`` rounds should take: the mean of the rounds so far, the
    first left out where there are more (it includes the clients' start-up: Ray actors,
    imports, data); None before any round."""
    if remaining <= 0:
        return 0.0
    if not round_seconds:
        return None
    steady = round_seconds[1:] or round_seconds
    return sum(steady) / len(steady) * remaining


def clients_outcome(clients: dict[str, int]) -> str:
    """``9 ok, 11 dropped, 1 failed`` (:data:`CLIENT_OUTCOMES`; none dropped or failed: not named)."""
    counts = {label: count(clients) for label, count in CLIENT_OUTCOMES.items()}
    return ", ".join(f"{n} {label}" for label, n in counts.items() if n or label == "ok")


def _device_label(cfg: DictConfig) -> str:
    """Where the clients compute: ``device=auto`` resolved as the simulation and in-process
    clients on this machine resolve it (a simulation's Ray actor sees a GPU only with
    ``runtime.num_gpus_per_client`` > 0); a deployment's nodes each decide for themselves."""
    device = str(cfg.device)
    if device != "auto":
        return device
    if cfg.runtime.name == "deployment":
        return "device auto on each node"
    import torch

    gpus = float(cfg.runtime.get("num_gpus_per_client", 0.0) or 0.0)
    in_reach = cfg.runtime.name == "in_process" or gpus > 0
    return "cuda" if in_reach and torch.cuda.is_available() else "cpu"


def _partition_label(cfg: DictConfig) -> str:
    alpha = cfg.partition.get("alpha")
    return f"{cfg.partition.name} alpha={alpha:g}" if alpha is not None else str(cfg.partition.name)


def _dropout_label(cfg: DictConfig) -> str:
    dropout = cfg.dropout
    if dropout.name == "none":
        return "no dropout"
    if dropout.get("p_per_client") is not None:
        p = "p per client"
    elif dropout.get("p_per_group") is not None:
        p = "p per group"
    else:
        p = f"p={dropout.get('p')}"
    period = f", period {dropout.period}" if int(dropout.get("period", 1) or 1) > 1 else ""
    return f"dropout {dropout.name} {p}{period}"


def run_header(cfg: DictConfig, start: dict[str, Any]) -> str:
    """The run's first progress line: what runs on what, with which dropout, where."""
    rounds = start.get("num_rounds")
    return (
        f"[fedimb] {start.get('method')} on {cfg.dataset.name} ({_partition_label(cfg)}, "
        f"{start.get('num_clients')} clients) | {_dropout_label(cfg)} | {cfg.runtime.name}, {_device_label(cfg)} | "
        f"{rounds} round{'' if rounds == 1 else 's'}, {start.get('num_parameters'):,} parameters"
    )


def launch_line(cfg: DictConfig) -> str | None:
    """What the front end does before the run's first event, where that takes a while."""
    if cfg.runtime.name == "simulation":
        return f"[fedimb] starting the simulation (Ray, {cfg.num_clients} clients) ..."
    if cfg.runtime.name == "deployment":
        return f"[fedimb] connecting to the SuperLink at {cfg.runtime.address} ..."
    return None


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


class RunFolderError(FedimbError, OSError):
    """The run folder cannot be written (disk full, read-only, removed)."""


def unwritable(run_dir: Path, err: OSError, files: str) -> RunFolderError:
    """The one-line error for ``err`` while writing ``files`` of the run folder."""
    return RunFolderError(
        f"cannot write the run folder {run_dir}: {err.strerror or err} ({err.filename or files})"
    )


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


EVENTS_FILE = "events.jsonl"


def read_events(path: Path, warn: Echo | None = None) -> list[dict[str, Any]]:
    """The events of a run folder's ``events.jsonl``; a damaged line (a write cut short
    by a crash or a full disk, an edit) is skipped, and ``warn`` gets one line saying how
    many were and where."""
    found, damaged = [], []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            found.append(event)
        elif line.strip():
            damaged.append(number)
    if damaged and warn is not None:
        shown = ", ".join(map(str, damaged[:10])) + (", ..." if len(damaged) > 10 else "")
        warn(
            f"[fedimb] warning: skipped {len(damaged)} damaged line{'' if len(damaged) == 1 else 's'} "
            f"of {path} (line{'' if len(damaged) == 1 else 's'} {shown})"
        )
    return found


#: the lock file that says which process writes a run folder (see :func:`hold_run_folder`)
LOCK_FILE = ".fedimb.lock"

_held: dict[Path, Any] = {}  # run folder -> the open lock file of this process


class RunFolderInUse(FedimbError):
    """Another process writes the run folder."""


def hold_run_folder(run_dir: Path) -> None:
    """Make this process the run folder's only writer until :func:`release_run_folder`
    or its end: an exclusive ``flock`` on its lock file, which the kernel drops however
    the process ends (a crash or SIGKILL leaves no stale lock). A second ``fedimb`` run,
    resume or attach on the folder gets one line naming the holder's process id."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    try:
        handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - closed on release
    except OSError as err:
        raise unwritable(run_dir, err, LOCK_FILE) from err
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise RunFolderInUse(
            f"run folder {run_dir} is in use by process {holder or '(unknown)'} (a fedimb run, "
            f"resume or attach writing it); wait for it to end or stop it"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[run_dir] = handle


def release_run_folder(run_dir: Path) -> None:
    """Let another process write the run folder (the lock file stays: removing it would
    let two processes lock two different files)."""
    handle = _held.pop(run_dir.resolve(), None)
    if handle is not None:
        handle.close()


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
            if "clients_lost" in event:
                self.lost = event
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
            parts.append(
                f"acc {_fmt(test.get('accuracy'))} f1 {_fmt(test.get('macro_f1'))} loss {_fmt(test.get('loss'))}"
            )
        clients = r.get("clients")
        if clients and r["round"] > 0:
            parts.append(clients_outcome(clients))
        parts.append(self._timing(r, total))
        return " | ".join(parts)

    def _timing(self, r: dict[str, Any], total: int) -> str:
        """``19.8s  elapsed 1m02s  eta 8m40s``: the round, the run so far (from launch,
        start-up included), the rest at the pace of the rounds so far."""
        timing = f"{r.get('seconds', 0.0):.1f}s  elapsed {format_duration(self._clock() - self._launched)}"
        trained = [x.get("seconds", 0.0) for x in self.rounds if x["round"] > 0]
        eta = eta_seconds(trained, total - int(r["round"]))
        if eta:
            timing += f"  eta {format_duration(eta)}"
        return timing

    def done_line(self) -> str:
        """The completed run's last line before its folder: how long, final and best test accuracy."""
        tested = [r for r in self.rounds if (r.get("test") or {}).get("accuracy") is not None]
        done = f"[fedimb] done in {format_duration(self._clock() - self._launched)}"
        if not tested:
            return f"{done}: no test accuracy"
        final = tested[-1]
        best = max(tested, key=lambda r: r["test"]["accuracy"])
        return (
            f"{done}: final accuracy {final['test']['accuracy']:.4f} (round {final['round']}), "
            f"best {best['test']['accuracy']:.4f} (round {best['round']})"
        )

    def trained_nothing(self) -> bool:
        """Whether the run had rounds to train and no client's update was accepted in any
        of them: its model is the initial one, whatever its accuracy says."""
        trained = [r for r in self.rounds if r["round"] > 0]
        return bool(trained) and not any(
            (r.get("clients") or {}).get("succeeded", 0) > 0 for r in trained
        )

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
        partial = self.run_dir / ".summary.json.partial"
        try:
            partial.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(partial, self.run_dir / "summary.json")
        except OSError:
            partial.unlink(missing_ok=True)
            raise
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
            "completed": self.end is not None and not self.trained_nothing(),
            "clients_lost": int(self.lost.get("clients_lost", 0)),
            "clients_lost_reasons": self.lost.get("clients_lost_reasons") or {},
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
            "mean_round_seconds_after_first": round(sum(seconds[1:]) / len(seconds[1:]), 3)
            if len(seconds) > 1
            else None,
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
            for model, stats in last.items()
            for stat in DISTRIBUTION_STATS
        }
