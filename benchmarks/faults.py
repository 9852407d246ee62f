"""The fault matrix: every fault injected into every runtime, and what the run made of it.

    python benchmarks/faults.py [--runtimes in_process,simulation,deployment]
                                [--faults raise,nan,...]

Each cell runs digits over 3 clients for 3 rounds with client 1 misbehaving in round 2
(``fault.*``, see fedimb/app/faults/injection.py), or with a process killed during round 2, and
checks three things:

- *survived*: the run completed (after ``fedimb resume`` where the server was killed);
- *counted*: round 2 reports client 1 as failed (errors) or rejected in events.jsonl,
  metrics.csv and on the console, with its cause;
- *lost nothing*: the run folder holds every round in metrics.csv and events.jsonl, and
  where the fault is a bad or late update, the global model after round 2 is the one the
  two good clients make alone (its test scores equal, to the last digit, those of the
  same run with client 1 failing outright). What round 3 made of it is noted.

tests/integration/test_fault_matrix.py runs the same cells (``one_cell``) and asserts them.
Writes results/faults/table.md (and .json) and, for the whole matrix, docs/tables/fault_matrix.md
(the table of docs/faults.md). Cells
measured before are kept, so ``--runtimes simulation --faults kill_worker`` measures one
cell again and rewrites the table.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common

EXPERIMENT = common.matrix_experiment(["train.local_epochs=1"], ("fault.rounds=[2]",))
RUNTIMES = common.MATRIX_RUNTIMES
#: fault -> (how it is made, what round 2 must count, the words of the cause the count must carry)
FAULTS = {
    "raise": (
        "client 1 raises in fit",
        "errors",
        "RuntimeError: injected fault: client 1 raises in fit (round 2)",
    ),
    "nan": (
        "client 1 returns NaN weights",
        "rejected",
        "update of client 1 rejected: array 0 holds NaN or Inf",
    ),
    "shape": (
        "client 1 returns a wrongly shaped array",
        "rejected",
        "update of client 1 rejected: expected 6 arrays of shapes",
    ),
    "payload": (
        "client 1 adds an unknown 8 MiB named array",
        "rejected",
        "update of client 1 rejected: unknown payload 'injected'",
    ),
    "hang": (
        "client 1 answers after the round timeout",
        "errors",
        "no reply within the round timeout",
    ),
    "kill_worker": (
        "the process running client 1's fit is killed (SIGKILL)",
        "errors",
        "",
    ),  # see CAUSES
    "kill_server": ("the server side is killed (SIGKILL), then fedimb resume", "-", ""),
}
#: the cause of a killed worker, by runtime: Ray reports the actor's death; a dead SuperNode
#: sends nothing, and the SuperLink may say so before the round timeout does
KILLED_WORKER = {
    "simulation": ("ActorDiedError: The actor died unexpectedly",),
    "deployment": ("no reply within the round timeout", "Node Unavailable"),
}
BAD_UPDATES = ("nan", "shape", "payload", "hang")
#: the cells that cannot occur: in process the clients run inside the server's process
NOT_APPLICABLE = {("kill_worker", "in_process")}
#: the test of a bad update, one case per fault
BAD_UPDATE_TEST = "test_failures.py::test_a_bad_update_is_rejected_counted_and_never_aggregated"
#: the tests that prove a cell beside tests/integration/test_fault_matrix.py
OTHER_TESTS = {
    "raise": "test_failures.py::test_a_client_error_shows_its_type_and_message",
    **{fault: f"{BAD_UPDATE_TEST}[{fault}]" for fault in ("nan", "shape", "payload")},
    "hang": "test_failures.py::test_a_client_slower_than_the_round_timeout_fails_in_process",
    "kill_worker": "deployment/test_faults.py::test_secure_federation_survives_client_faults",
    "kill_server": "test_resume.py::test_server_killed_mid_run_resumes_with_identical_results",
}


@dataclass(frozen=True)
class Timing:
    """How long a round may take and how long the faulty client stays away (seconds)."""

    round_timeout: int = 60
    hang: int = 75  # a late answer: past the round timeout
    busy: int = 20  # client 1's fit lasts this long so that its worker is killed inside it


@dataclass
class Cell:
    fault: str
    runtime: str
    survived: bool | None  # None: the fault cannot occur in this runtime
    counted: bool | None
    lost_nothing: bool | None
    detail: str


def fedimb(*args: str) -> subprocess.Popen:
    """``python -m fedimb <args>`` in the background, in a session of its own."""
    return common.start_fedimb(*args, start_new_session=True)


def read_until(proc: subprocess.Popen, marker: str, lines: list[str]) -> None:
    """Collect the front end's output into ``lines`` up to the first line starting with
    ``marker``."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(marker):
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
        return "SuperNode 1 killed"
    actors = [p for p in descendants(front_end) if "ClientAppActor" in " ".join(p.cmdline())]
    for actor in actors:  # the one running client 1's fit among them; the others are idle
        actor.kill()
    return f"{len(actors)} Ray actors killed" if actors else "no Ray actor found"


