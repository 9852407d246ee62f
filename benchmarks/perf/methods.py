"""Every method in fedimb (Flower simulation) against the same rounds in one process, and
the traffic each method sends.

For each method: one ``fedimb`` run (20 clients, all taking part, 1 local epoch,
mnist5k, cnn28, no dropout), then the same rounds driven in this process by
:class:`fedimb.app.runtimes.in_process.InProcessFederation` — the real strategy and
clients, the same local training, aggregation and evaluation, without SuperLink, messages
or Ray. The ratio of the time per round (rounds 2+) is the framework's cost for that method. The
traffic (bytes down and up, per round and per client that trained) comes from the run's
``metrics.csv``. Writes ``<out>/<name>.md`` and ``<name>.png`` and the docs table ``<name>``
(``--name``, default ``perf_methods``).

    python benchmarks/perf/methods.py [--methods fedavg,rebafl,...] [--rounds 4]
    python benchmarks/perf/methods.py --methods fedavg,fedntd,... --name perf_methods_recent
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.perf.measure import run_measured, steady
from fedimb.app.configuration.compose import group_choices, smoke_overrides
from fedimb.app.runtimes.in_process import InProcessFederation

# What each method sends besides the model parameters. Every client also reports its
# label counts once (client discovery) and, with normalize=latent_cosine, its mean latent.
PAYLOADS = {
    "rebafl": "class prototypes with counts, both ways",
    "astraea": "z-score ratios (down); mediators pass the model from client to client",
    "astraea_aug": "z-score ratios (down)",
    "astraea_sched": "mediators pass the model from client to client",
    "fedconcat": (
        "label distributions (once); stage 3: the K frozen encoders once, then the classifier"
    ),
    "fedconcat_id": "stage 3 as fedconcat; distributions inferred on the server",
    "scaffold": "control variates (down) and their deltas (up), model-sized",
    "lg_fedavg": "only the classifier head travels",
    "perfedavg": "-",
}


def method_overrides(method: str, rounds: int, seed: int) -> list[str]:
    """The benchmark's set-up; multi-stage methods with their shortest stages (``smoke``
    in their YAML) and at least ``rounds`` rounds."""
    smoke = smoke_overrides(method)
    least = max([int(o.split("=")[1]) for o in smoke if o.startswith("num_rounds=")] + [rounds])
    return [
        f"method={method}",
        "dataset=mnist5k",
        "partition=pathological",
        "dropout=none",
        "num_clients=20",
        "train.local_epochs=1",
        f"seed={seed}",
        *[o for o in smoke if not o.startswith("num_rounds=")],
        f"num_rounds={least}",
    ]


def run_in_process(overrides: list[str], rounds: int, threads: int) -> list[float]:
    """Seconds of each of ``rounds`` Flower rounds driven in this process."""
    torch.set_num_threads(threads)
    seconds = []
    with contextlib.redirect_stdout(io.StringIO()):  # the strategy's progress events
        federation = InProcessFederation(overrides)
        for server_round in range(1, rounds + 1):
            start = time.perf_counter()
            federation.round(server_round)
            seconds.append(time.perf_counter() - start)
    return seconds


def measure(method: str, args: argparse.Namespace) -> dict:
    overrides = method_overrides(method, args.rounds, args.seed)
    fed = run_measured(overrides, args.out / "runs" / method)
    flower_rounds = len(fed["round_seconds"])
    plain = {t: run_in_process(overrides, flower_rounds, t) for t in (1, 2)}
    best = min(plain, key=lambda t: steady(plain[t]))
    per_client = [
        (u + d) / max(n, 1) for u, d, n in zip(fed["bytes_up"], fed["bytes_down"], fed["succeeded"])
    ]
    return {
        "method": method,
        "rounds": flower_rounds,
        "fedimb": steady(fed["round_wall_seconds"]),
        "first_round": fed["round_seconds"][0],
        "plain": steady(plain[best]),
        "plain_threads": best,
        "mb_round": float(np.mean(np.add(fed["bytes_up"], fed["bytes_down"]))) / 1e6,
        "kb_down_client": float(
            np.mean(np.divide(fed["bytes_down"], np.maximum(fed["succeeded"], 1)))
        )
        / 1e3,
        "kb_up_client": float(np.mean(np.divide(fed["bytes_up"], np.maximum(fed["succeeded"], 1))))
        / 1e3,
        "kb_client": float(np.mean(per_client)) / 1e3,
        "peak_memory_mb": fed["peak_memory_mb"],
        "run_dir": fed["run_dir"],
    }


def progress_line(r: dict) -> str:
    """One measured method, as the progress output shows it."""
    return (
        f"  {r['fedimb']:.2f} s/round vs {r['plain']:.2f} in one process; {r['kb_client']:.0f} KB "
        "per client"
    )


def write_outputs(results: list[dict], args: argparse.Namespace) -> Path:
    fedavg_kb = next((r["kb_client"] for r in results if r["method"] == "fedavg"), None)
    lines = [
        "# Time per round and traffic of every method: fedimb simulation vs the same rounds in "
        "one process",
        "",
        "20 clients, all taking part, 1 local epoch, mnist5k, cnn28, no dropout, seed "
        f"{args.seed}; {args.rounds} rounds (synchronization rounds for Astraea); multi-stage "
        "methods with the settings of their YAML's `smoke` list (Astraea: gamma 2, one mediator "
        "epoch; FedConcat: K = 2, 1 classifier round).",
        f"Machine: {platform.machine()}, {psutil.cpu_count()} CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; torch {torch.__version__}. The "
        "one-process loop is the faster of 1 and 2 torch threads.",
        "",
        "| method | Flower rounds | fedimb s/round (rounds 2+, wall clock) | one process s/round "
        "| ratio | fedimb round 1 (s) | MB per round | KB down / up per client | vs FedAvg "
        "| peak memory (MiB) | sent besides the model |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        versus = f"{r['kb_client'] / fedavg_kb:.2f}x" if fedavg_kb else "-"
        lines.append(
            f"| {r['method']} | {r['rounds']} | {r['fedimb']:.2f} | {r['plain']:.2f} | "
            f"{r['fedimb'] / r['plain']:.2f}x | {r['first_round']:.1f} | {r['mb_round']:.1f} | "
            f"{r['kb_down_client']:.0f} / {r['kb_up_client']:.0f} | {versus} | "
            f"{r['peak_memory_mb']:.0f} | {PAYLOADS.get(r['method'], '-')} |"
        )
    ratios = [r["fedimb"] / r["plain"] for r in results]
    lines += [
        "",
        f"Median ratio {np.median(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x).",
        "",
        "Command: `python benchmarks/perf/methods.py --methods "
        f"{','.join(r['method'] for r in results)} --rounds {args.rounds} --seed {args.seed}`",
    ]
    fig, ax = common.figure(figsize=(9, 4))
    x = np.arange(len(results))
    ax.bar(x - 0.2, [r["fedimb"] for r in results], 0.4, label="fedimb (simulation)")
    ax.bar(x + 0.2, [r["plain"] for r in results], 0.4, label="one process")
    ax.set_xticks(x, [r["method"] for r in results], rotation=60, ha="right", fontsize=8)
    ax.set(ylabel="seconds per round (rounds 2+)", title="Time per round by method")
    ax.legend()
    common.save_figure(fig, args.out / f"{args.name}.png")
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    points = [
        {"method": r["method"], "fedimb_seconds": r["fedimb"], "one_process_seconds": r["plain"]}
        for r in results
    ]
    return common.publish_results(args.out / f"{args.name}.md", args.name, lines, data=points)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--methods", default=",".join(group_choices("method")))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument("--fresh", action="store_true", help="measure every method again")
    parser.add_argument(
        "--name",
        default="perf_methods",
        help="the docs table it writes (perf_methods_recent: the methods added since the table "
        "of every method was measured)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # measurements of earlier calls with the same settings are kept, so a stopped run resumes
    cache_file = args.out / f"{args.name}.cache.json"
    settings = {"rounds": args.rounds, "seed": args.seed}
    cache = json.loads(cache_file.read_text()) if cache_file.exists() and not args.fresh else {}
    results = []
    for method in args.methods.split(","):
        if cache.get(method, {}).get("settings") == settings:
            results.append(cache[method]["result"])
            continue
        print(f"{method} ...", flush=True)
        results.append(measure(method, args))
        cache[method] = {"settings": settings, "result": results[-1]}
        cache_file.write_text(json.dumps(cache, indent=1))
        print(progress_line(results[-1]), flush=True)
    write_outputs(results, args)


if __name__ == "__main__":
    main()
