"""Test accuracy against the (ε, δ) spent, for FedAvg and two label-skew methods (FedLC,
ReBaFL) on one set-up, and which classes lose most under DP.

Each method runs without DP (``privacy=none``) and under ``privacy=dp_server_fixed``
(Flower's server-side fixed clipping, clipping norm ``--clipping-norm``) at every noise
multiplier of ``--noise``, each with ``--seeds`` seeds, in process; the score is the final
round's test accuracy, and ε the run's own account after its last round
(:mod:`fedimb.app.privacy.account`). ReBaFL sends class prototypes beside its update,
which the wrapper does not protect: it runs with ``privacy.payloads=unprotected``
(docs/privacy.md). The class table compares each class's final recall without DP and at
the ``--class-noise`` multiplier, with how many clients hold the class. Writes
``<out>/table.md``, and the tables to ``docs/tables/privacy.md`` and
``privacy_classes.md`` (and, drawn from the first, the figure
``docs/img/bench/privacy.png``) unless ``--tiny``, a few-second run that only proves
the script works.

``--table-only`` writes nothing but ``docs/tables/privacy_payloads.md``: what each method
sends the server beyond its update, from the methods' declarations
(:mod:`fedimb.app.privacy.table`).

    python benchmarks/accuracy/privacy.py [--rounds 30] [--seeds 3] [--noise 0.1,0.3,1,3]
    python benchmarks/accuracy/privacy.py --tiny --out /tmp/privacy
    python benchmarks/accuracy/privacy.py --table-only
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.app.privacy.table import payload_table
from fedimb.app.runtimes.in_process import InProcessFederation

#: the methods compared, with what each needs under DP
METHODS = {"fedavg": [], "fedlc": [], "rebafl": ["privacy.payloads=unprotected"]}
#: the one set-up: pathological label skew on mnist5k, every client every round
SETUP = ["dataset=mnist5k", "partition=pathological", "dropout=none", "num_clients=20"]
#: the tiny run: the embedded digits, a few clients, one local epoch
TINY = ["dataset=digits", "partition=pathological", "dropout=none", "num_clients=4"]


def final_record(method: str, noise: float | None, args, seed: int) -> tuple[dict, Any]:
    """The last round's record of one run (``noise`` None: without DP), and its partition's
    per-client class counts."""
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
    return record, fed.run.data.partition.counts


def class_table(recalls: dict, counts, noise: float) -> list[str]:
    """Per method, each class's mean final recall without DP and at ``noise``, sorted by
    the loss, with the clients that hold the class."""
    holders = (counts > 0).sum(axis=0)
    lines = [
        f"| method | class | clients holding it | recall without DP | recall at σ = {noise:g} "
        "| loss |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        clean = np.nanmean(np.array(recalls[(method, None)], dtype=float), axis=0)
        noised = np.nanmean(np.array(recalls[(method, noise)], dtype=float), axis=0)
        for c in np.argsort(noised - clean):
            lines.append(
                f"| {method} | {c} | {holders[c]} | {clean[c]:.3f} | {noised[c]:.3f} "
                f"| {clean[c] - noised[c]:+.3f} |"
            )
    return lines


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "privacy")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", default="0.1,0.3,1,3", help="noise multipliers, comma-separated")
    parser.add_argument("--class-noise", type=float, default=0.3, help="the class table's σ")
    parser.add_argument("--clipping-norm", type=float, default=1.0)
    parser.add_argument("--tiny", action="store_true", help="a few seconds on digits; no docs")
    parser.add_argument("--table-only", action="store_true", help="only the payload table")
    args = parser.parse_args()
    if args.table_only:
        common.publish_in_docs("privacy_payloads", payload_table())
        return
    torch.set_num_threads(1)
    levels: list[float | None] = [None, *(float(x) for x in args.noise.split(","))]
    if args.class_noise not in levels:
        parser.error(f"--class-noise {args.class_noise:g} is none of --noise {args.noise}")
    lines = [
        "| method | noise multiplier σ | ε at δ | test accuracy (mean ± std) |",
        "|---|---|---|---|",
    ]
    points = []  # the figure's data: one row per method and noise level
    recalls: dict = {}
    counts = None
    for method in METHODS:
        for noise in levels:
            scores, spent = [], []
            for seed in range(args.seeds):
                record, counts = final_record(method, noise, args, seed)
                scores.append(float((record.get("test") or {}).get("accuracy", float("nan"))))
                spent.append((record.get("extra") or {}).get("privacy.epsilon"))
                recalls.setdefault((method, noise), []).append(
                    [np.nan if r is None else r for r in record["test"]["recall"]]
                )
            mean, std = float(np.mean(scores)), float(np.std(scores))
            shown = "none (no DP)" if noise is None else f"{noise:g}"
            epsilon = spent[0] if noise else None  # the same events in every seed
            eps_text = "—" if noise is None else ("∞" if epsilon is None else f"{epsilon:.3g}")
            lines.append(f"| {method} | {shown} | {eps_text} | {mean:.4f} ± {std:.4f} |")
            points.append(
                {
                    "method": method,
                    "noise_multiplier": noise,
                    "epsilon": epsilon,
                    "accuracy": mean,
                    "accuracy_std": std,
                }
            )
            print(lines[-1], flush=True)
    delta = (4 if args.tiny else 20) ** -1.1
    command = (
        f"--rounds {args.rounds} --seeds {args.seeds} --noise {args.noise} "
        f"--class-noise {args.class_noise}"
    )
    classes = class_table(recalls, counts, args.class_noise)
    report = [
        "# Accuracy under server-side DP (fixed clipping) against ε",
        "",
        f"{'digits, 4 clients (tiny run)' if args.tiny else 'mnist5k, pathological, 20 clients'}"
        f", every client every round; {args.rounds} rounds; C = {args.clipping_norm}; "
        f"δ = {delta:.3g}; seeds 0..{args.seeds - 1}. Machine: {common.machine()}.",
        "",
        *lines,
        "",
        *classes,
        "",
        f"Command: `python benchmarks/accuracy/privacy.py {command}"
        f"{' --tiny' if args.tiny else ''}`",
    ]
    if common.tiny_report(args.tiny, args.out / "table.md", report):
        return
    # the docs' figure is drawn from the points (benchmarks.figures)
    common.publish_results(args.out / "table.md", "privacy", report, data=points)
    common.publish_in_docs("privacy_classes", classes)


if __name__ == "__main__":
    main()
