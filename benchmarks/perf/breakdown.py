"""Where a round's time goes, per runtime: the phases every run records in metrics.csv
(split ``time``, see fedimb/app/server/phases.py), for round 1 and as a mean over rounds 2+.

    python benchmarks/perf/breakdown.py [--runtimes in_process,simulation,deployment] [--clients 3]
                                        [--rounds 4] [overrides ...]

Every runtime runs the same FedAvg experiment (every client every round, 1 local epoch,
mnist5k by default); the deployment starts a local SuperLink and one SuperNode per client.
``command to round 1`` is the wall time from starting ``fedimb`` to its round-1 line.
Writes ``<out>/breakdown.md`` and ``.json``, and the table to
``docs/tables/perf_breakdown_<N>clients.md`` where the docs include that table:
``perf_breakdown_3clients`` and ``perf_breakdown_10clients``, the two calls of ``make bench``.
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
from fedimb.app.server import phases
from fedimb.cli.rundir.files import read_metrics_csv

#: the rows of the table, in the order a round runs (client phases: mean over the clients /
#: maximum)
SERVER_ROWS = phases.SERVER_PHASES
CLIENT_ROWS = phases.CLIENT_PHASES


def run(runtime: str, clients: int, rounds: int, overrides: list[str], workdir: Path) -> dict:
    """One run of ``runtime``: its phases per round, its round times and the wall time to
    round 1."""
    out = workdir / runtime
    federation = None
    if runtime == "deployment":
        from fedimb.cli.federation.local import LocalFederation

        federation = LocalFederation(workdir / "federation", clients).start()
    try:
        target = federation.runtime_overrides() if federation else [f"runtime={runtime}"]
        started = time.perf_counter()
        proc = common.start_fedimb(
            *target,
            f"num_clients={clients}",
            f"num_rounds={rounds}",
            "dropout=none",
            "fraction_fit=1.0",
            "train.local_epochs=1",
            *overrides,
            f"output.root={out}",
            stderr=subprocess.STDOUT,
        )
        lines, to_round_1 = [], None
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line.rstrip())
            if to_round_1 is None and line.startswith("round 1/"):
                to_round_1 = time.perf_counter() - started
        proc.wait()
    finally:
        if federation is not None:
            federation.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{runtime} failed:\n" + "\n".join(lines[-20:]))
    rows = read_metrics_csv(Path(lines[-1]) / "metrics.csv")
    phases: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["round"] > 0 and (
            r["split"] == "time" or (r["split"], r["metric"]) == ("system", "seconds")
        ):
            name = "round" if r["split"] == "system" else r["metric"]
            phases.setdefault(name, {})[r["round"]] = r["value"]
    return {"runtime": runtime, "to_round_1": to_round_1, "phases": phases}


def first_and_later(values: dict[int, float] | None) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    later = [v for r, v in values.items() if r >= 2]
    return values.get(1), float(np.mean(later)) if later else None


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def two_cells(values: dict[int, float] | None, bold: bool = False) -> str:
    """Round 1 and the mean of rounds 2+ as two table cells."""
    mark = "**" if bold else ""
    return "".join(f" {mark}{cell(v)}{mark} |" for v in first_and_later(values))


def table(results: list[dict]) -> list[str]:
    header = "| phase (s) |" + "".join(
        f" {r['runtime']}: round 1 | {r['runtime']}: rounds 2+ |" for r in results
    )
    lines = [header, "|---|" + "---|---|" * len(results)]
    lines.append(
        "| command to round 1 |" + "".join(f" {cell(r['to_round_1'])} | |" for r in results)
    )
    lines.append(
        "| **round** |" + "".join(two_cells(r["phases"].get("round"), bold=True) for r in results)
    )
    for name in SERVER_ROWS:
        lines.append(
            f"| server: {name} |" + "".join(two_cells(r["phases"].get(name)) for r in results)
        )
    for name in CLIENT_ROWS:
        row = f"| client: {name} (mean / max) |"
        for r in results:
            means, maxima = (
                first_and_later(r["phases"].get(f"client_{name}")),
                first_and_later(r["phases"].get(f"client_{name}_max")),
            )
            row += "".join(
                f" {cell(m)} / {cell(x)} |" if m is not None else " - |"
                for m, x in zip(means, maxima)
            )
        lines.append(row)
    return lines


def figure_rows(results: list[dict]) -> list[dict]:
    """The figure's data: the server's seconds in each phase, for round 1 and the mean of
    rounds 2+ of every runtime (empty where the phase was not timed)."""
    return [
        {
            "column": f"{r['runtime']}: {part}",
            "phase": name,
            "seconds": first_and_later(r["phases"].get(name))[index],
        }
        for r in results
        for index, part in enumerate(("round 1", "rounds 2+"))
        for name in SERVER_ROWS
    ]


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--runtimes", default="in_process,simulation,deployment")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument("overrides", nargs="*", default=["dataset=mnist5k"])
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="breakdown-") as tmp:
        for runtime in args.runtimes.split(","):
            results.append(run(runtime, args.clients, args.rounds, args.overrides, Path(tmp)))
            print(f"  {runtime}: round 1 after {results[-1]['to_round_1']:.1f}s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "breakdown.json").write_text(json.dumps(results, indent=1))
    lines = [
        "# Where a round's time goes",
        "",
        f"FedAvg, `{' '.join(args.overrides)}`, {args.clients} clients (every client every "
        f"round), 1 local epoch, {args.rounds} rounds, all processes on one machine "
        f"({common.machine()}). Client phases: mean over the clients / the slowest client.",
        "",
        *table(results),
        "",
        f"Command: `python benchmarks/perf/breakdown.py --runtimes {args.runtimes} --clients "
        f"{args.clients} --rounds {args.rounds} {' '.join(args.overrides)}`",
    ]
    common.publish_table(args.out / "breakdown.md", lines)
    common.publish_in_docs(
        f"perf_breakdown_{args.clients}clients",
        common.table_part(lines),
        new=False,
        data=figure_rows(results),
    )


if __name__ == "__main__":
    main()
