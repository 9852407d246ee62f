"""Methods beside FedAvg under two local optimisers, on a small set-up that runs in minutes:
the trajectories, their table, the arguments and the results table that
:mod:`distillation_regimes` and :mod:`regulariser_regimes` share.

The set-up: digits, the default pathological partition (2 classes per client), 20
clients, 5 local epochs and Bernoulli dropout p = 0.5, in process; the regimes
(:data:`REGIMES`): local SGD at lr 0.01 without momentum (fedimb's default) and with
momentum 0.9 (the setting of most label-skew papers' code), which lets the local models
drift further from the global one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from benchmarks import common
from fedimb.app.runtimes.in_process import InProcessFederation

REGIMES = {"no momentum": [], "momentum 0.9": ["train.momentum=0.9"]}
SETUP = ["dataset=digits", "runtime=in_process", "evaluation.every=1"]
SETUP_TEXT = "digits, pathological partition, 20 clients, 5 local epochs, Bernoulli dropout p = 0.5"
CHECKPOINTS = (10, 20, 30, 40)


def trajectories(
    variants: dict[str, list[str]],
    rounds: int,
    seeds: int,
    extra: Callable[[dict], dict] | None = None,
) -> list[dict]:
    """Test accuracy after every round, per regime, variant (name -> its overrides) and
    seed; ``extra`` adds fields read from each round's record."""
    rows = []
    for regime, optimiser in REGIMES.items():
        for name, overrides in variants.items():
            for seed in range(seeds):
                fed = InProcessFederation([*SETUP, *optimiser, *overrides, f"seed={seed}"])
                for r in range(1, rounds + 1):
                    record = fed.round(r)
                    accuracy = float(record["test"]["accuracy"])
                    row = {"regime": regime, "method": name, "seed": seed, "round": r}
                    rows.append({**row, "accuracy": accuracy, **(extra(record) if extra else {})})
                print(f"  {regime}, {name}, seed {seed}: {accuracy:.3f}", flush=True)
    return rows


def trajectory_table(
    rows: list[dict], variants: list[str], seeds: int, reference: str = "fedavg"
) -> list[str]:
    """Per regime and variant: the mean accuracy at the checkpoints, and the difference to
    ``reference`` paired by seed at the last round and over every round (how much sooner
    it learns)."""
    accuracy = {(r["regime"], r["method"], r["seed"], r["round"]): r["accuracy"] for r in rows}
    last = max(r["round"] for r in rows)
    checkpoints = [c for c in CHECKPOINTS if c <= last]

    def at(regime: str, method: str, r: int) -> list[float]:
        return [accuracy[regime, method, seed, r] for seed in range(seeds)]

    def over_rounds(regime: str, method: str) -> list[float]:
        return [
            float(np.mean([accuracy[regime, method, seed, r] for r in range(1, last + 1)]))
            for seed in range(seeds)
        ]

    lines = [
        "| local SGD | method | "
        + " | ".join(f"round {c}, %" for c in checkpoints)
        + f" | round {last}, % [95% CI] | Δ vs {reference} at round {last} [95% CI], p "
        f"| Δ vs {reference} over every round [95% CI], p |",
        "|---|---|" + "---|" * (len(checkpoints) + 3),
    ]
    for regime in REGIMES:
        for method in variants:
            means = " | ".join(f"{100 * np.mean(at(regime, method, c)):.1f}" for c in checkpoints)
            final, base = at(regime, method, last), at(regime, reference, last)
            lines.append(
                f"| {regime} | {method} | {means} | {common.interval(final)} "
                f"| {common.paired(final, base)} "
                f"| {common.paired(over_rounds(regime, method), over_rounds(regime, reference))} |"
            )
    return lines


def parse_arguments(doc: str, name: str) -> argparse.Namespace:
    """``--out``, ``--rounds`` and ``--seeds`` of the regime script ``name``; one torch
    thread, as the runs of a benchmark take a core each."""
    parser = common.argument_parser(doc)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / name)
    parser.add_argument("--rounds", type=int, default=CHECKPOINTS[-1])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    return args


def write_results_table(
    args: argparse.Namespace, name: str, title: str, trajectory: list[str], measured: list[str]
) -> None:
    """``<out>/table.md``: the set-up, the trajectory table, the measured table (a caption
    line, then the table) and the command of the script ``name`` that wrote them."""
    seeds = f"seeds 0-{args.seeds - 1}"
    command = f"python benchmarks/accuracy/{name}.py --rounds {args.rounds} --seeds {args.seeds}"
    common.publish_table(
        args.out / "table.md",
        [
            f"# {title}",
            "",
            f"{SETUP_TEXT}; test accuracy; {seeds}. Machine: {common.machine()}.",
            "",
            *trajectory,
            "",
            *measured,
            "",
            f"Command: `{command}`",
        ],
    )
