"""How much of Synthetic(α, β)'s labels a device's own label prior explains.

In Synthetic(α, β) every device draws its own model (W_k, b_k) and its own feature centre
v_k, and labels its samples with argmax(W_k x + b_k): around its centre one or two classes
win almost everywhere, so a device's labels are mostly its prior, and what tells the
devices apart is where their features lie. For each draw of the leaderboard's
``synthetic`` set-up (Synthetic(1, 1), 20 devices, the report seeds 0-4 as data seeds)
this measures, on the devices' own test sets, the accuracy of predicting each device's
majority training class (a model that only knows which device a sample came from and
that device's prior), that of predicting the global majority class, and the median
device's share of its top class.

``--sweep`` then trains the relaxed balanced softmax of ReBaFL's eq. 10 alone (``method=rebafl
method.client.mu=0``: no feature augmentation) on the same set-up for ε from 0 (BSM-FedAvg's
balanced softmax, which gives a class the client does not hold no probability mass, so
that client never pushes that class's logit down) to 1 (cross-entropy), 5 seeds each, the
learning rate fixed: on Synthetic most classes are absent from most devices, so ε = 0
leaves the logits of most classes untrained where they are absent. Writes
``docs/tables/synthetic_prior.md`` (a second) and, with ``--sweep``,
``docs/tables/synthetic_prior_eps.md`` (25 runs, a few minutes).

    python benchmarks/accuracy/synthetic_prior.py [--alpha 1] [--beta 1] [--devices 20] [--sweep]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.core.data.synthetic import SyntheticSpec, device_data

SEEDS = (0, 1, 2, 3, 4)
#: ReBaFL's prior smoothing ε (eq. 10) swept: 0 is the balanced softmax, 1 cross-entropy
EPSILONS = (0.0, 0.001, 0.01, 0.1, 1.0)
#: the leaderboard's synthetic set-up (its every-run settings included), the test set read
#: and the learning rate fixed for every ε
SWEEP_SETUP = [
    "dataset=synthetic",
    "partition=natural",
    "model=mclr",
    "model.encoder=linear",
    "num_clients=20",
    "num_rounds=20",
    "train.local_epochs=2",
    "train.lr=0.05",
    "runtime=in_process",
    "dropout=none",
    "validation.fraction=0.1",
    "evaluation.test=true",
    "checkpoint.enabled=false",
    "method=rebafl",
    "method.client.mu=0",
]


def prior_row(spec: SyntheticSpec) -> dict[str, float]:
    """One draw: test accuracy of each device's majority class and of the global one, and
    the median over devices of the top class's share of a device's training samples."""
    device_hits = tests = 0
    test_counts = np.zeros(spec.num_classes)
    shares = []
    for device in range(spec.num_devices):
        data = device_data(spec, device)
        train_counts = np.bincount(data.y_train, minlength=spec.num_classes)
        device_hits += int((data.y_test == train_counts.argmax()).sum())
        tests += len(data.y_test)
        test_counts += np.bincount(data.y_test, minlength=spec.num_classes)
        shares.append(train_counts.max() / train_counts.sum())
    return {
        "device_majority": device_hits / tests,
        "global_majority": float(test_counts.max() / test_counts.sum()),
        "top_class_share": float(np.median(shares)),
    }


def selected_accuracy(overrides: list[str], folder: Path) -> float:
    """One run's test accuracy at its round of best validation accuracy."""
    result = common.run_fedimb(*overrides, f"hydra.run.dir={folder}")
    if result.returncode != 0:
        raise SystemExit(f"fedimb {' '.join(overrides)} failed: {result.stderr.strip()[-400:]}")
    return float(json.loads((folder / "summary.json").read_text())["selected_test_accuracy"])


def sweep_lines(alpha: float, beta: float) -> list[str]:
    """The ε sweep's table: per ε, the mean and 95% t interval over the seeds."""
    lines = [
        "| ε (eq. 10) | loss | selected test accuracy (%), mean | 95% t interval (%) |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as scratch:
        for eps in EPSILONS:
            values = []
            for seed in SEEDS:
                overrides = [*SWEEP_SETUP, f"dataset.alpha={alpha}", f"dataset.beta={beta}"]
                overrides += [f"method.client.eps={eps}", f"seed={seed}"]
                values.append(100 * selected_accuracy(overrides, Path(scratch) / f"{eps}-{seed}"))
                print(f"[synthetic_prior] eps {eps:g} seed {seed}: {values[-1]:.2f}%", flush=True)
            mean, half = np.mean(values), stats.sem(values) * stats.t.ppf(0.975, len(values) - 1)
            name = {0.0: "balanced softmax", 1.0: "cross-entropy"}.get(eps, "relaxed")
            lines.append(
                f"| {eps:g} | {name} | {mean:.2f} | [{mean - half:.2f}, {mean + half:.2f}] |"
            )
    return [
        *lines,
        "",
        f"Synthetic({alpha:g}, {beta:g}); `{' '.join(SWEEP_SETUP)}`; seeds "
        f"{', '.join(map(str, SEEDS))} (each its own draw). Command: "
        "`python benchmarks/accuracy/synthetic_prior.py --sweep`.",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--devices", type=int, default=20)
    parser.add_argument("--sweep", action="store_true", help="also train the ε sweep (minutes)")
    args = parser.parse_args(argv)
    lines = [
        "| data seed | each device's majority class (test accuracy, %) | the global majority "
        "class (%) | median device: share of its top class (%) |",
        "|---|---|---|---|",
    ]
    for seed in SEEDS:
        spec = SyntheticSpec(args.alpha, args.beta, False, 60, 10, args.devices, seed)
        row = prior_row(spec)
        lines.append(
            f"| {seed} | {100 * row['device_majority']:.1f} | "
            f"{100 * row['global_majority']:.1f} | {100 * row['top_class_share']:.1f} |"
        )
    lines += [
        "",
        f"Synthetic({args.alpha:g}, {args.beta:g}), {args.devices} devices, 60 features, 10 "
        "classes; the devices' own test sets (10% of each device's samples). Command: "
        "`python benchmarks/accuracy/synthetic_prior.py`.",
    ]
    common.publish_in_docs("synthetic_prior", lines)
    if args.sweep:
        common.publish_in_docs("synthetic_prior_eps", sweep_lines(args.alpha, args.beta))


if __name__ == "__main__":
    main()
