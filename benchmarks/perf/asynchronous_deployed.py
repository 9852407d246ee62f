"""A deployed FedBuff run beside its synchronous twin, with one slow node: the wall time
of each and when each server step lands (docs/asynchronous.md).

Per repeat: a local SuperLink and three SuperNodes (``fedimb.cli.federation.local``),
digits, one local epoch, one node answering every fit ``--slow`` seconds late
(``fault.kind=hang``); two synchronous rounds (six client updates, every round waiting
for the slow node), then four FedBuff steps (K = 2, all three clients training at once:
eight updates). Reads the server's seconds from each run's summary and, from its events,
the time since the server's start at which each round or step was applied. Writes
``<out>/table.md``, ``docs/tables/asynchronous_deployed.md`` and its figure.

    python benchmarks/perf/asynchronous_deployed.py [--repeats 2] [--slow 30]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.cli.federation.local import LocalFederation

NODES = 3
MODES = {
    "sync": ["num_rounds=2"],
    "fedbuff": ["num_rounds=4", "mode=fedbuff", "mode.concurrency=3", "mode.buffer_size=2"],
}


def deployed_run(fed: LocalFederation, root: Path, slow: int, overrides: list[str]) -> dict:
    """One run on ``fed``: its server seconds and the times its steps were applied."""
    result = common.run_fedimb(
        *fed.runtime_overrides(),
        "dataset=digits",
        f"num_clients={NODES}",
        "train.local_epochs=1",
        "dropout=none",
        f"runtime.round_timeout={10 * slow}",
        "fault.kind=hang",
        f"fault.clients=[{NODES - 1}]",
        f"fault.hang_seconds={slow}",
        *overrides,
        f"output.root={root}",
    )
    if result.returncode != 0:
        raise SystemExit(f"deployed run failed: {result.stderr.strip()[-500:]}")
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "round" and e["round"] > 0]
    return {
        "server_seconds": float(summary["server_seconds"]),
        "applied_at": [float(e["elapsed"]) for e in steps],
        "updates": sum(int(e["clients"]["succeeded"]) for e in steps),
    }


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--slow", type=int, default=30, help="the slow node's extra seconds")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "asynchronous")
    args = parser.parse_args()
    lines = [
        "| repeat | mode | client updates | server seconds | steps applied at (s) |",
        "|---|---|---|---|---|",
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fedimb-async-deployed-") as tmp:
        for repeat in range(1, args.repeats + 1):
            with LocalFederation(Path(tmp) / f"fed{repeat}", NODES) as fed:
                for mode, overrides in MODES.items():
                    run = deployed_run(fed, Path(tmp) / f"{mode}{repeat}", args.slow, overrides)
                    at = ", ".join(f"{t:.1f}" for t in run["applied_at"])
                    lines.append(
                        f"| {repeat} | {mode} | {run['updates']} | {run['server_seconds']:.1f} "
                        f"| {at} |"
                    )
                    print(lines[-1], flush=True)
                    rows += [
                        {"repeat": repeat, "mode": mode, "step": i, "seconds": t}
                        for i, t in enumerate([*run["applied_at"], run["server_seconds"]], 1)
                    ]
    common.publish_results(
        args.out / "deployed.md",
        "asynchronous_deployed",
        [
            "# A deployed FedBuff run beside its synchronous twin, one node slow",
            "",
            f"{NODES} SuperNodes on this machine, digits, one local epoch; node {NODES - 1} "
            f"answers every fit {args.slow} s late. Machine: {common.machine()}.",
            "",
            *lines,
            "",
            "The first step of each run includes the nodes' start-up for the run. Command: "
            f"`python benchmarks/perf/asynchronous_deployed.py --repeats {args.repeats} "
            f"--slow {args.slow}`",
        ],
        data=rows,
    )


if __name__ == "__main__":
    main()
