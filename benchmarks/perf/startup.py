"""How long a user waits for the first result: the wall time from starting ``fedimb`` to
its round-0 line (the server's first evaluation: every process is up), to its round-1 line
(the target: the first round's result) and to its exit, for the default experiment (20
clients, mnist5k, 5 local epochs, Bernoulli dropout) unless overrides say otherwise.

    python benchmarks/perf/startup.py [--repeats 3] [--runtimes simulation,in_process,flower]
                                      [overrides ...]

``flower`` is Flower's own floor (:mod:`flower_floor`): the simulation's launch with the
same messages and no torch, data or training in them.

For the simulation it also splits the wait into its steps, from the run folder: the run's
``flwr.log`` stamps every line with the seconds since the front end began the run (as the
lines arrive, in Flower's 0.5 s stream ticks) and ``metrics.csv`` holds round 1's phases.

Writes ``<out>/startup.md`` and ``.json`` (median, min and max over the repeats), and to
``docs/tables/``: the runtime table as ``perf_startup_floor`` (with Flower's floor among the
runtimes) or ``perf_startup`` (without it), the simulation's steps as ``perf_startup_steps``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.cli.rundir.files import read_metrics_csv

MARKS = {"round 0": "round 0/", "round 1": "round 1/"}
#: the "runtime" of :mod:`flower_floor`: Flower's launch with fedimb's messages and no work in them
FLOOR = "flower"
#: the moments a run is timed at, from the command
MARKS = ("round 0", "round 1", "exit")
ROW_NAMES = {FLOOR: "Flower alone: simulation, the same messages, no work (`flower_floor.py`)"}
#: lines of a simulation's flwr.log that mark its steps
FLWR_MARKS = {
    "submitted": "Using SuperLink",
    "simulation": "Starting Flower Simulation",
    "server app": "Starting Flower ServerApp",
    "round 0": '{"event":"round","round":0,',
    "round 1": '{"event":"round","round":1,',
}
STEPS = [
    ("front end until the run begins (Python, Hydra, checks, data)", "front end"),
    ("SuperLink started, `flwr run` submitted the app", "submitted"),
    ("Flower starts the simulation process", "simulation"),
    ("the ServerApp imported (torch) and its round-0 test", "server app"),
    ("round 1, from the round-0 line to the round-1 line", "round 1 lines"),
    ("... of which discovery (Ray, its actors, the client app's imports)", "discover"),
    ("... of which training and aggregation", "round 1 fit"),
]


def time_once(runtime: str, overrides: list[str], out: Path) -> dict[str, float]:
    """Seconds from the command to each mark and to its exit."""
    command = common.fedimb_command(
        f"runtime={runtime}", "num_rounds=2", *overrides, f"output.root={out}"
    )
    if runtime == FLOOR:
        nodes = next((o.split("=", 1)[1] for o in overrides if o.startswith("num_clients=")), "20")
        command = [
            sys.executable,
            str(common.REPO / "benchmarks" / "perf" / "flower_floor.py"),
            "--nodes",
            nodes,
        ]
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=common.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: dict[str, float] = {}
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line.rstrip())
        for name, prefix in MARKS.items():
            if name not in seen and line.startswith(prefix):
                seen[name] = time.perf_counter() - started
    if proc.wait() != 0 or len(seen) < len(MARKS):
        raise SystemExit(f"{runtime}: the run failed:\n" + "\n".join(lines[-10:]))
    seen["exit"] = time.perf_counter() - started
    if runtime == "simulation":
        seen.update(simulation_steps(Path(lines[-1]), seen))
    return seen


def simulation_steps(run_dir: Path, seen: dict[str, float]) -> dict[str, float]:
    """Seconds per step of :data:`STEPS` in one simulation (its run folder)."""
    stamps: dict[str, float] = {}
    for line in (run_dir / "flwr.log").read_text(errors="replace").splitlines():
        for name, text in FLWR_MARKS.items():
            if name not in stamps and text in line:
                stamps[name] = float(line[1 : line.index("s]")])
    phases = {
        row["metric"]: row["value"]
        for row in read_metrics_csv(run_dir / "metrics.csv")
        if row["round"] == 1 and row["split"] == "time"
    }
    return {
        "front end": seen["round 0"] - stamps["round 0"],
        "submitted": stamps["submitted"],
        "simulation": stamps["simulation"] - stamps["submitted"],
        "server app": stamps["round 0"] - stamps["simulation"],
        "round 1 lines": stamps["round 1"] - stamps["round 0"],
        "discover": phases["discover"],  # the server's own clock
        "round 1 fit": phases["fit"] - phases["discover"],
    }


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runtimes", default=f"simulation,in_process,{FLOOR}")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument("--code", default="now", help="what the figure calls the code measured")
    args, overrides = parser.parse_known_args()
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for runtime in args.runtimes.split(","):
            runs = [
                time_once(runtime, overrides, Path(workdir) / runtime) for _ in range(args.repeats)
            ]
            results[runtime] = {mark: [run[mark] for run in runs] for mark in runs[0]}
            print(
                runtime,
                {mark: round(float(np.median(v)), 2) for mark, v in results[runtime].items()},
                flush=True,
            )
    header = ["runtime", "command to round 0 (s)", "command to round 1 (s)", "command to exit (s)"]
    rows = [
        [ROW_NAMES.get(runtime, runtime)] + [_spread(times[mark]) for mark in MARKS]
        for runtime, times in results.items()
    ]
    described = " ".join(overrides) or "the defaults"
    lines = [
        "# From the command to the first result",
        "",
        f"`fedimb num_rounds=2` with {described}, {args.repeats} calls per runtime, median "
        f"(min–max); {common.machine()}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        *step_table(results.get("simulation", {})),
        "Command: `python benchmarks/perf/startup.py " + " ".join(sys.argv[1:]) + "`",
    ]
    common.publish_table(args.out / "startup.md", lines)
    points = [  # the figures': medians of the calls
        {
            "runtime": ROW_NAMES.get(runtime, runtime).replace("`", ""),
            "code": args.code,
            **{mark.replace(" ", ""): float(np.median(times[mark])) for mark in MARKS},
        }
        for runtime, times in results.items()
    ]
    common.publish_in_docs(
        "perf_startup_floor" if FLOOR in results else "perf_startup",
        common.table_part(lines),
        data=points,
    )
    if steps := step_table(results.get("simulation", {})):
        simulation = results["simulation"]
        step_points = [
            {"step": label.replace("`", ""), "seconds": float(np.median(simulation[key]))}
            for label, key in STEPS
        ]
        common.publish_in_docs("perf_startup_steps", common.table_part(steps), data=step_points)
    (args.out / "startup.json").write_text(json.dumps(results, indent=1))


def step_table(times: dict[str, list[float]]) -> list[str]:
    """The simulation's command-to-round-1 wait by step (empty without a simulation)."""
    if "front end" not in times:
        return []
    rows = [f"| {label} | {_spread(times[key], 2)} |" for label, key in STEPS]
    return [
        "Where the simulation's wait goes (s; the first five rows add up to the command-to-round-1 "
        "time, give or take Flower's 0.5 s log ticks):",
        "",
        "| step | median (min–max) |",
        "|---|---|",
        *rows,
        "",
    ]


def _spread(values: list[float], digits: int = 1) -> str:
    return f"{np.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


if __name__ == "__main__":
    main()
