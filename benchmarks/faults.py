"""The fault matrix: every fault injected into every runtime, and what the run made of it.

    python benchmarks/faults.py [--runtimes in_process,simulation,deployment] [--faults raise,nan,...]

Each cell runs digits over 3 clients for 3 rounds with client 1 misbehaving in round 2
(``fault.*``, see fedimb/app/faults.py), or with a process killed during round 2, and
checks three things:

- *survived*: the run completed (after ``fedimb resume`` where the server was killed);
- *counted*: round 2 reports client 1 as failed (errors) or rejected;
- *lost nothing*: the run folder holds every round in metrics.csv and events.jsonl, and
  where the fault is a bad or late update, the global model after round 2 is the one the
  two good clients make alone (its test scores equal, to the last digit, those of the
  same run with client 1 failing outright). What round 3 made of it is noted.

Writes results/faults/table.md (and .json); the README's fault table is this file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import REPO, argument_parser, publish_table  # noqa: E402

EXPERIMENT = ["dataset=digits", "num_clients=3", "num_rounds=3", "dropout=none", "train.local_epochs=1", "seed=0",
              "fault.clients=[1]", "fault.rounds=[2]", "runtime.round_timeout=60"]
#: fault -> (how it is made, what round 2 must count, the test that proves the cell)
FAULTS = {
    "raise": ("client 1 raises in fit", "errors", "test_failures.py::test_a_client_error_shows_its_type_and_message"),
    "nan": ("client 1 returns NaN weights", "rejected",
            "test_failures.py::test_a_bad_update_is_rejected_counted_and_never_aggregated[nan]"),
    "shape": ("client 1 returns a wrongly shaped array", "rejected",
              "test_failures.py::test_a_bad_update_is_rejected_counted_and_never_aggregated[shape]"),
    "payload": ("client 1 adds an unknown 8 MiB named array", "rejected",
                "test_failures.py::test_a_bad_update_is_rejected_counted_and_never_aggregated[payload]"),
    "hang": ("client 1 answers 75 s late (round timeout 60 s)", "errors", "test_faults.py (straggler), this script"),
    "kill_worker": ("the process running client 1's fit is killed (SIGKILL)", "errors",
                    "deployment/test_faults.py (SuperNode killed and restarted), this script"),
    "kill_server": ("the server side is killed (SIGKILL), then fedimb resume", "-",
                    "test_resume.py::test_server_killed_mid_run_resumes_with_identical_results, this script"),
}
BAD_UPDATES = ("nan", "shape", "payload", "hang")


@dataclass
class Cell:
    fault: str
    runtime: str
    survived: bool | None  # None: the fault cannot occur in this runtime
    counted: bool | None
    lost_nothing: bool | None
    detail: str


def fedimb(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fedimb", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def run_until(proc: subprocess.Popen, marker: str, action) -> None:
    """Call ``action`` when the front end prints a line starting with ``marker``."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(marker):
            action()
            return


def run_folder(root: Path) -> Path | None:
    folders = sorted(root.glob("*/*/config.yaml"))
    return folders[-1].parent if folders else None


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def kill_client_worker(front_end: int, federation) -> str:
    """SIGKILL the process that runs client 1: a SuperNode, or a Ray actor."""
    if federation is not None:
        federation.nodes[1].proc.kill()
        return "SuperNode 1"
    actors = [p for p in descendants(front_end) if "ClientAppActor" in " ".join(p.cmdline())]
    for actor in actors:  # the one running client 1's fit among them; the others are idle
        actor.kill()
    return f"{len(actors)} Ray actors killed" if actors else "no Ray actor found"


def kill_server_side(front_end: int, federation) -> None:
    """SIGKILL the server: the front end itself in process, the SuperLink it started and
    everything below it in the simulation, the ServerApp process under the federation's
    SuperLink in a deployment."""
    if federation is not None:
        procs = [p for p in descendants(federation.superlink.pid) if "flwr-serverapp" in " ".join(p.cmdline())]
    elif not [p for p in descendants(front_end) if "flower-superlink" in " ".join(p.cmdline())]:
        os.kill(front_end, signal.SIGKILL)  # in process: the front end is the server
        return
    else:
        procs = [p for p in descendants(front_end) if "flower-superlink" in " ".join(p.cmdline())]
    for proc in procs + [c for p in procs for c in descendants(p.pid)]:
        proc.kill()


def rounds_recorded(run_dir: Path) -> tuple[list[int], list[int]]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    in_events = sorted({e["round"] for e in events if e["event"] == "round"})
    import csv

    with open(run_dir / "metrics.csv") as fh:
        in_metrics = sorted({int(r["round"]) for r in csv.DictReader(fh)})
    return in_events, in_metrics


