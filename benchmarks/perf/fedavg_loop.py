"""FedAvg in fedimb (Flower simulation, and ``runtime=in_process``) against a plain
single-process PyTorch loop, and against Flower alone.

Both sides run the identical local training — same model initialisation, partition,
mini-batch order, optimiser and steps (``fedimb.core.training.train_epochs``) — so the
difference is the framework: Flower messaging, Ray actors, serialisation (simulation),
or only fedimb's own server loop, checks and records (in-process, 2 torch threads like
the fastest plain loop). Flower alone (:mod:`flower_floor`) sends the same messages
with no work in them: what Flower's engine costs a round whatever runs on it. Each of
``--repeats`` calls runs every row once in turn (this machine's speed drifts by 10–20%
from minute to minute); the table gives the median and the range.

Writes ``<out>/perf_fedavg.md`` (table) and ``<out>/perf_fedavg.png`` (time per round), and the
table with its notes to ``docs/tables/perf_fedavg.md`` (docs/benchmarks/performance.md).

    python benchmarks/perf/fedavg_loop.py [--rounds 6] [--clients 20] [--repeats 3]
                                          [--out results/perf]
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
from fedimb.app.configuration import compose as config
from fedimb.app.configuration.build import as_tensors, experiment_data, new_model
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
#: the table's rows: fedimb's runtimes, the plain loops and Flower's floor
ROW_NAMES = {
    **{runtime: name for runtime, (name, _) in RUNTIMES.items()},
    "plain-1": "plain loop, 1 torch thread",
    "plain-2": "plain loop, 2 torch threads",
    "floor": "Flower alone: the same messages, no work (`flower_floor.py`)",
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


def steady_of(run: dict) -> float:
    """A run's mean seconds per round from round 2 on (wall clock for fedimb's runs)."""
    return float(np.mean(run.get("round_wall_seconds", run["round_seconds"])[1:]))


def spread(values: list[float]) -> str:
    """``median (min–max)`` of the calls, or the one value."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def write_report(args, out: Path, calls: list[dict[str, dict]]) -> Path:
    """The table over ``calls`` (one dict of runs per call: each fedimb runtime,
    ``plain-1``, ``plain-2`` and ``floor``), medians over the calls with their range."""
    steady = {name: [steady_of(call[name]) for call in calls] for name in calls[0]}
    median = {name: float(np.median(values)) for name, values in steady.items()}
    plain = min(("plain-1", "plain-2"), key=lambda name: median[name])
    ratios = [steady_of(call["simulation"]) / steady_of(call[plain]) for call in calls]
    first = {name: [call[name]["round_seconds"][0] for call in calls] for name in calls[0]}
    fed = calls[0]["simulation"]
    split = median["plain-1"] / ACTORS
    lines = [
        "# FedAvg: fedimb simulation vs a plain PyTorch loop",
        "",
        f"{args.clients} clients, all participating, 1 local epoch (B = 50, SGD), mnist5k, cnn28, "
        f"{args.rounds} rounds, seed {args.seed}; {len(calls)} calls, each running every row "
        "once in turn: the median over the calls, their range in brackets.",
        f"Machine: {platform.processor() or platform.machine()}, {psutil.cpu_count()} CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; torch {torch.__version__}.",
        "",
        "| | seconds per round (rounds 2+, wall clock) | first round | final accuracy |",
        "|---|---|---|---|",
    ]
    for name in calls[0]:
        accuracy = calls[0][name].get("final_accuracy")
        lines.append(
            f"| {ROW_NAMES[name]} | {spread(steady[name])} | {spread(first[name])} | "
            f"{'' if accuracy is None else f'{accuracy:.4f}'} |"
        )
    lines += [
        "",
        f"- **Ratio fedimb (simulation) / fastest plain loop, rounds 2+: "
        f"{median['simulation'] / median[plain]:.2f}x** (target <= 1.15x); call by call "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + ".",
        f"- Ratio fedimb (in_process) / fastest plain loop, rounds 2+: "
        f"{median['in_process'] / median[plain]:.2f}x.",
        f"- Flower alone, with the {args.clients} messages of a round (a model of "
        f"{calls[0]['floor']['floats']:,} values each way, replies collected as fedimb collects "
        f"them) and no work: {median['floor']:.2f} s a round. The 1-thread training split over "
        f"the simulation's {ACTORS} actors ({split:.2f} s) plus that floor is "
        f"{(split + median['floor']) / median[plain]:.2f}x the fastest plain loop; the rest, "
        f"{median['simulation'] - split - median['floor']:.2f} s a round, is fedimb's server "
        "(its aggregation and checks, and the central test, which runs while the next round's "
        "clients train and so takes cores from them) and the actors' contention for the cores.",
        "- Seconds per round are the wall clock between two round records; a simulation "
        "round's own recorded seconds, which include its central test while the next round "
        f"trains, average {float(np.mean(fed['round_seconds'][1:])):.2f} s (first call).",
        "- Start-up before round 1 (SuperLink, simulation engine, Ray): "
        f"{fed['startup_seconds']:.1f} s; round 1 (Ray actors start, data loads once per actor): "
        f"{fed['round_seconds'][0]:.1f} s (first call).",
        f"- Peak memory of all fedimb processes (PSS, sampled every {MEMORY_INTERVAL:g} s): "
        + ", ".join(f"{calls[0][name]['peak_memory_mb']:.0f} MiB ({name})" for name in RUNTIMES)
        + " (first call).",
        "",
        "Command: `python benchmarks/perf/fedavg_loop.py "
        f"--rounds {args.rounds} --clients {args.clients} --seed {args.seed} "
        f"--repeats {len(calls)}`",
    ]
    table = out / "perf_fedavg.md"
    table.write_text("\n".join(lines) + "\n")
    points = [  # the figure's: medians over the calls
        {
            "setting": ROW_NAMES[name].replace("`", ""),
            "seconds_per_round": float(np.median(steady[name])),
            "first_round_seconds": float(np.median(first[name])),
        }
        for name in calls[0]
    ]
    common.publish_in_docs("perf_fedavg", common.part(lines, "| |"), data=points)

    fig, ax = common.figure(figsize=(7, 4))
    rounds = np.arange(1, args.rounds + 1)
    for name in calls[0]:
        per_round = np.median(
            [call[name].get("round_wall_seconds", call[name]["round_seconds"]) for call in calls],
            axis=0,
        )
        ax.plot(rounds, per_round, marker="o", label=ROW_NAMES[name].replace("`", ""))
    ax.set(xlabel="round", ylabel="seconds (median over the calls)", title="FedAvg time per round")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    common.save_figure(fig, out / "perf_fedavg.png")
    return table


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=3, help="calls, each running every row once in turn"
    )
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    floats = model_floats(args)
    calls = []
    for call in range(1, args.repeats + 1):
        runs: dict[str, dict] = {}
        for runtime in RUNTIMES:
            print(f"call {call}: fedimb ({runtime}) ...", flush=True)
            runs[runtime] = run_fedimb(args, args.out, runtime)
        for threads in (1, 2):
            print(f"call {call}: the plain loop with {threads} thread(s) ...", flush=True)
            runs[f"plain-{threads}"] = run_plain(args, threads)
        print(f"call {call}: Flower alone (flower_floor.py) ...", flush=True)
        runs["floor"] = run_floor(args, floats)
        calls.append(runs)
    table = write_report(args, args.out, calls)
    print(table.read_text())
    print(table)


if __name__ == "__main__":
    main()
