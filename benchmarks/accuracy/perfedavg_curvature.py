"""The largest Hessian eigenvalue λ_max along training, to choose Per-FedAvg's inner step α.

Per-FedAvg's update (I − αH)∇f(w − α∇f) points uphill along every curvature direction
with α·λ > 1 (Fallah et al. assume α ≤ 1/L). For each set-up this trains FedAvg in
process (the global model Per-FedAvg's clients start from follows the same kind of
path) and, every few rounds, estimates λ_max of the mean cross-entropy at the global
model on each sampled client's training data (power iteration, exact Hessian-vector
products). Writes ``<out>/table.md`` (per set-up and round: median and largest λ_max over
the clients, and the α = 1/λ_max that it allows), ``<out>/curvature.png`` and the table
to ``docs/tables/perfedavg_curvature.md``.

    python benchmarks/accuracy/perfedavg_curvature.py [--rounds 30] [--every 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.curvature import top_hessian_eigenvalue
from fedimb.core.models import set_weights

#: set-up name -> fedimb overrides (the shipped experiments Per-FedAvg runs in, offline)
SETUPS = {
    "grpfed_mnist5k": ["+experiment=grpfed_mnist5k"],
    "default (pathological mnist5k, SGD 0.01)": [],
}


def client_curvatures(fed: InProcessFederation, pids: list[int], max_samples: int) -> list[float]:
    """λ_max at the current global model on each client's training data (at most
    ``max_samples`` of it, the first ones in its partition)."""
    from flwr.common import parameters_to_ndarrays

    model = fed.run.new_model()
    set_weights(model, parameters_to_ndarrays(fed.parameters))
    model.train()
    x, y = (
        torch.from_numpy(fed.run.data.dataset.x_train),
        torch.from_numpy(fed.run.data.dataset.y_train),
    )
    values = []
    for pid in pids:
        idx = torch.from_numpy(fed.run.data.partition.indices[pid][:max_samples])
        values.append(top_hessian_eigenvalue(model, x[idx], y[idx]))
    return values


def measure(
    overrides: list[str], rounds: int, every: int, seed: int, max_samples: int
) -> dict[int, list[float]]:
    fed = InProcessFederation(
        ["method=fedavg", "runtime=in_process", f"num_rounds={rounds}", f"seed={seed}", *overrides]
    )
    found = {}
    for r in range(1, rounds + 1):
        record = fed.round(r)
        if r % every == 0 or r == 1:
            pids = sorted({int(p) for p in fed.strategy.sample_clients(r)})
            found[r] = client_curvatures(fed, pids, max_samples)
            accuracy = (record.get("test") or {}).get("accuracy")
            print(
                f"  round {r}: accuracy {accuracy}, λ_max median {np.median(found[r]):.1f} max "
                f"{max(found[r]):.1f}",
                flush=True,
            )
    return found


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perfedavg_curvature")
    parser.add_argument(
        "--max-samples", type=int, default=512, help="samples per client for the Hessian"
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--every", type=int, default=5, help="measure every N rounds (and after round 1)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| set-up | round | clients | λ_max median | λ_max largest | 1/λ_max largest |",
        "|---|---|---|---|---|---|",
    ]
    curves = {}
    for name, overrides in SETUPS.items():
        print(name, flush=True)
        found = measure(overrides, args.rounds, args.every, args.seed, args.max_samples)
        curves[name] = found
        for r, values in found.items():
            lines.append(
                f"| {name} | {r} | {len(values)} | {np.median(values):.1f} | {max(values):.1f} | "
                f"{1 / max(values):.4f} |"
            )
    fig, ax = common.figure(figsize=(7, 4))
    for name, found in curves.items():
        rounds = sorted(found)
        ax.plot(rounds, [max(found[r]) for r in rounds], marker="o", label=f"{name}: largest")
        ax.plot(rounds, [np.median(found[r]) for r in rounds], ls="--", label=f"{name}: median")
    ax.set(xlabel="round", ylabel="λ_max of the clients' losses at the global model", yscale="log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    args.out.mkdir(parents=True, exist_ok=True)
    common.save_figure(fig, args.out / "curvature.png")
    points = [  # the figure's: λ_max over the round's clients, largest and median
        {"setup": name, "round": r, "largest": max(v), "median": float(np.median(v))}
        for name, found in curves.items()
        for r, v in found.items()
    ]
    common.publish_in_docs("perfedavg_curvature", lines, data=points)
    common.publish_table(
        args.out / "table.md",
        [
            "# Largest Hessian eigenvalue of the clients' losses along FedAvg training",
            "",
            f"Seed {args.seed}; at most {args.max_samples} samples per client; power iteration "
            f"(30 steps). Machine: {common.machine()}.",
            "",
            *lines,
            "",
            f"Command: `python benchmarks/accuracy/perfedavg_curvature.py --rounds {args.rounds} "
            f"--every {args.every} --seed {args.seed} --max-samples {args.max_samples}`",
        ],
    )


if __name__ == "__main__":
    main()