def round_event(run_dir: Path, server_round: int) -> dict:
    """The last record of ``server_round`` in the run's events."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e.get("event") == "round" and e.get("round") == server_round][-1]


def one_cell(fault: str, runtime: str, out: Path, federation) -> Cell:
    root = out / runtime / fault
    overrides = [*EXPERIMENT, f"output.root={root}", f"checkpoint.dir={out / 'checkpoints'}"]
    overrides += federation.runtime_overrides() if federation is not None else [f"runtime={runtime}"]
    # a killed worker is killed while it runs client 1's round-2 fit, made to last 20 s
    kind, hang = {"kill_worker": ("hang", 20), "kill_server": ("none", 0)}.get(fault, (fault, 75))
    proc = fedimb(*overrides, f"fault.kind={kind}", f"fault.hang_seconds={hang}")
    note = ""
    if fault == "kill_worker":
        if runtime == "in_process":
            proc.kill()
            return Cell(fault, runtime, None, None, None, "n/a: the clients run in the server's process")
        run_until(proc, "round 1/", lambda: None)
        time.sleep(5.0)  # client 1 is inside its round-2 fit
        note = kill_client_worker(proc.pid, federation)
    elif fault == "kill_server":
        run_until(proc, "round 1/", lambda: kill_server_side(proc.pid, federation))
    _, err = proc.communicate(timeout=900)
    run_dir = run_folder(root)
    if run_dir is None:
        return Cell(fault, runtime, False, None, False, f"no run folder: {err.strip()[-200:]}")
    if fault == "kill_server":
        extra = federation.runtime_overrides()[1:2] if federation is not None else []
        resumed = subprocess.run([sys.executable, "-m", "fedimb", "resume", str(run_dir), *extra], cwd=REPO,
                                 capture_output=True, text=True, timeout=900)
        note = f"first exit {proc.returncode}; resume exit {resumed.returncode}"
        err = resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    survived = bool(summary.get("completed"))
    in_events, in_metrics = rounds_recorded(run_dir)
    lost_nothing = survived and in_events == [0, 1, 2, 3] and in_metrics == [0, 1, 2, 3]
    counted = None
    if FAULTS[fault][1] != "-":
        record = round_event(run_dir, 2)
        counted = record["clients"][FAULTS[fault][1]] >= 1
        note = "; ".join(filter(None, [note, *record.get("messages", [])[:1]]))
    if fault in BAD_UPDATES and survived:  # the model after round 2 is the good clients' alone
        reference = run_folder(out / runtime / "raise")
        same = reference is not None and round_event(reference, 2)["test"] == round_event(run_dir, 2)["test"]
        lost_nothing = lost_nothing and same
        note = f"{note}; round-2 model {'identical to' if same else 'DIFFERENT from'} client 1 failing"
    if survived:
        after = round_event(run_dir, 3).get("clients", {})
        if after.get("errors") or after.get("rejected"):
            note = f"{note}; round 3: {after.get('succeeded')} ok, {after.get('errors')} errors"
    if not survived:
        note = f"{note}; {err.strip().splitlines()[-1] if err.strip() else ''}"
    return Cell(fault, runtime, survived, counted, lost_nothing, note[:300])


def mark(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "**no**")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--runtimes", default="in_process,simulation,deployment")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--out", type=Path, default=REPO / "results" / "faults")
    args = parser.parse_args()
    faults = args.faults.split(",")
    if any(f in BAD_UPDATES for f in faults) and "raise" not in faults:
        faults.insert(0, "raise")  # the reference run of the bad updates
    cells = []
    for runtime in args.runtimes.split(","):
        federation = None
        if runtime == "deployment":
            from fedimb.cli.local_federation import LocalFederation

            federation = LocalFederation(args.out / "federation", 3).start()
        try:
            for fault in faults:
                started = time.perf_counter()
                cell = one_cell(fault, runtime, args.out, federation)
                print(f"{runtime:>11} {fault:>11}: {asdict(cell)} ({time.perf_counter() - started:.0f} s)", flush=True)
                cells.append(cell)
                if federation is not None and fault == "kill_worker":  # bring SuperNode 1 back
                    federation.start_node(1)
                    time.sleep(5)
        finally:
            if federation is not None:
                federation.stop()
    (args.out / "table.json").write_text(json.dumps([asdict(c) for c in cells], indent=1))
    lines = ["# Fault matrix", "", f"Set-up: `{' '.join(EXPERIMENT)}`; client 1 misbehaves in round 2.", "",
             "| fault | runtime | survived | counted | lost nothing | what happened | proved by |",
             "|---|---|---|---|---|---|---|"]
    for cell in cells:
        what, _, test = FAULTS[cell.fault]
        lines.append(f"| {cell.fault}: {what} | {cell.runtime} | {mark(cell.survived)} | {mark(cell.counted)} "
                     f"| {mark(cell.lost_nothing)} | {cell.detail.replace('|', '/')} | {test} |")
    lines += ["", "Command: `python benchmarks/faults.py`"]
    publish_table(args.out / "table.md", lines)


if __name__ == "__main__":
    main()
