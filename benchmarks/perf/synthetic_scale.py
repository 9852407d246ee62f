"""Cross-device scale on Synthetic(1, 1): 100, 1,000 and 10,000 devices, 10 sampled per round.

For each runtime (``in_process``, ``simulation``), method (FedAvg, and SCAFFOLD for its
per-client control variates) and number of devices N: one ``fedimb`` run on
Synthetic(1, 1) (one device per client, ``dataset.data_seed=0``), ``fraction_fit`` = 10/N,
no dropout, ``model=mclr``, 1 local epoch, ``evaluation.local_every=0`` (the local
evaluation, timed apart as the ``federated_eval`` phase where it is on). Before the runs
the draw is generated once
into the data cache (its time is the "draw" column): every process then memory-maps it
and reads only the rows of the devices it trains, and the global test set when it tests.

Round 1 also asks every node once for its client id and label histogram (``discover``,
one message per device); rounds 2+ train only the 10 sampled devices, so their time
should not grow with N. Peak memory is the proportional set size (PSS) of all the run's
processes, sampled every 0.2 s (mapped pages shared by processes are counted once).
Writes ``<out>/synthetic_scale.md`` and ``.json`` and ``docs/tables/synthetic_scale.md``.

    python benchmarks/perf/synthetic_scale.py [--devices 100,1000,10000]
                                              [--runtimes in_process,simulation]
                                              [--methods fedavg,scaffold] [--rounds 5]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.perf.measure import per_round, run_measured, steady

SAMPLED = 10
MEMORY_TARGET_MB = 4096


def overrides(runtime: str, method: str, devices: int, rounds: int) -> list[str]:
    return [
        f"runtime={runtime}",
        f"method={method}",
        "dataset=synthetic",
        "partition=natural",
        "model=mclr",
        "dataset.alpha=1.0",
        "dataset.beta=1.0",
        "dataset.data_seed=0",
        f"num_clients={devices}",
        f"fraction_fit={SAMPLED / devices}",
        "dropout=none",
        f"num_rounds={rounds}",
        "train.local_epochs=1",
        "evaluation.local_every=0",
        "seed=0",
    ]


def draw(devices: int) -> tuple[float, int]:
    """The seconds it takes to generate the draw of ``devices`` devices (into a
    temporary folder, so that a cached draw does not hide it), and its samples; the
    run's own draw comes from (or goes to) the data cache."""
    from fedimb.app import config
    from fedimb.app.build import experiment_data
    from fedimb.core.data.datasets import synthetic_spec
    from fedimb.core.data.synthetic import write_devices

    cfg = config.compose(overrides("in_process", "fedavg", devices, 1))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        write_devices(synthetic_spec(cfg.dataset), Path(folder))
        seconds = time.perf_counter() - start
    data = experiment_data(cfg)
    return seconds, len(data.dataset.y_train) + len(data.dataset.y_test)


def measure(args) -> list[dict]:
    devices = [int(d) for d in args.devices.split(",")]
    draws = {n: draw(n) for n in devices}
    results = []
    for runtime in args.runtimes.split(","):
        for method in args.methods.split(","):
            for n in devices:
                print(f"{runtime} {method} {n} devices ...", flush=True)
                run = run_measured(
                    overrides(runtime, method, n, args.rounds),
                    args.out / "runs" / f"synthetic-{runtime}-{method}-{n}",
                )
                discover = per_round(Path(run["run_dir"]), "time", "discover")
                run.update(
                    runtime=runtime,
                    method=method,
                    devices=n,
                    draw_seconds=draws[n][0],
                    samples=draws[n][1],
                    discover_seconds=discover.get(1, 0.0),
                    steady=steady(run["round_seconds"]),
                )
                results.append(run)
                print(
                    f"  round 1 {run['round_seconds'][0]:.1f} s, then {run['steady']:.2f} s/round, "
                    f"peak {run['peak_memory_mb']:.0f} MiB",
                    flush=True,
                )
    (args.out / "synthetic_scale.json").write_text(json.dumps(results, indent=1))
    return results


def table(results: list[dict], args) -> list[str]:
    lines = [
        "# Synthetic(1, 1) with many devices",
        "",
        f"{SAMPLED} devices sampled per round, 1 local epoch, no dropout, {args.rounds} rounds, "
        f"mclr. Machine: {common.machine()}.",
        "",
        "| runtime | method | devices | samples | generating the draw, once per machine (s) | "
        "start-up (s) | round 1 (s) | of which discovery (s) | s/round (rounds 2+) | of which "
        "training (s) | of which global test (s) | peak memory, all processes (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        phases = {
            phase: steady(list(per_round(Path(r["run_dir"]), "time", phase).values()))
            for phase in ("fit", "test")
        }
        lines.append(
            f"| {r['runtime']} | {r['method']} | {r['devices']:,} | {r['samples']:,} | "
            f"{r['draw_seconds']:.1f} | {r['startup_seconds']:.1f} | {r['round_seconds'][0]:.1f} | "
            f"{r['discover_seconds']:.1f} | {r['steady']:.2f} | {phases['fit']:.2f} | "
            f"{phases['test']:.2f} | {r['peak_memory_mb']:.0f} |"
        )
    largest = max(results, key=lambda r: (r["devices"], r["peak_memory_mb"]))
    return lines + [
        "",
        f"- Largest peak at {largest['devices']:,} devices: {largest['peak_memory_mb']:.0f} MiB "
        f"({largest['runtime']}, {largest['method']}; target < {MEMORY_TARGET_MB} MiB: "
        f"{'met' if largest['peak_memory_mb'] < MEMORY_TARGET_MB else 'missed'}).",
        "",
        f"Command: `python benchmarks/perf/synthetic_scale.py --devices {args.devices} --runtimes "
        f"{args.runtimes} --methods {args.methods} --rounds {args.rounds}`",
    ]


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--devices", default="100,1000,10000")
    parser.add_argument("--runtimes", default="in_process,simulation")
    parser.add_argument("--methods", default="fedavg,scaffold")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="write the table again from <out>/synthetic_scale.json, without running",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        results = json.loads((args.out / "synthetic_scale.json").read_text())
    else:
        results = measure(args)
    lines = table(results, args)
    common.publish_results(args.out / "synthetic_scale.md", "synthetic_scale", lines)


if __name__ == "__main__":
    main()
