"""Stability of the stateful and optimiser baselines under the optimiser researchers use.

Every row (a method, or a method with one setting changed) runs on mnist5k with the
settings most non-IID benchmark papers use (SGD, lr 0.01, weight decay 1e-5, batch 64,
2 local epochs, 10 clients all taking part, 20 rounds, ``runtime=in_process``) for every
momentum × Dirichlet α × seed. Writes

- ``<out>/table.md``: per row and setting, mean ± std over seeds of the final, best and
  mean-over-rounds test accuracy, the runs that ended collapsed (final accuracy at most
  1.5x chance, i.e. about one class predicted), and the rounds in which an update was
  rejected for NaN/Inf values (summed over seeds, with the number of runs that had any);
- ``<out>/curves.png``: mean test accuracy per round, one panel per momentum × α;
- ``docs/tables/stability.md``: the table alone (docs/benchmarks/accuracy.md).

    python benchmarks/accuracy/stability.py [--rows fedavg,scaffold] [--seeds 0,1,2] [--jobs 2]

Finished runs are reused (``<out>/runs``), so an interrupted call resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy.compare_methods import ensure_runs
from fedimb.cli.results.report_tables import mean_std, metric_curve
from fedimb.cli.rundir.files import read_metrics_csv

SETTINGS = [
    "dataset=mnist5k",
    "partition=dirichlet",
    "num_clients=10",
    "dropout=none",
    "runtime=in_process",
    "num_rounds=20",
    "fraction_fit=1.0",
    "train.local_epochs=2",
    "train.batch_size=64",
    "train.lr=0.01",
    "train.weight_decay=1e-05",
    "train.optimizer=sgd",
]
#: row label -> (method, the overrides that make the row)
ROWS: dict[str, tuple[str, list[str]]] = {
    "fedavg": ("fedavg", []),
    "fedprox": ("fedprox", []),
    "fedavgm": ("fedavgm", []),
    "fednova": ("fednova", []),
    "scaffold": ("scaffold", []),
    "scaffold samples": ("scaffold", ["method.strategy.weighting=samples"]),
    "scaffold option2": ("scaffold", ["method.client.control=option2"]),
    "scaffold option1": ("scaffold", ["method.client.control=option1"]),
    "scaffold gradient_mean": ("scaffold", ["method.client.control=gradient_mean"]),
    "feddyn": ("feddyn", []),
    "moon": ("moon", []),
}
DEFAULT_ROWS = ",".join(ROWS)


def nonfinite_rounds(run_dir: Path) -> int:
    """Rounds in which at least one update was rejected for NaN/Inf values."""
    return sum(
        1
        for r in read_metrics_csv(run_dir / "metrics.csv")
        if r["split"] == "clients" and r["metric"] == "nonfinite" and r["value"] > 0
    )


COLLAPSED = 1.5  # final accuracy at most this many times chance: the model predicts about one class


def run_scores(run_dir: Path) -> dict[str, float]:
    curve = metric_curve(run_dir)
    trained = [v for r, v in sorted(curve.items()) if r > 0]
    chance = 1.0 / len(
        [
            r
            for r in read_metrics_csv(run_dir / "metrics.csv")
            if r["round"] == 0 and r["metric"].startswith("recall_class_")
        ]
    )
    return {
        "final": trained[-1],
        "best": max(trained),
        "mean": float(np.mean(trained)),
        "collapsed": trained[-1] <= COLLAPSED * chance,
        "nonfinite": nonfinite_rounds(run_dir),
    }


def table_lines(rows, settings, seeds, runs) -> tuple[list[str], list[dict]]:
    """The table's lines, and the figure's points: the final accuracy (%, mean over seeds)
    and the collapsed runs of every row and setting."""
    points = []
    lines = [
        "| method | momentum | α | final accuracy (%) | best accuracy (%) | mean accuracy over "
        "rounds (%) | collapsed runs | rounds with NaN/Inf updates (runs) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for momentum, alpha in settings:
        for row in rows:
            scores = [run_scores(runs[row, momentum, alpha, s]) for s in seeds]
            bad = [s["nonfinite"] for s in scores]
            lines.append(
                f"| {row} | {momentum} | {alpha} | {mean_std([s['final'] for s in scores])} | "
                f"{mean_std([s['best'] for s in scores])} | "
                f"{mean_std([s['mean'] for s in scores])} | "
                f"{sum(s['collapsed'] for s in scores)}/{len(scores)} | {sum(bad)} "
                f"({sum(1 for b in bad if b)}/{len(bad)}) |"
            )
            points.append(
                {
                    "method": row,
                    "momentum": momentum,
                    "alpha": alpha,
                    "final_accuracy": common.mean_and_std([s["final"] for s in scores])[0],
                    "collapsed": sum(s["collapsed"] for s in scores),
                    "runs": len(scores),
                }
            )
    return lines, points


def curves_plot(rows, settings, seeds, runs, path: Path) -> None:
    fig, axes = common.panels(len(settings), 4.2)
    for ax, (momentum, alpha) in zip(axes, settings):
        for row in rows:
            curves = [metric_curve(runs[row, momentum, alpha, s]) for s in seeds]
            rounds = sorted(set.intersection(*(set(c) for c in curves)))
            mean = np.array([[c[r] for r in rounds] for c in curves]).mean(axis=0)
            ax.plot(rounds, mean, label=row, lw=1.2)
        ax.set(title=f"momentum {momentum}, Dir({alpha})", xlabel="round", ylim=(0, 1))
    common.save_panels(fig, axes, "test accuracy (mean over seeds)", path)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument(
        "--rows", default=DEFAULT_ROWS, help=f"comma-separated, from: {', '.join(ROWS)}"
    )
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--momenta", default="0,0.9")
    parser.add_argument("--alphas", default="0.1,0.5")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "stability")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one core each)")
    args = parser.parse_args()
    rows = args.rows.split(",")
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown} (choose from: {', '.join(ROWS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = [(m, a) for m in args.momenta.split(",") for a in args.alphas.split(",")]
    keys, requests = [], []
    for momentum, alpha in settings:
        for row in rows:
            method, extra = ROWS[row]
            overrides = [
                *SETTINGS,
                f"train.momentum={momentum}",
                f"partition.alpha={alpha}",
                *extra,
            ]
            name = f"{row.replace(' ', '-')}-m{momentum}-a{alpha}"
            for seed in seeds:
                keys.append((row, momentum, alpha, seed))
                requests.append((args.out / "runs", method, seed, overrides, name))
    runs = dict(zip(keys, ensure_runs(requests, args.jobs)))
    curves_plot(rows, settings, seeds, runs, args.out / "curves.png")
    command = (
        f"python benchmarks/accuracy/stability.py --rows '{args.rows}' --seeds {args.seeds} "
        f"--momenta {args.momenta} --alphas {args.alphas}"
    )
    table, points = table_lines(rows, settings, seeds, runs)
    lines = [
        "# Stateful and optimiser baselines under SGD with and without momentum",
        "",
        f"Set-up: `{' '.join(SETTINGS)}`, `train.momentum` × `partition.alpha` as in the rows; "
        f"seeds {', '.join(map(str, seeds))}; mean ± std over seeds.",
        f"Machine: {common.machine()}.",
        "",
        *table,
        "",
        f"Command: `{command}`",
    ]
    common.publish_results(args.out / "table.md", "stability", lines, data=points)


if __name__ == "__main__":
    main()
