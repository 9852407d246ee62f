"""GRP-FED's sensitivity to q_0, η_q and the readings the paper leaves open.

On ``+experiment=grpfed_mnist5k`` (``runtime=in_process``), every cell of the grid
q_0 × η_q runs the paper's rule, each option row changes one reading (λ over all
clients, L^g of the received model, a bounded q, the personal extractor re-synced),
and FedAvg, q-FFL and AFL are the reference rows. Writes

- ``<out>/table.md``: per row, mean ± std over seeds of the final T_g, T_p, T_r, T_l
  (macro-F1, %) and test accuracy, and the range of q over every round of its runs;
- ``<out>/heatmap.png``: mean final T_g and T_l over the q_0 × η_q grid, with FedAvg's
  values in the titles;
- ``docs/tables/grpfed_sensitivity.md``: the table alone (docs/benchmarks/accuracy.md).

    python benchmarks/accuracy/grpfed_sensitivity.py [--seeds 0,1,2] [--jobs 2]

Finished runs are reused (``--runs``, shared with ``run.sh grpfed``), so an interrupted
call resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy.compare_methods import ensure_runs
from fedimb.cli.results.report_tables import extra_range, mean_std, own_scores, value_range

SETUP = ["+experiment=grpfed_mnist5k", "runtime=in_process"]
Q0 = (0, 1, 2, 5, 10)
ETA_Q = (0.1, 0.5, 2)
#: row label -> (method, overrides); the grid rows are added in :func:`rows`
OPTIONS: dict[str, tuple[str, list[str]]] = {
    "fedavg": ("fedavg", []),
    "qffl": ("qffl", []),
    "afl": ("afl", []),
    "grpfed λ over all clients": ("grpfed", ["method.strategy.lambda_over=all"]),
    "grpfed L^g of the received model": ("grpfed", ["method.client.loss_at=received"]),
    "grpfed q in [0, 5], η_q = 2": (
        "grpfed",
        [
            "method.strategy.q0=2",
            "method.strategy.eta_q=2",
            "method.strategy.q_min=0",
            "method.strategy.q_max=5",
        ],
    ),
    "grpfed personal re-sync every 5 rounds": ("grpfed", ["method.client.personal_resync_every=5"]),
    "grpfed q_0 = 0, re-sync every 5 rounds": (
        "grpfed",
        ["method.strategy.q0=0", "method.client.personal_resync_every=5"],
    ),
    # the settings of method=grpfed_tuned
    "grpfed q_0 = 0, re-sync every round": (
        "grpfed",
        ["method.strategy.q0=0", "method.client.personal_resync_every=1"],
    ),
}
SCORES = ("T_g", "T_p", "T_r", "T_l")


def grid_label(q0: float, eta: float) -> str:
    return f"grpfed q0={q0} η_q={eta}"


def rows() -> dict[str, tuple[str, list[str]]]:
    grid = {
        grid_label(q0, eta): (
            "grpfed",
            [f"method.strategy.q0={q0}", f"method.strategy.eta_q={eta}"],
        )
        for q0 in Q0
        for eta in ETA_Q
    }
    return {
        **{k: v for k, v in OPTIONS.items() if not k.startswith("grpfed")},
        **grid,
        **{k: v for k, v in OPTIONS.items() if k.startswith("grpfed")},
    }


def run_name(label: str) -> str:
    return "".join(c if (c.isascii() and c.isalnum()) or c in ".-" else "_" for c in label)


def final_scores(run_dir: Path) -> dict[str, float]:
    import json

    scores = own_scores(run_dir)
    scores["accuracy"] = json.loads((run_dir / "summary.json").read_text())["final_accuracy"]
    return scores


def heatmap(means: dict[str, dict[str, float]], path: Path) -> None:
    fig, axes = common.figure(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("T_g", "T_l")):
        grid = np.array([[means[grid_label(q0, eta)][key] for eta in ETA_Q] for q0 in Q0])
        image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
        for i in range(len(Q0)):
            for j in range(len(ETA_Q)):
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", color="w", fontsize=8)
        ax.set(
            xticks=range(len(ETA_Q)),
            xticklabels=ETA_Q,
            yticks=range(len(Q0)),
            yticklabels=Q0,
            xlabel="η_q",
            ylabel="q_0",
            title=f"GRP-FED final {key} (%); FedAvg {means['fedavg'][key]:.1f}",
        )
        fig.colorbar(image, ax=ax)
    common.save_figure(fig, path)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "grpfed_sensitivity")
    parser.add_argument(
        "--runs",
        type=Path,
        default=common.REPO / "results" / "grpfed_mnist5k" / "runs",
        help="where the runs go; the default shares FedAvg, q-FFL and AFL with run.sh grpfed",
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one core each)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    table = rows()
    keys, requests = [], []
    for label, (method, overrides) in table.items():
        for seed in seeds:
            keys.append((label, seed))
            requests.append((args.runs, method, seed, [*SETUP, *overrides], run_name(label)))
    runs = dict(zip(keys, ensure_runs(requests, args.jobs)))
    lines = [
        "| row | final T_g (%) | final T_p (%) | final T_r (%) | final T_l (%) "
        "| final accuracy (%) | q over rounds |",
        "|---|---|---|---|---|---|---|",
    ]
    means = {}
    for label in table:
        scores = [final_scores(runs[label, s]) for s in seeds]
        means[label] = {
            k: 100 * float(np.mean([s[k] for s in scores])) for k in (*SCORES, "accuracy")
        }
        cells = " | ".join(mean_std([s[k] for s in scores]) for k in (*SCORES, "accuracy"))
        q_range = value_range([extra_range(runs[label, s], "q") for s in seeds])
        lines.append(f"| {label} | {cells} | {q_range} |")
    args.out.mkdir(parents=True, exist_ok=True)
    heatmap(means, args.out / "heatmap.png")
    grid = {grid_label(q0, eta): {"q0": q0, "eta_q": eta} for q0 in Q0 for eta in ETA_Q}
    baseline = {"q0": None, "eta_q": None}  # a row outside the grid
    points = [  # the figure's: the grid's cells and the baselines' final T_g and T_l (%)
        {
            "row": label,
            **grid.get(label, baseline),
            "T_g": means[label]["T_g"],
            "T_l": means[label]["T_l"],
        }
        for label in table
    ]
    common.publish_in_docs("grpfed_sensitivity", lines, data=points)
    common.publish_table(
        args.out / "table.md",
        [
            "# GRP-FED: sensitivity to q_0, η_q and the open readings (mnist5k, quantity skew)",
            "",
            f"Set-up: `{' '.join(SETUP)}`; seeds {args.seeds}; mean ± std over seeds (macro-F1 "
            f"for the T columns). Machine: {common.machine()}.",
            "",
            *lines,
            "",
            f"Command: `python benchmarks/accuracy/grpfed_sensitivity.py --seeds {args.seeds}`",
        ],
    )


if __name__ == "__main__":
    main()
