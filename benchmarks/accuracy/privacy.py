"""Test accuracy against the DP noise multiplier, for FedAvg and ReBaFL on one set-up.

Each method runs without DP (``privacy=none``) and under ``privacy=dp_server_fixed``
(Flower's server-side fixed clipping, clipping norm ``--clipping-norm``) at every noise
multiplier of ``--noise``, each with ``--seeds`` seeds, in process; the score is the final
round's test accuracy. ReBaFL sends class prototypes beside its update, which the
wrapper does not protect: it runs with ``privacy.payloads=unprotected``
(docs/privacy.md). Writes ``<out>/table.md``, and the table to
``docs/tables/privacy.md`` (and, drawn from it, the figure
``docs/img/bench/privacy.png``) unless ``--tiny``, a few-second run that only proves
the script works.

``--table-only`` writes nothing but ``docs/tables/privacy_payloads.md``: what each method
sends the server beyond its update, from the methods' declarations
(:mod:`fedimb.app.privacy.table`).

    python benchmarks/accuracy/privacy.py [--rounds 30] [--seeds 3] [--noise 0,0.1,0.3,1]
    python benchmarks/accuracy/privacy.py --tiny --out /tmp/privacy
    python benchmarks/accuracy/privacy.py --table-only
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.app.privacy.table import payload_table
from fedimb.app.runtimes.in_process import InProcessFederation

#: the methods compared, with what each needs under DP
METHODS = {"fedavg": [], "rebafl": ["privacy.payloads=unprotected"]}
#: the one set-up: pathological label skew on mnist5k, every client every round
SETUP = ["dataset=mnist5k", "partition=pathological", "dropout=none", "num_clients=20"]
#: the tiny run: the embedded digits, a few clients, one local epoch
TINY = ["dataset=digits", "partition=pathological", "dropout=none", "num_clients=4"]


def final_accuracy(method: str, noise: float | None, args, seed: int) -> float:
    """The last round's test accuracy of one run (``noise`` None: without DP)."""
    privacy = (
        ["privacy=none"]
        if noise is None
        else [
            "privacy=dp_server_fixed",
            f"privacy.noise_multiplier={noise}",
            f"privacy.clipping_norm={args.clipping_norm}",
            *METHODS[method],
        ]
    )
    setup = TINY + ["train.local_epochs=1"] if args.tiny else SETUP
    fed = InProcessFederation(
        [f"method={method}", *setup, f"num_rounds={args.rounds}", f"seed={seed}", *privacy]
    )
    record = {}
    for r in range(1, args.rounds + 1):
        record = fed.round(r)
    return float((record.get("test") or {}).get("accuracy", float("nan")))


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "privacy")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", default="0,0.1,0.3,1", help="noise multipliers, comma-separated")
    parser.add_argument("--clipping-norm", type=float, default=1.0)
    parser.add_argument("--tiny", action="store_true", help="a few seconds on digits; no docs")
    parser.add_argument("--table-only", action="store_true", help="only the payload table")
    args = parser.parse_args()
    if args.table_only:
        common.publish_in_docs("privacy_payloads", payload_table())
        return
    torch.set_num_threads(1)
    levels: list[float | None] = [None, *(float(x) for x in args.noise.split(","))]
    lines = [
        "| method | noise multiplier σ | noise std σ·C/n | test accuracy (mean ± std) |",
        "|---|---|---|---|",
    ]
    sampled = 4 if args.tiny else 20
    points = []  # the figure's data: one row per method and noise level
    for method in METHODS:
        for noise in levels:
            scores = [final_accuracy(method, noise, args, seed) for seed in range(args.seeds)]
            mean, std = float(np.mean(scores)), float(np.std(scores))
            shown = "none (no DP)" if noise is None else f"{noise:g}"
            noise_std = "—" if noise is None else f"{noise * args.clipping_norm / sampled:.4g}"
            lines.append(f"| {method} | {shown} | {noise_std} | {mean:.4f} ± {std:.4f} |")
            points.append(
                {"method": method, "noise_multiplier": noise, "accuracy": mean, "accuracy_std": std}
            )
            print(lines[-1], flush=True)
    command = f"--rounds {args.rounds} --seeds {args.seeds} --noise {args.noise}"
    report = [
        "# Accuracy under server-side DP (fixed clipping)",
        "",
        f"{'digits, 4 clients (tiny run)' if args.tiny else 'mnist5k, pathological, 20 clients'}; "
        f"{args.rounds} rounds; C = {args.clipping_norm}; seeds 0..{args.seeds - 1}. "
        f"Machine: {common.machine()}.",
        "",
        *lines,
        "",
        f"Command: `python benchmarks/accuracy/privacy.py {command}"
        f"{' --tiny' if args.tiny else ''}`",
    ]
    # the docs' figure is drawn from the points (benchmarks.figures); a tiny run writes none
    common.publish_results(args.out / "table.md", "privacy", report, new=not args.tiny, data=points)


if __name__ == "__main__":
    main()
