"""SecAgg+ cost per round in a deployed federation: FedAvg with and without secagg=secaggplus.

For each number of SuperNodes: one local federation (``fedimb.cli.federation.local``), the
same FedAvg run through the front end twice, without SecAgg+ and with it (one partition per
node, every node every round, one local epoch), each round's wall time and fit step read
from the run's ``events.jsonl``, and under SecAgg+ the seconds of each of its four stages
(``extra.secagg.<stage>``). Round 1 starts the ClientApps and is left out. Writes
``<out>/table.md`` and ``<out>/cost.json`` (default ``benchmarks/results/secagg``) and the
table to ``docs/tables/secagg_cost.md``.

``--table-only`` writes nothing but ``docs/tables/secagg_methods.md``: which methods run
under SecAgg+ and why the others are refused, from the methods' declarations
(:mod:`fedimb.app.privacy.secagg_table`).

    python benchmarks/perf/secagg.py [--nodes 3,10] [--rounds 4] [overrides ...]
    python benchmarks/perf/secagg.py --table-only
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.app.privacy.secagg_fit import STAGES
from fedimb.app.privacy.secagg_table import secagg_table
from fedimb.cli.federation.local import LocalFederation


def rounds_of(result, label: str) -> list[dict]:
    """The run's round events after round 1 (its ClientApps' start)."""
    if result.returncode != 0:
        raise SystemExit(f"{label}: {result.stderr.strip()[-500:]}")
    folder = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["event"] == "round" and e["round"] >= 2]


def measure(nodes: int, rounds: int, overrides: list[str], workdir: Path) -> list[dict]:
    """One row per variant (without, with SecAgg+) on one federation of ``nodes`` nodes."""
    rows = []
    with LocalFederation(workdir / f"fed{nodes}", nodes) as fed:
        for variant in ("none", "secaggplus"):
            result = common.run_fedimb(
                *fed.runtime_overrides(),
                f"secagg={variant}",
                f"num_clients={nodes}",
                f"num_rounds={rounds}",
                "dropout=none",
                "train.local_epochs=1",
                *overrides,
                f"output.root={workdir / f'out{nodes}-{variant}'}",
            )
            later = rounds_of(result, f"{nodes} nodes, secagg={variant}")
            row = {
                "nodes": nodes,
                "secagg": variant,
                "round_seconds": float(np.mean([e["seconds"] for e in later])),
                "fit_seconds": float(np.mean([e["timing"]["fit"] for e in later])),
            }
            for stage in STAGES:
                values = [e.get("extra", {}).get(f"secagg.{stage}") for e in later]
                row[stage] = float(np.mean(values)) if None not in values else None
            rows.append(row)
            print(
                f"  {nodes} nodes, secagg={variant}: {row['round_seconds']:.1f}s per round",
                flush=True,
            )
    return rows


def shown(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--nodes", default="3,10")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--out", type=Path, default=common.REPO / "benchmarks" / "results" / "secagg"
    )
    parser.add_argument("--table-only", action="store_true", help="only the methods table")
    parser.add_argument("--note", default="", help="a sentence on the machine's load")
    parser.add_argument("overrides", nargs="*", default=["dataset=mnist5k"])
    args = parser.parse_args()
    if args.table_only:
        common.publish_in_docs("secagg_methods", secagg_table())
        return
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="secagg-") as tmp:
        for n in (int(x) for x in args.nodes.split(",")):
            rows += measure(n, args.rounds, args.overrides, Path(tmp))
    lines = [
        "| SuperNodes | secagg | round (s) | fit step (s) | setup (s) | share keys (s) "
        "| masked vectors (s) | unmask (s) | SecAgg+ cost per round (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    plain = {r["nodes"]: r["round_seconds"] for r in rows if r["secagg"] == "none"}
    for r in rows:
        extra = r["round_seconds"] - plain[r["nodes"]]
        lines.append(
            f"| {r['nodes']} | {r['secagg']} | {r['round_seconds']:.1f} | {r['fit_seconds']:.1f} | "
            + " | ".join(shown(r[s]) for s in STAGES)
            + f" | {'—' if r['secagg'] == 'none' else f'+{extra:.1f}'} |"
        )
    command = f"--nodes {args.nodes} --rounds {args.rounds} {' '.join(args.overrides)}"
    report = [
        "# SecAgg+ cost per round, deployed",
        "",
        f"FedAvg, `{' '.join(args.overrides)}`, 1 local epoch, every node every round, "
        f"mean of rounds 2 to {args.rounds}, SuperLink and SuperNodes as local processes, "
        f"insecure; machine: {common.machine()}. {args.note}".strip(),
        "",
        *lines,
        "",
        f"Command: `python benchmarks/perf/secagg.py {command}`",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    common.publish_results(args.out / "table.md", "secagg_cost", report)


if __name__ == "__main__":
    main()
