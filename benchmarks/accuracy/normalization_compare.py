"""Original vs contribution-normalised final accuracy of several base algorithms.

For each Dirichlet alpha, method and seed: one run with ``normalize=none`` and one with
``normalize=latent_cosine`` (+experiment=contrib_mnist5k settings unless overridden).
Writes ``<out>/table.md`` with mean ± std over seeds and the difference.

    python benchmarks/accuracy/normalization_compare.py [--alphas 0.1,0.5] [--seeds 0,1,2] [--jobs 2] [-- overrides]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.accuracy.compare_methods import ensure_runs  # noqa: E402
from benchmarks.common import publish_table  # noqa: E402
from fedimb.comparison import mean_std  # noqa: E402

METHODS = "fedavg,fedprox,scaffold,fednova,fedbabu,fedavgm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alphas", default="0.1,0.5")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "normalization_mnist5k")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one core each with runtime=in_process)")
    parser.add_argument("overrides", nargs="*", default=["+experiment=contrib_mnist5k"])
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [
        "# Contribution normalisation on mnist5k: original vs normalised final accuracy (%)",
        "",
        f"Set-up: `{' '.join(args.overrides)}` (20 clients, 2 local epochs, Adam 0.001, B = 64, 30 rounds); "
        f"seeds {args.seeds}.",
        "",
        "| alpha | method | original | normalised | difference (points) |",
        "|---|---|---|---|---|",
    ]
    cells = [(alpha, method, normalize, seed) for alpha in args.alphas.split(",")
             for method in args.methods.split(",") for normalize in ("none", "latent_cosine") for seed in seeds]
    folders = ensure_runs([(args.out / f"alpha{alpha}" / normalize, method, seed,
                            [*args.overrides, f"partition.alpha={alpha}", f"normalize={normalize}"])
                           for alpha, method, normalize, seed in cells], args.jobs)
    final = {cell: json.loads((folder / "summary.json").read_text())["final_accuracy"]
             for cell, folder in zip(cells, folders)}
    for alpha in args.alphas.split(","):
        for method in args.methods.split(","):
            finals = {normalize: [final[alpha, method, normalize, s] for s in seeds]
                      for normalize in ("none", "latent_cosine")}
            diff = [n - o for o, n in zip(finals["none"], finals["latent_cosine"])]
            lines.append(f"| {alpha} | {method} | {mean_std(finals['none'])} | {mean_std(finals['latent_cosine'])} "
                         f"| {mean_std(diff)} |")
    lines += ["", f"Command: `python benchmarks/accuracy/normalization_compare.py --alphas {args.alphas} --seeds {args.seeds} "
                  f"-- {' '.join(args.overrides)}`"]
    publish_table(args.out / "table.md", lines)


if __name__ == "__main__":
    main()
