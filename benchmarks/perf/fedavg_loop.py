"""FedAvg in fedimb (Flower simulation, and ``runtime=in_process``) against a plain
single-process PyTorch loop.

Both sides run the identical local training — same model initialisation, partition,
mini-batch order, optimiser and steps (``fedimb.core.training.train_epochs``) — so the
difference is the framework: Flower messaging, Ray actors, serialisation (simulation),
or only fedimb's own server loop, checks and records (in-process, 2 torch threads like
the fastest plain loop).

Writes ``<out>/perf_fedavg.md`` (table) and ``<out>/perf_fedavg.png`` (time per round), and the
table with its notes to ``docs/tables/perf_fedavg.md`` (docs/benchmarks/performance.md).

    python benchmarks/perf/fedavg_loop.py [--rounds 6] [--clients 20] [--out results/perf]
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.perf.measure import MEMORY_INTERVAL, run_measured
from fedimb.app import config
from fedimb.app.build import as_tensors, experiment_data, new_model
from fedimb.core.aggregate import weighted_average
from fedimb.core.models import get_weights, set_weights
from fedimb.core.training import (
    TrainConfig,
    evaluate_model,
    seeded_generator,
    train_cross_entropy,
)


def overrides(args: argparse.Namespace) -> list[str]:
    return [
        "method=fedavg",
        "dataset=mnist5k",
        "partition=pathological",
        "dropout=none",
        f"num_clients={args.clients}",
        f"num_rounds={args.rounds}",
        "train.local_epochs=1",
        f"seed={args.seed}",
    ]


#: the simulation's actors: one per CPU (one CPU per client, the default)
ACTORS = psutil.cpu_count() or 1

# in_process first: the simulation's Ray processes take a while to wind down after it ends
RUNTIMES = {
    "in_process": (
        "fedimb (runtime=in_process, 2 torch threads)",
        ["runtime=in_process", "runtime.torch_threads=2"],
    ),
    "simulation": ("fedimb (Flower simulation, 1 thread per client)", []),
}


def run_fedimb(args: argparse.Namespace, out: Path, runtime: str) -> dict:
    """The experiment through the front end, as a user runs it."""
    return run_measured([*overrides(args), *RUNTIMES[runtime][1]], out / "runs")


def run_plain(args: argparse.Namespace, threads: int) -> dict:
    """The same FedAvg rounds in one process with a plain loop; like the fedimb server
    (``evaluation.every = 1``) it tests the global model after every round."""
    torch.set_num_threads(threads)
    cfg = config.compose(overrides(args))
    data = experiment_data(cfg)
    x, y = as_tensors(data.dataset.x_train, data.dataset.y_train)
    model = new_model(cfg, data.dataset)
    hp = TrainConfig.from_mapping(cfg.train)
    weights = get_weights(model)
    xt, yt = as_tensors(data.dataset.x_test, data.dataset.y_test)
    round_seconds = []
    for server_round in range(1, args.rounds + 1):
        start = time.perf_counter()
        updates, sizes = [], []
        for pid in range(args.clients):
            set_weights(model, weights)
            indices = torch.from_numpy(data.partition.indices[pid])
            generator = seeded_generator(args.seed, server_round, pid)
            train_cross_entropy(model, x, y, indices, hp, generator)
            updates.append(get_weights(model))
            sizes.append(len(indices))
        weights = weighted_average(updates, sizes)
        set_weights(model, weights)
        accuracy = evaluate_model(model, xt, yt, data.dataset.num_classes)["accuracy"]
        round_seconds.append(time.perf_counter() - start)
    return {"round_seconds": round_seconds, "final_accuracy": accuracy, "threads": threads}


def model_floats(args: argparse.Namespace) -> int:
    """The number of values in the experiment's model (what every message carries)."""
    cfg = config.compose(overrides(args))
    model = new_model(cfg, experiment_data(cfg).dataset)
    return int(sum(p.numel() for p in model.state_dict().values()))


def run_floor(args: argparse.Namespace, floats: int) -> dict:
    """Flower's engine alone: the simulation's launch with the same nodes, rounds and
    messages (a model of ``floats`` values each way) and no work, its replies collected as
    fedimb's ServerApp collects them (:mod:`flower_floor`); its seconds per round."""
    script = Path(__file__).resolve().parent / "flower_floor.py"
    command = [sys.executable, str(script), "--nodes", str(args.clients), "--rounds"]
    command += [str(args.rounds), "--model-floats", str(floats), "--prompt-replies"]
    lines = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    seconds = [float(m) for m in re.findall(r"^round \d+/ .*seconds=([\d.]+)", lines, re.M)]
    if len(seconds) != args.rounds:
        raise SystemExit(
            f"flower_floor.py printed {len(seconds)} of {args.rounds} rounds:\n{lines}"
        )
    return {"round_seconds": seconds, "floats": floats}


