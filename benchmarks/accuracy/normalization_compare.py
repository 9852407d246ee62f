"""Original vs contribution-normalised final accuracy of several base algorithms, over
the temperature T of eq. 8.

For each Dirichlet alpha, method and seed: one run with ``normalize=none`` and one with
``normalize=latent_cosine normalize.temperature=T`` per T (+experiment=contrib_mnist5k
settings unless overridden). Writes ``<out>/table.md`` (mean ± std over seeds of the
original and every T, and each T's difference to the original) and ``<out>/temperature.png``
(final accuracy over T, one line per method and alpha, the original as a dashed line), and
the table to ``docs/tables/<name of --out>.md`` where the docs include it:
``normalization_mnist5k`` (the default) and ``normalization_temperature`` (``run.sh temperature``).

    python benchmarks/accuracy/normalization_compare.py [--alphas 0.1,0.5]
        [--temperatures 1,0.5,0.2] [--methods fedavg,fedprox] [--seeds 0,1,2] [--jobs 2]
        [-- overrides]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy.compare_methods import ensure_runs
from fedimb.cli.results.report_tables import mean_std

METHODS = "fedavg,fedprox,scaffold,fednova,fedbabu,fedavgm"


def variant_overrides(variant: str) -> list[str]:
    """``none`` or a temperature: the overrides of that column."""
    if variant == "none":
        return ["normalize=none"]
    return ["normalize=latent_cosine", f"normalize.temperature={variant}"]


def variant_folder(variant: str) -> str:
    return "none" if variant == "none" else f"latent_cosine_T{variant}"


def temperature_plot(final, alphas, methods, temperatures, seeds, path: Path) -> None:
    fig, axes = common.panels(len(alphas), 5.5)
    ts = [float(t) for t in temperatures]
    for ax, alpha in zip(axes, alphas):
        for method in methods:
            means = [
                100 * np.mean([final[alpha, method, t, s] for s in seeds]) for t in temperatures
            ]
            (line,) = ax.plot(ts, means, marker="o", label=method)
            original = 100 * np.mean([final[alpha, method, "none", s] for s in seeds])
            ax.axhline(original, color=line.get_color(), ls="--", lw=0.8)
        ax.set(xscale="log", xlabel="temperature T (dashed: normalize=none)", title=f"Dir({alpha})")
    common.save_panels(fig, axes, "final test accuracy (%), mean over seeds", path)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--alphas", default="0.1,0.5")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--temperatures", default="1", help="comma-separated T of eq. 8")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--out", type=Path, default=common.REPO / "results" / "normalization_mnist5k"
    )
    parser.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="where the runs go (default: --out); the tables of several calls can share runs",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at a time (one core each with runtime=in_process)"
    )
    parser.add_argument("overrides", nargs="*", default=["+experiment=contrib_mnist5k"])
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    alphas, methods, temperatures = (
        args.alphas.split(","),
        args.methods.split(","),
        args.temperatures.split(","),
    )
    cells = [
        (alpha, method, variant, seed)
        for alpha in alphas
        for method in methods
        for variant in ("none", *temperatures)
        for seed in seeds
    ]
    runs = args.runs or args.out
    folders = ensure_runs(
        [
            (
                runs / f"alpha{alpha}" / variant_folder(variant),
                method,
                seed,
                [*args.overrides, f"partition.alpha={alpha}", *variant_overrides(variant)],
            )
            for alpha, method, variant, seed in cells
        ],
        args.jobs,
    )
    final = {
        cell: json.loads((folder / "summary.json").read_text())["final_accuracy"]
        for cell, folder in zip(cells, folders)
    }
    header = "| alpha | method | original |" + "".join(
        f" T = {t} | difference |" for t in temperatures
    )
    lines = [
        "# Contribution normalisation on mnist5k: original vs normalised final accuracy (%)",
        "",
        f"Set-up: `{' '.join(args.overrides)}` (20 clients, 2 local epochs, Adam 0.001, B = 64, "
        f"30 rounds); seeds {args.seeds}; mean ± std over seeds, differences in points. Machine: "
        f"{common.machine()}.",
        "",
        header,
        "|" + "---|" * (header.count("|") - 1),
    ]
    points = []  # the figure's: normalised − original per α, method and T (points)
    for alpha in alphas:
        for method in methods:
            original = [final[alpha, method, "none", s] for s in seeds]
            row = f"| {alpha} | {method} | {mean_std(original)} |"
            for t in temperatures:
                normalised = [final[alpha, method, t, s] for s in seeds]
                differences = [n - o for o, n in zip(original, normalised)]
                row += f" {mean_std(normalised)} | {mean_std(differences)} |"
                difference, std = common.mean_and_std(differences)
                points.append(
                    {
                        "alpha": alpha,
                        "method": method,
                        "temperature": t,
                        "difference": difference,
                        "difference_std": std,
                    }
                )
            lines.append(row)
    temperature_plot(final, alphas, methods, temperatures, seeds, args.out / "temperature.png")
    lines += [
        "",
        f"Command: `python benchmarks/accuracy/normalization_compare.py --alphas {args.alphas} "
        f"--methods {args.methods} --temperatures {args.temperatures} --seeds {args.seeds} --out "
        f"{args.out} -- {' '.join(args.overrides)}`",
    ]
    common.publish_results(args.out / "table.md", args.out.name, lines, new=False, data=points)


if __name__ == "__main__":
    main()