def kill_server_side(front_end: int, federation) -> None:
    """SIGKILL the server: the front end itself in process, the SuperLink it started and
    everything below it in the simulation, the ServerApp process under the federation's
    SuperLink in a deployment."""
    if federation is not None:
        procs = [
            p
            for p in descendants(federation.superlink.pid)
            if "flwr-serverapp" in " ".join(p.cmdline())
        ]
    elif not [p for p in descendants(front_end) if "flower-superlink" in " ".join(p.cmdline())]:
        os.kill(front_end, signal.SIGKILL)  # in process: the front end is the server
        return
    else:
        procs = [p for p in descendants(front_end) if "flower-superlink" in " ".join(p.cmdline())]
    for proc in procs + [c for p in procs for c in descendants(p.pid)]:
        proc.kill()


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def metrics(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as fh:
        return list(csv.DictReader(fh))


def round_event(run_dir: Path, server_round: int) -> dict:
    """The last record of ``server_round`` in the run's events."""
    return [
        e for e in events(run_dir) if e.get("event") == "round" and e.get("round") == server_round
    ][-1]


def client_count(run_dir: Path, server_round: int, kind: str) -> float:
    """metrics.csv's count of ``kind`` clients (errors, rejected) in ``server_round``."""
    rows = [
        r
        for r in metrics(run_dir)
        if int(r["round"]) == server_round and r["split"] == "clients" and r["metric"] == kind
    ]
    return float(rows[-1]["value"]) if rows else 0.0


def causes(fault: str, runtime: str) -> tuple[str, ...]:
    """The words, any one of them, that name the cause of ``fault`` in ``runtime``."""
    return KILLED_WORKER[runtime] if fault == "kill_worker" else (FAULTS[fault][2],)


def is_counted(run_dir: Path, fault: str, runtime: str, console: list[str]) -> tuple[bool, str]:
    """Round 2 counts client 1 in events.jsonl, metrics.csv and on the console, with its cause."""
    kind = FAULTS[fault][1]
    record = round_event(run_dir, 2)
    messages = [m for m in record.get("messages", []) if "client 1" in m]
    shown = [m for m in messages if f"    ! {m}" in console]
    counted = (
        record["clients"][kind] >= 1
        and client_count(run_dir, 2, kind) >= 1
        and any(cause in m for m in shown for cause in causes(fault, runtime))
    )
    return counted, (shown or messages or ["no message about client 1"])[0]


def one_cell(
    fault: str, runtime: str, out: Path, federation=None, timing: Timing = Timing()
) -> Cell:
    """Inject ``fault`` into a run of ``runtime`` under ``out/<runtime>/<fault>`` and judge it.
    The bad-update faults compare with ``out/<runtime>/raise``, so that cell runs first."""
    if (fault, runtime) in NOT_APPLICABLE:
        return Cell(
            fault, runtime, None, None, None, "n/a: the clients run in the server's process"
        )
    root = out / runtime / fault
    overrides = [
        *EXPERIMENT,
        f"runtime.round_timeout={timing.round_timeout}",
        f"output.root={root}",
        f"checkpoint.dir={out / runtime / 'checkpoints'}",
    ]
    overrides += (
        federation.runtime_overrides() if federation is not None else [f"runtime={runtime}"]
    )
    kind, hang = {"kill_worker": ("hang", timing.busy), "kill_server": ("none", 0)}.get(
        fault, (fault, timing.hang)
    )
    proc = fedimb(*overrides, f"fault.kind={kind}", f"fault.hang_seconds={hang}")
    console: list[str] = []
    notes = []
    if fault in ("kill_worker", "kill_server"):
        read_until(proc, "round 1/", console)
        if fault == "kill_worker":
            time.sleep(5.0)  # client 1 is inside its round-2 fit
            notes.append(kill_client_worker(proc.pid, federation))
        else:
            kill_server_side(proc.pid, federation)
    out_text, err = proc.communicate(timeout=900)
    console += out_text.splitlines()
    run_dir = run_folder(root)
    if run_dir is None:
        return Cell(fault, runtime, False, None, False, f"no run folder: {err.strip()[-200:]}")
    if fault == "kill_server" or (
        proc.returncode != 0 and "fedimb resume" in err
    ):  # the run stopped: resume it
        extra = federation.runtime_overrides()[1:2] if federation is not None else []
        resumed = common.run_fedimb("resume", str(run_dir), *extra, timeout=900)
        stopped = (
            [
                line.split("the run failed (")[-1].split(" at ")[0]
                for line in err.splitlines()
                if line.startswith("fedimb: error:")
            ]
            if fault != "kill_server"
            else []
        )
        notes.append(
            f"{'stopped: ' + stopped[0] + '; ' if stopped else ''}first exit {proc.returncode}; "
            f"resume exit {resumed.returncode}"
        )
        err = resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    survived = bool(summary.get("completed"))
    in_events = sorted({e["round"] for e in events(run_dir) if e["event"] == "round"})
    in_metrics = sorted({int(r["round"]) for r in metrics(run_dir)})
    lost_nothing = survived and in_events == in_metrics == [0, 1, 2, 3]
    counted = None
    if FAULTS[fault][1] != "-" and survived:
        counted, message = is_counted(run_dir, fault, runtime, console)
        notes.append(message)
    if fault in BAD_UPDATES and survived:  # the model after round 2 is the good clients' alone
        reference = run_folder(out / runtime / "raise")
        same = (
            reference is not None
            and round_event(reference, 2)["test"] == round_event(run_dir, 2)["test"]
        )
        lost_nothing = lost_nothing and same
        notes.append(
            f"round-2 model {'identical to' if same else 'DIFFERENT from'} client 1 failing"
        )
    if survived:
        after = round_event(run_dir, 3).get("clients", {})
        if after.get("errors") or after.get("rejected"):
            notes.append(f"round 3: {after.get('succeeded')} ok, {after.get('errors')} errors")
    elif err.strip():
        notes.append(err.strip().splitlines()[-1])
    return Cell(
        fault,
        runtime,
        survived,
        counted if survived else False,
        lost_nothing,
        "; ".join(notes)[:500],
    )


def mark(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "**no**")


def grid_rows(cells: list[Cell]) -> list[dict]:
    """The figure's data: one row per cell, its checks True, False or None (no such cell)."""
    checks = ("survived", "counted", "lost_nothing")
    return [
        {"fault": c.fault, "runtime": c.runtime, **{k: getattr(c, k) for k in checks}}
        for c in cells
    ]


def proved_by(fault: str, runtime: str) -> str:
    return f"test_fault_matrix.py::test_cell[{runtime}-{fault}], {OTHER_TESTS[fault]}"


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "faults")
    args = parser.parse_args()
    faults = args.faults.split(",")
    if any(f in BAD_UPDATES for f in faults) and "raise" not in faults:
        faults.insert(0, "raise")  # the reference run of the bad updates
    timing = Timing()
    cells = []
    for runtime in args.runtimes.split(","):
        with common.local_federation_for(runtime, args.out / "federation") as federation:
            for fault in faults:
                run = partial(one_cell, fault, runtime, args.out, federation, timing)
                cells.append(common.run_cell(runtime, fault, 11, run))
                if federation is not None and fault == "kill_worker":  # bring SuperNode 1 back
                    federation.start_node(1)
                    time.sleep(5)
    # cells measured before stay, so a single cell can be measured again after a change
    known = (
        {(c["fault"], c["runtime"]): Cell(**c) for c in json.loads(path.read_text())}
        if (path := args.out / "table.json").exists()
        else {}
    )
    known.update({(c.fault, c.runtime): c for c in cells})
    cells = [known[f, r] for r in RUNTIMES for f in FAULTS if (f, r) in known]
    path.write_text(json.dumps([asdict(c) for c in cells], indent=1))
    lines = [
        f"Set-up: `{' '.join(EXPERIMENT)} runtime.round_timeout={timing.round_timeout}`; "
        f"client 1 misbehaves in round 2 (a late answer comes after {timing.hang} s).",
        "",
        "| fault | runtime | survived | counted | lost nothing | what happened | proved by |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        lines.append(
            f"| {cell.fault}: {FAULTS[cell.fault][0]} | {cell.runtime} | {mark(cell.survived)} "
            f"| {mark(cell.counted)} | {mark(cell.lost_nothing)} | {cell.detail.replace('|', '/')} "
            f"| {proved_by(cell.fault, cell.runtime)} |"
        )
    lines += [
        "",
        "Command: `python benchmarks/faults.py` "
        "(`--runtimes R --faults F` measures those cells again)",
    ]
    common.publish_table(args.out / "table.md", ["# Fault matrix", "", *lines])
    if len(cells) == len(RUNTIMES) * len(FAULTS):  # the whole matrix
        common.publish_in_docs("fault_matrix", lines, data=grid_rows(cells))


if __name__ == "__main__":
    main()
