"""FedAvg with many virtual clients: time per round and peak memory of all processes.

For each federation size N: one ``fedimb`` run on mnist5k (IID split, so 1,000 clients
hold 4 training images each), a fraction of the clients (10%) sampled per round, 1 local
epoch, no dropout. Every round trains on about the same number of images (the fraction
of 4,000), so the time per round from round 2 on should follow the sampled clients, not
N. The simulation starts one virtual node per client up to 100, then a pool of 100
(``runtime.nodes=auto``). Writes
``<out>/<name>.md`` and ``<name>.png`` (name ``perf_scale``), and the table to
``docs/tables/<name>.md`` where the docs include one of that name: ``perf_scale`` and
``perf_scale_5pct`` (``--clients 1000 --fraction 0.05 --name perf_scale_5pct``).

    python benchmarks/perf/scale.py [--clients 100,500,1000] [--fraction 0.1] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.perf.measure import run_measured, steady

MEMORY_TARGET_MB = 4096


def overrides(clients: int, fraction: float, rounds: int, seed: int) -> list[str]:
    return [
        "method=fedavg",
        "dataset=mnist5k",
        "partition=iid",
        "dropout=none",
        f"num_clients={clients}",
        f"fraction_fit={fraction}",
        f"num_rounds={rounds}",
        "train.local_epochs=1",
        f"seed={seed}",
    ]


def write_outputs(results: list[dict], args: argparse.Namespace) -> Path:
    lines = [
        "# FedAvg with many virtual clients (Flower simulation)",
        "",
        f"mnist5k, IID, {args.fraction:.0%} of the clients per round, 1 local epoch, no dropout, "
        f"{args.rounds} rounds, seed {args.seed}.",
        f"Machine: {platform.machine()}, {psutil.cpu_count()} CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB.",
        "",
        "| clients | sampled per round | start-up (s) | round 1 (s) | s/round (rounds 2+) | s "
        "per sampled client | peak memory, all processes (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['clients']} | {r['sampled']} | {r['startup_seconds']:.1f} | "
            f"{r['round_seconds'][0]:.1f} | {r['steady']:.2f} | {r['steady'] / r['sampled']:.3f} | "
            f"{r['peak_memory_mb']:.0f} |"
        )
    largest = results[-1]
    lines += [
        "",
        f"- Peak memory at {largest['clients']} clients: {largest['peak_memory_mb']:.0f} MiB "
        f"(target < {MEMORY_TARGET_MB} MiB: "
        f"{'met' if largest['peak_memory_mb'] < MEMORY_TARGET_MB else 'missed'}).",
        "- Virtual nodes: one per client up to 100, then a pool of 100 (`runtime.nodes=auto`); "
        "no node is asked anything before round 1.",
        "",
        "Command: `python benchmarks/perf/scale.py --clients "
        f"{','.join(str(r['clients']) for r in results)} --fraction {args.fraction} --rounds "
        f"{args.rounds} --seed {args.seed} --name {args.name}`",
    ]
    fig, (left, right) = common.figure(1, 2, figsize=(9, 3.8))
    xs = [r["clients"] for r in results]
    left.plot(xs, [r["steady"] for r in results], marker="o", label="rounds 2+")
    left.plot(xs, [r["round_seconds"][0] for r in results], marker="s", label="round 1")
    left.set(
        xlabel=f"virtual clients ({args.fraction:.0%} sampled)",
        ylabel="seconds per round",
        xscale="log",
    )
    left.legend()
    right.plot(xs, [r["peak_memory_mb"] for r in results], marker="o")
    right.axhline(MEMORY_TARGET_MB, color="grey", linestyle="--", label="target")
    right.set(xlabel="virtual clients", ylabel="peak memory (MiB)", xscale="log")
    right.legend()
    for ax in (left, right):
        ax.grid(alpha=0.3)
    common.save_figure(fig, args.out / f"{args.name}.png")
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    points = [
        {
            "clients": r["clients"],
            "sampled": r["sampled"],
            "startup_seconds": r["startup_seconds"],
            "round1_seconds": r["round_seconds"][0],
            "seconds_per_round": r["steady"],
            "peak_memory_mb": r["peak_memory_mb"],
        }
        for r in results
    ]
    return common.publish_results(
        args.out / f"{args.name}.md", args.name, lines, new=False, data=points
    )


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--clients", default="100,500,1000")
    parser.add_argument("--fraction", type=float, default=0.1, help="clients sampled per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--name", default="perf_scale", help="name of the table and plot files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for clients in (int(c) for c in args.clients.split(",")):
        print(f"{clients} clients ...", flush=True)
        run = run_measured(
            overrides(clients, args.fraction, args.rounds, args.seed),
            args.out / "runs" / f"scale{clients}",
        )
        run.update(
            clients=clients, sampled=int(max(run["sampled"])), steady=steady(run["round_seconds"])
        )
        results.append(run)
        print(
            f"  round 1 {run['round_seconds'][0]:.1f} s, then {run['steady']:.2f} s/round, "
            f"peak {run['peak_memory_mb']:.0f} MiB",
            flush=True,
        )
    write_outputs(results, args)


if __name__ == "__main__":
    main()
