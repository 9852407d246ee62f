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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.accuracy.compare_methods import ensure_run  # noqa: E402
from benchmarks.common import argument_parser, publish_in_docs, publish_table, table_part  # noqa: E402
from fedimb.cli.report import mean_std  # noqa: E402
from fedimb.cli.run_files import read_metrics_csv  # noqa: E402


def bytes_per_encoder_round(run_dir: Path) -> float:
    """Mean traffic of FedConcat's encoder-stage rounds = FedAvg's cost per round."""
    totals: dict[int, float] = {}
    for row in read_metrics_csv(run_dir / "metrics.csv"):
        if row["stage"] == "encoders" and row["split"] == "comm":
            totals[row["round"]] = totals.get(row["round"], 0.0) + row["value"]
    return float(np.mean(list(totals.values())))


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--partitions", default="c2,dir01")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "fedconcat_mnist5k")
    parser.add_argument(
        "overrides", nargs="*", default=[], help="extra fedimb overrides for every run"
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [
        "# FedConcat vs FedAvg on mnist5k, communication matched",
        "",
        "Set-up: `+experiment=fedconcat_mnist5k` (40 clients, K = 5, 30 rounds of which 10 train the "
        f"classifier, 10 local epochs, B = 64, SGD 0.01 momentum 0.9); seeds {args.seeds}. FedAvg gets the "
        "rounds whose traffic equals FedConcat's total.",
        "",
        "| partition | FedAvg (matched rounds) | FedConcat | FedConcat-ID | FedConcat MB | FedConcat-ID MB |",
        "|---|---|---|---|---|---|",
    ]
    for partition in args.partitions.split(","):
        runs = args.out / partition / "runs"
        common = ["+experiment=fedconcat_mnist5k", f"partition={partition}", *args.overrides]
        concat, concat_id, fedavg, matched_rounds = [], [], [], []
        for seed in seeds:
            c = ensure_run(runs, "fedconcat", seed, common)
            cid = ensure_run(runs, "fedconcat_id", seed, common)
            total = summary(c)["bytes_up"] + summary(c)["bytes_down"]
            rounds = max(1, math.floor(total / bytes_per_encoder_round(c)))
            matched_rounds.append(rounds)
            fa = ensure_run(runs, "fedavg", seed, [*common, f"num_rounds={rounds}"])
            concat.append(summary(c))
            concat_id.append(summary(cid))
            fedavg.append(summary(fa))
        mb = lambda runs_: mean_std(
            [r["bytes_up"] + r["bytes_down"] for r in runs_], scale=1e-6, digits=1
        )  # noqa: E731
        lines.append(
            f"| {partition} | {mean_std([r['final_accuracy'] for r in fedavg])} ({', '.join(map(str, matched_rounds))}) "
            f"| {mean_std([r['final_accuracy'] for r in concat])} | {mean_std([r['final_accuracy'] for r in concat_id])} "
            f"| {mb(concat)} | {mb(concat_id)} |"
        )
    lines += [
        "",
        "Accuracy in %, mean ± std over seeds, final round.",
        f"Command: `python benchmarks/accuracy/fedconcat_matched.py --partitions {args.partitions} --seeds {args.seeds}`",
    ]
    publish_table(args.out / "table.md", lines)
    publish_in_docs("fedconcat_mnist5k", table_part(lines))


if __name__ == "__main__":
    main()
