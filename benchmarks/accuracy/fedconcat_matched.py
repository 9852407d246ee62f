"""FedConcat and FedConcat-ID against FedAvg with communication matched (Diao et al.,
Table 1: "compared with baselines with same communication cost").

For every partition and seed: run FedConcat and FedConcat-ID, measure their total
traffic (bytes up + down, including the concatenated encoders sent once per client),
and give FedAvg as many rounds as that traffic buys at FedAvg's measured cost per
round (one model down and up per client, read from FedConcat's encoder rounds, which
move exactly the same model). Writes ``<out>/table.md`` (``results/fedconcat_mnist5k``) and its
table to ``docs/tables/fedconcat_mnist5k.md``.

    python benchmarks/accuracy/fedconcat_matched.py [--partitions c2,dir01] [--seeds 0,1,2]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy.compare_methods import ensure_run
from fedimb.cli.results.report_tables import mean_std
from fedimb.cli.rundir.files import read_metrics_csv


def bytes_per_encoder_round(run_dir: Path) -> float:
    """Mean traffic of FedConcat's encoder-stage rounds = FedAvg's cost per round."""
    totals: dict[int, float] = {}
    for row in read_metrics_csv(run_dir / "metrics.csv"):
        if row["stage"] == "encoders" and row["split"] == "comm":
            totals[row["round"]] = totals.get(row["round"], 0.0) + row["value"]
    return float(np.mean(list(totals.values())))


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def final_accuracy(summaries: list[dict]) -> str:
    """Mean ± std of the runs' final accuracy, as a table cell."""
    return mean_std([r["final_accuracy"] for r in summaries])


def megabytes(summaries: list[dict]) -> str:
    """Mean ± std of the runs' total traffic (up and down) in MB, as a table cell."""
    return mean_std([r["bytes_up"] + r["bytes_down"] for r in summaries], scale=1e-6, digits=1)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--partitions", default="c2,dir01")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "fedconcat_mnist5k")
    parser.add_argument(
        "overrides", nargs="*", default=[], help="extra fedimb overrides for every run"
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [
        "# FedConcat vs FedAvg on mnist5k, communication matched",
        "",
        "Set-up: `+experiment=fedconcat_mnist5k` (40 clients, K = 5, 30 rounds of which 10 train "
        f"the classifier, 10 local epochs, B = 64, SGD 0.01 momentum 0.9); seeds {args.seeds}. "
        "FedAvg gets the rounds whose traffic equals FedConcat's total.",
        "",
        "| partition | FedAvg (matched rounds) | FedConcat | FedConcat-ID | FedConcat MB "
        "| FedConcat-ID MB |",
        "|---|---|---|---|---|---|",
    ]
    points = []  # the figure's: final accuracy (%) per partition and method
    for partition in args.partitions.split(","):
        runs = args.out / partition / "runs"
        setup = ["+experiment=fedconcat_mnist5k", f"partition={partition}", *args.overrides]
        concat, concat_id, fedavg, matched_rounds = [], [], [], []
        for seed in seeds:
            c = ensure_run(runs, "fedconcat", seed, setup)
            cid = ensure_run(runs, "fedconcat_id", seed, setup)
            total = summary(c)["bytes_up"] + summary(c)["bytes_down"]
            rounds = max(1, math.floor(total / bytes_per_encoder_round(c)))
            matched_rounds.append(rounds)
            fa = ensure_run(runs, "fedavg", seed, [*setup, f"num_rounds={rounds}"])
            concat.append(summary(c))
            concat_id.append(summary(cid))
            fedavg.append(summary(fa))
        lines.append(
            f"| {partition} | {final_accuracy(fedavg)} ({', '.join(map(str, matched_rounds))}) "
            f"| {final_accuracy(concat)} | {final_accuracy(concat_id)} "
            f"| {megabytes(concat)} | {megabytes(concat_id)} |"
        )
        for method, runs_of in (
            ("FedAvg (matched rounds)", fedavg),
            ("FedConcat", concat),
            ("FedConcat-ID", concat_id),
        ):
            final, std = common.mean_and_std([r["final_accuracy"] for r in runs_of])
            points.append(
                {
                    "partition": partition,
                    "method": method,
                    "final_accuracy": final,
                    "final_std": std,
                }
            )
    lines += [
        "",
        "Accuracy in %, mean ± std over seeds, final round.",
        "Command: `python benchmarks/accuracy/fedconcat_matched.py --partitions "
        f"{args.partitions} --seeds {args.seeds}`",
    ]
    common.publish_results(args.out / "table.md", "fedconcat_mnist5k", lines, data=points)


if __name__ == "__main__":
    main()
