"""The Synthetic(α, β) tables of the FedProx and q-FFL papers, on fedimb's generator.

``fedprox``: FedAvg against FedProx (μ ∈ {0.01, 1}; μ = 0 is FedAvg, see below) on
Synthetic(0, 0), (0.5, 0.5), (1, 1) and Synthetic_IID with the FedProx paper's settings as
its authors' release runs them (github.com/litian96/FedProx: ``run_fedprox.sh`` — model
mclr, lr 0.01, batch 10, 20 local epochs, 10 devices per round, 200 rounds;
``data/synthetic_*/generate_synthetic.py`` — 30 devices, each split 90/10 into training
and test). ``--rounds`` shortens the 200 rounds. No stragglers: with every device doing its
full work FedProx with μ = 0 is FedAvg (the paper's own reading), so μ = 0 is not run again.
Columns: the final test accuracy and loss of the global model, its mean test accuracy and
the round-to-round spread (std) of the accuracy over the second half of the rounds
(FedProx's claim is stability: μ > 0 damps the oscillation that grows with heterogeneity).

``fairness``: q-FFL (q-FedAvg, Li et al. ICLR 2020, Algorithm 2) with q ∈ {0, 1, 2, 5},
AFL and GRP-FED on Synthetic(1, 1) with 100 devices, with the q-FFL authors' synthetic
settings (github.com/litian96/fair_flearn ``run.sh``: lr 0.01, batch 64, 1 local epoch,
10 devices per round; its README suggests 20,000 rounds for synthetic, ``--rounds`` sets
how many run here). q-FFL samples devices in proportion to their data (``sampling=by_size``)
as the release does for q = 0 and q > 0 (``--sampling=2``, "weighted sampling + simple
average"), so that q = 0 is the data-weighted objective; the paper's "uniform" baseline
is the release's uniform sampling with the same simple average (its ``plot_fairness.py``
reads it from ``--sampling=6``): the q-FFL rows with ``sampling=uniform``. Columns: the
distribution of the final global model's accuracy over the devices' own test sets
(average, worst 10%, best 10%, variance in %²), as the q-FFL paper's tables report it,
and on how many devices it gets nothing right (while more than a tenth are at 0%, the
worst 10% is 0 whatever a method changes); GRP-FED also with its personal models, as the
paper defines it (``method=grpfed``: q_0 = 10), with the settings its sensitivity study on
mnist5k supports (``method=grpfed_tuned``: q_0 = 0, the personal extractor re-synchronised
when it trains), and that with its discriminator trained by cross-entropy (eq. 4 as
printed has no lower bound, and personal models that overflow are not scored: the
``devices`` column counts those that are).

``horizon``: q-FFL with q ∈ {0, 1} sampled by size and the uniform baseline over the
release's suggested 20,000 rounds, the distribution at a tenth, a quarter, half and all
of the rounds: whether q-FFL's effect grows with training beyond the fairness table's
horizon.

``draws``: what the fairness table's data draws are made of (no training): training
samples, the share of the largest and of the ten largest devices, and how often the rounds
of ``--rounds`` that sample by size — the very draws of the runs, by the strategy's own
:func:`draw_clients` — take the largest device and a device of the smaller half (uniform
sampling takes every device in 10% of rounds).

Each setting runs on ``--draws`` data draws (``seed`` = draw, and the data set's
``data_seed`` follows the seed); mean ± std over draws. Writes ``<out>/<table>/table.md``
and the docs' ``docs/tables/synthetic_fedprox.md``, ``synthetic_fairness.md``,
``synthetic_horizon.md`` or ``synthetic_draws.md``. Finished runs are reused, so a call resumes.

    python benchmarks/accuracy/synthetic.py fedprox [--draws 0,1,2] [--rounds 200] [--jobs 2]
    python benchmarks/accuracy/synthetic.py fairness [--draws 0,1,2] [--rounds 2000] [--jobs 2]
    python benchmarks/accuracy/synthetic.py horizon [--draws 0,1,2] [--rounds 20000] [--jobs 2]
    python benchmarks/accuracy/synthetic.py draws [--draws 0,1,2] [--rounds 2000]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy.compare_methods import ensure_runs
from fedimb.cli.results.report_clients import last_local
from fedimb.cli.results.report_tables import mean_std, metric_curve
from fedimb.cli.results.run_records import as_record
from fedimb.core.data.synthetic import SyntheticSpec, device_sizes, train_count
from strategies.base.sampling import draw_clients

#: the papers' Synthetic data: each device its own distribution, a multinomial logistic model
SYNTHETIC = ["dataset=synthetic", "partition=natural", "model=mclr"]
#: plain SGD, as both papers train
PLAIN_SGD = ["train.optimizer=sgd", "train.momentum=0.0", "train.weight_decay=0.0"]
COMMON = [*SYNTHETIC, "dropout=none", "runtime=in_process", *PLAIN_SGD]
FEDPROX_SETTINGS = [
    *COMMON,
    "num_clients=30",
    "fraction_fit=0.3333",
    "train.local_epochs=20",
    "train.batch_size=10",
    "train.lr=0.01",
    "evaluation.local_every=0",
]
FAIRNESS_SETTINGS = [
    *COMMON,
    "num_clients=100",
    "fraction_fit=0.1",
    "train.local_epochs=1",
    "train.batch_size=64",
    "train.lr=0.01",
]
#: (α, β, iid) of the FedProx table's data sets
HETEROGENEITY = {
    "Synthetic_IID": (0.0, 0.0, True),
    "Synthetic(0,0)": (0.0, 0.0, False),
    "Synthetic(0.5,0.5)": (0.5, 0.5, False),
    "Synthetic(1,1)": (1.0, 1.0, False),
}
FEDPROX_ROWS: dict[str, tuple[str, list[str]]] = {
    "FedAvg": ("fedavg", []),
    "FedProx μ=0.01": ("fedprox", ["method.client.mu=0.01"]),
    "FedProx μ=1": ("fedprox", ["method.client.mu=1.0"]),
}
QFFL = ["method.strategy.update=qfedavg"]
#: (row, sampling) -> (method, overrides); "by_size" rows sample devices in proportion to
#: their data, as the q-FFL release does, so that q = 0 is the data-weighted objective
FAIRNESS_ROWS: dict[tuple[str, str], tuple[str, list[str]]] = {
    **{
        (f"q-FFL q={q}", "by_size"): ("qffl", [*QFFL, f"method.strategy.q={q}", "sampling=by_size"])
        for q in (0, 1, 2, 5)
    },
    **{
        (f"q-FFL q={q}", "uniform"): ("qffl", [*QFFL, f"method.strategy.q={q}"])
        for q in (0, 1, 2, 5)
    },
    ("AFL", "uniform"): ("afl", []),
    ("GRP-FED", "uniform"): ("grpfed", ["model.encoder=linear", "evaluation.personal=true"]),
    ("GRP-FED q0=0, re-sync", "uniform"): (
        "grpfed_tuned",
        ["model.encoder=linear", "evaluation.personal=true"],
    ),
    ("GRP-FED q0=0, re-sync, D by cross-entropy", "uniform"): (
        "grpfed_tuned",
        [
            "model.encoder=linear",
            "evaluation.personal=true",
            "method.client.discriminator_loss=cross_entropy",
        ],
    ),
}
DISTRIBUTION = ("average", "worst_10", "best_10", "variance")
#: the horizon table: q-FFL as the paper samples (by size) and the uniform baseline
HORIZON_ROWS = {
    **{(f"q-FFL q={q}", "by_size"): FAIRNESS_ROWS[f"q-FFL q={q}", "by_size"] for q in (0, 1)},
    ("q-FFL q=0", "uniform"): FAIRNESS_ROWS["q-FFL q=0", "uniform"],
}


def distribution_cells(values: dict[str, list[float]]) -> list[str]:
    """Mean ± std over draws of each statistic of the accuracy over devices (of one draw:
    its value)."""
    cells = []
    for k in DISTRIBUTION:
        scale, digits = (1.0, 0) if k == "variance" else (100.0, 2)
        one = len(values[k]) == 1
        cells.append(
            f"{values[k][0] * scale:.{digits}f}"
            if one
            else mean_std(values[k], scale=scale, digits=digits)
        )
    return cells


def run_name(label: str) -> str:
    """A row's label as a folder name that a Hydra override can carry (letters, digits,
    '.', '_', '-')."""
    return re.sub(r"[^A-Za-z0-9._-]", "", label.replace("μ", "mu"))


def second_half(run_dir: Path) -> list[float]:
    curve = metric_curve(run_dir)
    last = max(curve)
    return [v for r, v in sorted(curve.items()) if r > last / 2]


def fedprox_table(draws: list[int], rounds: int, runs: dict) -> tuple[list[str], list[dict]]:
    """The table's lines, and the figure's points: final accuracy (%) per data and method."""
    points = []
    lines = [
        "| data | method | final accuracy (%) | final test loss | mean accuracy, 2nd half (%) "
        "| round-to-round std, 2nd half (pp) |",
        "|---|---|---|---|---|---|",
    ]
    for data in HETEROGENEITY:
        for row in FEDPROX_ROWS:
            folders = [runs[data, row, d] for d in draws]
            summaries = [json.loads((f / "summary.json").read_text()) for f in folders]
            halves = [second_half(f) for f in folders]
            accuracy = mean_std([s["final_accuracy"] for s in summaries])
            loss = mean_std([s["final_loss"] for s in summaries], scale=1.0, digits=3)
            half_means = mean_std([float(np.mean(h)) for h in halves])
            half_stds = mean_std([float(np.std(h)) for h in halves])
            lines.append(f"| {data} | {row} | {accuracy} | {loss} | {half_means} | {half_stds} |")
            final, final_std = common.mean_and_std([s["final_accuracy"] for s in summaries])
            points.append(
                {"data": data, "method": row, "final_accuracy": final, "final_std": final_std}
            )
    return lines, points


def fairness_table(draws: list[int], runs: dict) -> tuple[list[str], list[dict]]:
    """The table's lines, and the figure's points: the average and worst-10% accuracy
    over devices (%) per row and model."""
    points = []
    lines = [
        "| method | sampling | model | devices | average (%) | worst 10% (%) | best 10% (%) "
        "| variance (%²) | devices at 0% | their training samples (median) "
        "| global average at half the rounds (%) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row, sampling in FAIRNESS_ROWS:
        folders = [runs[row, sampling, d] for d in draws]
        summaries = [json.loads((f / "summary.json").read_text()) for f in folders]
        sizes = [json.loads((f / "partition.json").read_text())["client_sizes"] for f in folders]
        curves = [metric_curve(f, "accuracy_average", split="local") for f in folders]
        half_way = [c[max(r for r in c if r <= max(c) // 2)] for c in curves]
        for model, prefix in (
            ("global", "local_accuracy_"),
            ("personal", "local_personal_accuracy_"),
        ):
            if f"{prefix}average" not in summaries[0]:
                continue
            cells = distribution_cells(
                {k: [s[f"{prefix}{k}"] for s in summaries] for k in DISTRIBUTION}
            )
            accuracies = [
                last_local(as_record(f), model)["clients"] for f in folders
            ]  # a diverged model is not scored
            tested = [len(a) for a in accuracies]
            at_zero = [[k for k, v in a.items() if v == 0] for a in accuracies]
            zero_sizes = [
                float(np.median([n[k] for k in z])) if z else None for n, z in zip(sizes, at_zero)
            ]
            devices = mean_std(tested, scale=1.0, digits=0)
            zero = mean_std([len(z) for z in at_zero], scale=1.0, digits=0)
            zero_samples = mean_std(zero_sizes, scale=1.0, digits=0)
            half = mean_std(half_way) if model == "global" else "-"
            setup = f"| {row} | {sampling.replace('_', ' ')} | {model} | {devices} "
            lines.append(f"{setup}| {' | '.join(cells)} | {zero} | {zero_samples} | {half} |")
            point = {"method": row, "sampling": sampling.replace("_", " "), "model": model}
            for k in ("average", "worst_10"):
                point[k], point[f"{k}_std"] = common.mean_and_std(
                    [s[f"{prefix}{k}"] for s in summaries]
                )
            points.append(point)
    return lines, points


def draws_table(draws: list[int], rounds: int) -> tuple[list[str], list[dict]]:
    """The fairness table's data draws (Synthetic(1, 1), 100 devices) and how sampling by
    size treats their devices over ``rounds`` rounds of 10: the lines, and the figure's
    points (the shares, %)."""
    points = []
    lines = [
        "| draw | training samples | devices under 100 samples | largest device's share (%) "
        "| ten largest devices' share (%) | rounds drawing the largest device (%) "
        "| rounds drawing a device of the smaller half (%, mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for draw in draws:
        spec = SyntheticSpec(
            alpha=1.0,
            beta=1.0,
            iid=False,
            dimension=60,
            num_classes=10,
            num_devices=100,
            data_seed=draw,
        )
        samples = device_sizes(spec)
        train = np.array([train_count(int(n)) for n in samples])
        order = np.argsort(train)
        drawn = np.zeros(len(train))
        for server_round in range(1, rounds + 1):
            drawn[
                draw_clients(draw, server_round, list(range(len(train))), 10, "by_size", train)
            ] += 1
        share = np.sort(train)[::-1] / train.sum()
        lines.append(
            f"| {draw} | {train.sum():,} | {int((samples < 100).sum())} | {100 * share[0]:.1f} "
            f"| {100 * share[:10].sum():.1f} | {100 * drawn[order[-1]] / rounds:.1f} "
            f"| {100 * drawn[order[:50]].mean() / rounds:.1f} |"
        )
        points.append(
            {
                "draw": draw,
                "largest_share": 100 * share[0],
                "ten_largest_share": 100 * share[:10].sum(),
                "rounds_drawing_largest": 100 * drawn[order[-1]] / rounds,
                "rounds_drawing_smaller_half": 100 * drawn[order[:50]].mean() / rounds,
            }
        )
    return lines, points


def horizon_table(draws: list[int], rounds: int, runs: dict) -> tuple[list[str], list[dict]]:
    """The accuracy over devices at a tenth, a quarter, half and all of ``rounds``: the
    lines, and the figure's points (average and worst 10%, mean over draws)."""
    points = []
    lines = [
        "| method | sampling | round | average (%) | worst 10% (%) | best 10% (%) "
        "| variance (%²) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row, sampling in HORIZON_ROWS:
        curves = {
            k: [metric_curve(runs[row, sampling, d], f"accuracy_{k}", split="local") for d in draws]
            for k in DISTRIBUTION
        }
        tested = sorted(curves["average"][0])
        parts = (rounds // 10, rounds // 4, rounds // 2, rounds)
        for at in sorted({max(r for r in tested if r <= part) for part in parts}):
            cells = distribution_cells(
                {k: [curve[at] for curve in curves[k]] for k in DISTRIBUTION}
            )
            lines.append(f"| {row} | {sampling.replace('_', ' ')} | {at:,} | {' | '.join(cells)} |")
            point = {"method": row, "sampling": sampling.replace("_", " "), "round": at}
            for k in ("average", "worst_10"):
                point[k] = common.mean_and_std([curve[at] for curve in curves[k]])[0]
            points.append(point)
    return lines, points


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("table", choices=["fedprox", "fairness", "horizon", "draws"])
    parser.add_argument("--draws", default="0,1,2", help="data draws (seeds)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="default: 200 (fedprox), 2000 (fairness, draws), 20000 (horizon)",
    )
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "synthetic")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one core each)")
    args = parser.parse_args()
    draws = [int(d) for d in args.draws.split(",")]
    out = args.out / args.table
    keys, requests = [], []
    if args.table == "fedprox":
        rounds = args.rounds or 200
        for draw in draws:  # draw by draw: an interrupted call has whole draws done
            for data, (alpha, beta, iid) in HETEROGENEITY.items():
                for row, (method, extra) in FEDPROX_ROWS.items():
                    overrides = [
                        *FEDPROX_SETTINGS,
                        f"num_rounds={rounds}",
                        f"dataset.alpha={alpha}",
                        f"dataset.beta={beta}",
                        f"dataset.iid={str(iid).lower()}",
                        *extra,
                    ]
                    name = run_name(f"{data}-{row}")
                    keys.append((data, row, draw))
                    requests.append((out / "runs", method, draw, overrides, name))
        settings = FEDPROX_SETTINGS + [f"num_rounds={rounds}"]
    elif args.table == "draws":
        rounds = args.rounds or 2000
        settings = [
            "dataset=synthetic",
            "num_clients=100",
            "dataset.alpha=1.0",
            "dataset.beta=1.0",
            "fraction_fit=0.1",
            "sampling=by_size",
            f"num_rounds={rounds}",
        ]
    else:
        rounds = args.rounds or (2000 if args.table == "fairness" else 20000)
        every = max(1, rounds // 20)
        rows = FAIRNESS_ROWS if args.table == "fairness" else HORIZON_ROWS
        for draw in draws:
            for (row, sampling), (method, extra) in rows.items():
                overrides = [
                    *FAIRNESS_SETTINGS,
                    f"num_rounds={rounds}",
                    f"evaluation.every={every}",
                    "dataset.alpha=1.0",
                    "dataset.beta=1.0",
                    *extra,
                ]
                keys.append((row, sampling, draw))
                requests.append(
                    (out / "runs", method, draw, overrides, run_name(f"{row}-{sampling}"))
                )
        settings = FAIRNESS_SETTINGS + [
            f"num_rounds={rounds}",
            "dataset.alpha=1.0",
            "dataset.beta=1.0",
        ]
    runs = dict(zip(keys, ensure_runs(requests, args.jobs)))
    table, points = {
        "fedprox": lambda: fedprox_table(draws, rounds, runs),
        "fairness": lambda: fairness_table(draws, runs),
        "horizon": lambda: horizon_table(draws, rounds, runs),
        "draws": lambda: draws_table(draws, rounds),
    }[args.table]()
    title = {
        "fedprox": "FedAvg vs FedProx",
        "fairness": "accuracy over devices",
        "horizon": "q-FFL's accuracy over devices as rounds go on",
        "draws": "the fairness table's data draws and sampling by size",
    }[args.table]
    lines = [
        f"# Synthetic: {title}",
        "",
        f"Set-up: `{' '.join(settings)}`; data draws (seeds) {', '.join(map(str, draws))}; mean ± "
        "std over draws.",
        f"Machine: {common.machine()}.",
        "",
        *table,
        "",
        f"Command: `python benchmarks/accuracy/synthetic.py {args.table} --draws {args.draws} "
        f"--rounds {rounds}`",
    ]
    common.publish_results(out / "table.md", f"synthetic_{args.table}", lines, data=points)


if __name__ == "__main__":
    main()
