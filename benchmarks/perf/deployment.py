"""Round latency of a deployed federation: a local SuperLink and N SuperNodes.

For each N: start the federation (``fedimb.cli.federation.local``), run FedAvg through the
front end (``runtime=deployment``, one partition per node, all nodes every round) and
read each round's wall time from the run's ``events.jsonl``. Writes
``<out>/deployment_latency.md`` and its table to ``docs/tables/perf_deployment.md``.

    python benchmarks/perf/deployment.py --nodes 3,10 [--rounds 4] [--secure]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.cli.federation.local import LocalFederation


def measure(nodes: int, rounds: int, secure: bool, overrides: list[str], workdir: Path) -> dict:
    start = time.perf_counter()
    with LocalFederation(workdir / f"fed{nodes}", nodes, secure=secure) as fed:
        up = time.perf_counter() - start
        result = common.run_fedimb(
            *fed.runtime_overrides(),
            f"num_clients={nodes}",
            f"num_rounds={rounds}",
            "dropout=none",
            "train.local_epochs=1",
            *overrides,
            f"output.root={workdir / f'out{nodes}'}",
        )
    if result.returncode != 0:
        raise SystemExit(f"{nodes} nodes: {result.stderr.strip()[-500:]}")
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    seconds = {e["round"]: e["seconds"] for e in events if e["event"] == "round" and e["round"] > 0}
    return {
        "nodes": nodes,
        "federation_up": up,
        "round1": seconds[1],
        "later": float(np.mean([s for r, s in seconds.items() if r >= 2])),
        "total": time.perf_counter() - start,
    }


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--nodes", default="3,10")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--secure", action="store_true", help="TLS + SuperNode authentication")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument("--code", default="now", help="what the figure calls the code measured")
    parser.add_argument("overrides", nargs="*", default=["dataset=mnist5k"])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        for n in (int(x) for x in args.nodes.split(",")):
            rows.append(measure(n, args.rounds, args.secure, args.overrides, Path(tmp)))
            print(
                f"  {n} nodes: round 1 {rows[-1]['round1']:.1f}s, rounds 2+ "
                f"{rows[-1]['later']:.1f}s",
                flush=True,
            )
    lines = [
        "# Deployment round latency",
        "",
        f"FedAvg, `{' '.join(args.overrides)}`, 1 local epoch, every node every round, "
        f"{args.rounds} rounds, "
        f"{'TLS + SuperNode authentication' if args.secure else 'insecure'}, all processes on one "
        f"machine ({common.machine()}).",
        "",
        "| SuperNodes | federation start (s) | round 1 (s) | rounds 2+ (s per round) "
        "| whole run (s) |",
        "|---|---|---|---|---|",
        *(
            f"| {r['nodes']} | {r['federation_up']:.1f} | {r['round1']:.1f} | {r['later']:.1f} | "
            f"{r['total']:.1f} |"
            for r in rows
        ),
        "",
        f"Command: `python benchmarks/perf/deployment.py --nodes {args.nodes} --rounds "
        f"{args.rounds}{' --secure' if args.secure else ''} {' '.join(args.overrides)}`",
    ]
    points = [
        {"nodes": r["nodes"], "code": args.code, "round1": r["round1"], "later": r["later"]}
        for r in rows
    ]
    common.publish_results(
        args.out / "deployment_latency.md", "perf_deployment", lines, data=points
    )


if __name__ == "__main__":
    main()