def write_report(args, out: Path, feds: dict[str, dict], plains: list[dict], floor: dict) -> Path:
    fed = feds["simulation"]
    steady = {
        runtime: float(np.mean(run["round_wall_seconds"][1:])) for runtime, run in feds.items()
    }
    best_plain = min(plains, key=lambda p: np.mean(p["round_seconds"][1:]))
    steady_plain = float(np.mean(best_plain["round_seconds"][1:]))
    lines = [
        "# FedAvg: fedimb simulation vs a plain PyTorch loop",
        "",
        f"{args.clients} clients, all participating, 1 local epoch (B = 50, SGD), mnist5k, cnn28, "
        f"{args.rounds} rounds, seed {args.seed}.",
        f"Machine: {platform.processor() or platform.machine()}, {psutil.cpu_count()} CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; torch {torch.__version__}.",
        "",
        "| | seconds per round (rounds 2+, wall clock) | first round | final accuracy |",
        "|---|---|---|---|",
    ]
    for runtime, run in feds.items():
        lines.append(
            f"| {RUNTIMES[runtime][0]} | {steady[runtime]:.2f} | {run['round_seconds'][0]:.2f} | "
            f"{run['final_accuracy']:.4f} |"
        )
    for p in plains:
        lines.append(
            f"| plain loop, {p['threads']} torch thread(s) | {np.mean(p['round_seconds'][1:]):.2f} "
            f"| {p['round_seconds'][0]:.2f} | {p['final_accuracy']:.4f} |"
        )
    floor_steady = float(np.mean(floor["round_seconds"][1:]))
    lines.append(
        f"| Flower alone: the same messages, no work (`flower_floor.py`) | {floor_steady:.2f} "
        f"| {floor['round_seconds'][0]:.2f} | |"
    )
    one_thread = next(p for p in plains if p["threads"] == 1)
    split = float(np.mean(one_thread["round_seconds"][1:])) / ACTORS
    lines += [
        "",
        "- **Ratio fedimb (simulation) / fastest plain loop, rounds 2+: "
        f"{steady['simulation'] / steady_plain:.2f}x** (target <= 1.15x).",
        *(
            f"- Ratio fedimb ({runtime}) / fastest plain loop, rounds 2+: "
            f"{steady[runtime] / steady_plain:.2f}x."
            for runtime in feds
            if runtime != "simulation"
        ),
        f"- Flower alone, with the {args.clients} messages of a round (a model of "
        f"{floor['floats']:,} values each way, replies collected as fedimb collects them) and "
        f"no work: {floor_steady:.2f} s a round. The 1-thread training split over the "
        f"simulation's {ACTORS} actors ({split:.2f} s) plus that floor is "
        f"{(split + floor_steady) / steady_plain:.2f}x the fastest plain loop; the rest, "
        f"{steady['simulation'] - split - floor_steady:.2f} s a round, is fedimb's (its "
        "aggregation and checks, the central test that overlaps the next round's training) and "
        "the actors' contention for the cores.",
        "- Seconds per round are the wall clock between two round records; a simulation "
        "round's own recorded seconds, which include its central test while the next round "
        f"trains, average {float(np.mean(fed['round_seconds'][1:])):.2f} s.",
        "- Start-up before round 1 (SuperLink, simulation engine, Ray): "
        f"{fed['startup_seconds']:.1f} s; round 1 (Ray actors start, data loads once per actor): "
        f"{fed['round_seconds'][0]:.1f} s.",
        f"- Peak memory of all fedimb processes (PSS, sampled every {MEMORY_INTERVAL:g} s): "
        + ", ".join(f"{run['peak_memory_mb']:.0f} MiB ({runtime})" for runtime, run in feds.items())
        + ".",
        "- Wall time of the whole `fedimb` command: "
        + ", ".join(f"{run['wall_seconds']:.1f} s ({runtime})" for runtime, run in feds.items())
        + ".",
        "",
        "Command: `python benchmarks/perf/fedavg_loop.py "
        f"--rounds {args.rounds} --clients {args.clients} --seed {args.seed}`",
    ]
    table = out / "perf_fedavg.md"
    table.write_text("\n".join(lines) + "\n")
    common.publish_in_docs("perf_fedavg", common.part(lines, "| |"))

    fig, ax = common.figure(figsize=(7, 4))
    rounds = np.arange(1, args.rounds + 1)
    for runtime, run in feds.items():
        ax.plot(rounds, run["round_wall_seconds"], marker="o", label=f"fedimb ({runtime})")
    for p in plains:
        ax.plot(
            rounds, p["round_seconds"], marker="s", label=f"plain loop, {p['threads']} thread(s)"
        )
    ax.set(xlabel="round", ylabel="seconds", title="FedAvg time per round")
    ax.grid(alpha=0.3)
    ax.legend()
    common.save_figure(fig, out / "perf_fedavg.png")
    return table


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    feds = {}
    for runtime in RUNTIMES:
        print(f"running fedimb ({runtime}) ...", flush=True)
        feds[runtime] = run_fedimb(args, args.out, runtime)
    plains = []
    for threads in (1, 2):
        print(f"running the plain loop with {threads} thread(s) ...", flush=True)
        plains.append(run_plain(args, threads))
    print("running Flower alone (flower_floor.py) ...", flush=True)
    floor = run_floor(args, model_floats(args))
    table = write_report(args, args.out, feds, plains, floor)
    print(table.read_text())
    print(table)


if __name__ == "__main__":
    main()
