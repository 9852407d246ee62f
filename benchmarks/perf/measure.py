"""Shared by the performance benchmarks: run ``fedimb`` as a user does and measure it.

:func:`run_measured` starts ``python -m fedimb <overrides>``, samples the memory of its
whole process tree (SuperLink, SuperExec, simulation, Ray and its actors) while it runs,
and reads the round times and traffic the run folder records.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.cli.rundir.events import read_events
from fedimb.cli.rundir.files import read_metrics_csv

#: seconds between memory samples. Reading PSS costs about 40 ms of CPU per ~1 GB
#: process, so on few cores frequent samples slow the run being timed; the memory of a
#: run plateaus once its actors are up, so a sample every 2 s still finds the peak.
MEMORY_INTERVAL = 2.0


class MemorySampler:
    """Peak total memory of a process tree (PSS where the kernel reports it, else RSS)."""

    def __init__(self, root_pid: int, interval: float = MEMORY_INTERVAL):
        self.root = psutil.Process(root_pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree(self):
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    @staticmethod
    def _size(proc: psutil.Process) -> int:
        try:
            info = proc.memory_full_info()
            return int(getattr(info, "pss", info.rss))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(self._size(p) for p in self._tree()))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def per_round(run_dir: Path, split: str, metric: str) -> dict[int, float]:
    """``metric`` of ``split`` in every round >= 1 of a run folder's metrics.csv."""
    return {
        r["round"]: r["value"]
        for r in read_metrics_csv(run_dir / "metrics.csv")
        if r["split"] == split and r["metric"] == metric and r["round"] > 0
    }


def round_wall_seconds(run_dir: Path) -> list[float]:
    """Each round's wall clock (rounds >= 1): the time from the record of the round before
    to its own (round 1: its own seconds). Where the central test of round t runs while
    round t+1's clients train (the simulation), a round's own ``seconds`` include its
    test, which the next round's overlap: summed, they count that test twice; the time
    between records counts it once."""
    events = read_events(run_dir / "events.jsonl")
    records = [e for e in events if e["event"] == "round" and e["round"] > 0]
    elapsed = [float(e["elapsed"]) for e in records]
    return [float(records[0]["seconds"])] + [b - a for a, b in zip(elapsed, elapsed[1:])]


def run_measured(overrides: list[str], runs_dir: Path) -> dict:
    """One ``fedimb`` run; its round times, traffic, peak memory and summary."""
    start = time.perf_counter()
    proc = common.start_fedimb(*overrides, f"output.root={runs_dir}", stderr=subprocess.STDOUT)
    with MemorySampler(proc.pid) as memory:
        lines = [line.rstrip() for line in proc.stdout]  # type: ignore[union-attr]
        proc.wait()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"fedimb {' '.join(overrides)} failed:\n" + "\n".join(lines[-20:]))
    run_dir = Path(lines[-1])
    seconds = per_round(run_dir, "system", "seconds")
    summary = json.loads((run_dir / "summary.json").read_text())
    rounds = sorted(seconds)
    return {
        "round_seconds": [seconds[r] for r in rounds],
        "round_wall_seconds": round_wall_seconds(run_dir),
        "bytes_up": [per_round(run_dir, "comm", "bytes_up").get(r, 0.0) for r in rounds],
        "bytes_down": [per_round(run_dir, "comm", "bytes_down").get(r, 0.0) for r in rounds],
        "succeeded": [per_round(run_dir, "clients", "succeeded").get(r, 0.0) for r in rounds],
        "sampled": [per_round(run_dir, "clients", "sampled").get(r, 0.0) for r in rounds],
        "wall_seconds": wall,
        "peak_memory_mb": memory.peak / 2**20,
        "final_accuracy": summary["final_accuracy"],
        "startup_seconds": wall - summary["server_seconds"],
        "run_dir": str(run_dir),
    }


def steady(values: list[float]) -> float:
    """Mean from round 2 on (round 1 pays for starting actors and loading data)."""
    return float(np.mean(values[1:] if len(values) > 1 else values))
