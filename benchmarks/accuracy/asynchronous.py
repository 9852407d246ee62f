"""Accuracy against simulated time: synchronous FedAvg (waiting for every sampled client,
and with a deadline that leaves the late ones out) against FedAsync and FedBuff, under a
heavy-tailed device-speed model, and what asynchrony costs the rare classes when the slow
devices hold them.

Every run trains the same number of client updates: synchronous rounds of ``--sampled``
clients, FedBuff steps of ``--buffer`` updates, FedAsync steps of one, with as many
clients at once as a synchronous round samples. The clock is the simulated one
(``speed=lognormal`` with ``--seconds-per-sample``, a device about twenty times slower than
a native core); the deadline is the 75th percentile of the clients' fit times. The table
gives, per set-up and mode, the test accuracy at the time the first mode finished (equal
simulated time) with its 95% interval over the seeds, the simulated seconds each mode
took, and its final accuracy. The second table (``speed.assign=rare_slow`` on a global long
tail split by Dirichlet(0.1): the slowest devices hold the rarest classes) compares the rare
classes' recall, with fedimb's participation balance (``mode.balance=participation``).
Writes ``<out>/table.md``, ``docs/tables/asynchronous.md``, ``asynchronous_classes.md``
and their figures in ``docs/img/bench/`` unless ``--tiny`` (seconds; proves the script
works). Finished runs are kept in ``<out>/runs.json``: a rerun skips them.

    python benchmarks/accuracy/asynchronous.py [--rounds 25] [--seeds 3]
    python benchmarks/accuracy/asynchronous.py --tiny --out /tmp/asynchronous
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.app.runtimes.in_process import InProcessFederation

SETUPS = {
    "pathological": ["partition=pathological"],
    "dir01": ["partition=dirichlet", "partition.alpha=0.1"],
}
#: the rare-class part: a global long tail (ratio 10) split by Dirichlet(0.1) over clients
LONGTAIL = ["partition=longtail", "partition.client_split=dirichlet", "partition.alpha=0.1"]
FULL = ["dataset=mnist5k", "num_clients=20", "train.local_epochs=2"]
TINY = ["dataset=digits", "num_clients=6", "train.local_epochs=1"]


def modes(args, deadline: float) -> dict[str, list[str]]:
    """Each mode's overrides, all with the same client updates in total."""
    k, c = args.buffer, args.sampled
    return {
        "sync": [f"num_rounds={args.rounds}"],
        "sync, deadline": [f"num_rounds={args.rounds}", f"mode.deadline={deadline:.6g}"],
        "fedasync": [
            "mode=fedasync",
            f"mode.concurrency={c}",
            f"num_rounds={args.rounds * c}",
            f"evaluation.every={c}",
        ],
        "fedbuff": [
            "mode=fedbuff",
            f"mode.concurrency={c}",
            f"mode.buffer_size={k}",
            f"num_rounds={args.rounds * c // k}",
            f"evaluation.every={c // k}",
        ],
    }


class Runs:
    """Each run's curve, kept in ``<out>/runs.json`` after it ends: a rerun skips the runs
    done (a run is named by its overrides)."""

    def __init__(self, path: Path):
        self.path = path
        self.done = json.loads(path.read_text()) if path.exists() else {}

    def curve(self, overrides: list[str]) -> tuple[list[dict], np.ndarray]:
        """(simulated time, accuracy, recall per class) of every tested round, and the
        clients' label counts."""
        key = " ".join(overrides)
        if key not in self.done:
            fed = InProcessFederation(overrides)
            points = []
            for r in range(1, int(fed.cfg.num_rounds) + 1):
                record = fed.round(r)
                if record.get("test"):
                    points.append({"time": record["extra"]["clock.time"], **record["test"]})
            counts = fed.run.data.partition.counts.tolist()
            self.done[key] = {"points": points, "counts": counts}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.done))
        run = self.done[key]
        return run["points"], np.array(run["counts"])


def at_time(points: list[dict], t: float, key: str = "accuracy"):
    """The value of the last test at or before simulated time ``t``."""
    before = [p for p in points if p["time"] <= t + 1e-9]
    return before[-1][key] if before else None


def deadline_of(base: list[str]) -> float:
    """The 75th percentile of the clients' simulated fit seconds."""
    fed = InProcessFederation([*base, "num_rounds=1"])
    return float(np.percentile(fed.run.client_seconds, 75))


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "asynchronous")
    parser.add_argument("--rounds", type=int, default=25, help="synchronous rounds")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sampled", type=int, default=10, help="clients per synchronous round")
    parser.add_argument("--buffer", type=int, default=5, help="FedBuff's K")
    parser.add_argument("--seconds-per-sample", type=float, default=1e-3)
    parser.add_argument("--tiny", action="store_true", help="seconds on digits; no docs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.tiny:
        args.rounds, args.seeds, args.sampled, args.buffer = 3, 2, 4, 2
    data = TINY if args.tiny else FULL
    num_clients = int(data[1].split("=")[1])
    speed = ["speed=lognormal", f"speed.seconds_per_sample={args.seconds_per_sample}"]
    common_overrides = [*data, "dropout=none", f"fraction_fit={args.sampled / num_clients}"]
    rows: list[dict] = []
    lines = [
        "| set-up | mode | accuracy at equal time, % [95% CI] | paired difference to waiting "
        "sync, points [95% CI], p | simulated seconds | final accuracy, % [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    runs: dict = {}
    cache = Runs(args.out / "runs.json")
    for setup, partition in SETUPS.items():
        for seed in range(args.seeds):
            base = [*common_overrides, *partition, *speed, f"seed={seed}"]
            deadline = deadline_of(base)
            for mode, overrides in modes(args, deadline).items():
                points, _ = cache.curve([*base, *overrides])
                runs[(setup, mode, seed)] = points
                rows += [
                    {
                        "setup": setup,
                        "mode": mode,
                        "seed": seed,
                        "time": p["time"],
                        "accuracy": p["accuracy"],
                    }
                    for p in points
                ]
                print(
                    setup,
                    mode,
                    seed,
                    f"{points[-1]['time']:.1f}s",
                    points[-1]["accuracy"],
                    flush=True,
                )
        names = list(modes(args, 0.0))
        for seed in range(args.seeds):  # equal time: when the first mode of the seed finished
            end = min(runs[(setup, m, seed)][-1]["time"] for m in names)
            for m in names:
                runs[(setup, m, seed, "equal")] = at_time(runs[(setup, m, seed)], end)
        waiting = [runs[(setup, "sync", s, "equal")] or 0.0 for s in range(args.seeds)]
        for m in names:
            equal = [runs[(setup, m, s, "equal")] or 0.0 for s in range(args.seeds)]
            final = [runs[(setup, m, s)][-1]["accuracy"] for s in range(args.seeds)]
            seconds = np.mean([runs[(setup, m, s)][-1]["time"] for s in range(args.seeds)])
            lines.append(
                f"| {setup} | {m} | {common.interval(equal)} | {common.paired(equal, waiting)} "
                f"| {seconds:.0f} | {common.interval(final)} |"
            )
    classes, class_rows = rare_class_table(args, common_overrides, speed, cache)
    report = [
        "# Accuracy against simulated time: synchronous and asynchronous aggregation",
        "",
        f"{'digits, 6 clients (tiny run)' if args.tiny else 'mnist5k, 20 clients'}; "
        f"{args.rounds} synchronous rounds of {args.sampled} clients and the same client "
        f"updates for FedAsync and FedBuff (K = {args.buffer}); seeds 0..{args.seeds - 1}. "
        f"Machine: {common.machine()}.",
        "",
        *lines,
        "",
        *classes,
        "",
        f"Command: `python benchmarks/accuracy/asynchronous.py --rounds {args.rounds} "
        f"--seeds {args.seeds}{' --tiny' if args.tiny else ''}`",
    ]
    if common.tiny_report(args.tiny, args.out / "table.md", report):
        return
    common.publish_results(args.out / "table.md", "asynchronous", report, data=rows)
    common.publish_in_docs("asynchronous_classes", classes, data=class_rows)


def rare_class_table(args, common_overrides: list[str], speed: list[str], cache: Runs):
    """:data:`LONGTAIL` with the slowest devices holding the rarest classes: the recall of
    the three rarest classes and of the rest at equal simulated time, per mode (the table), and the
    rare classes' recall at every test (the figure's rows)."""
    base = [*common_overrides, *LONGTAIL, *speed, "speed.assign=rare_slow"]
    variants = {
        "sync": modes(args, 0.0)["sync"],
        "fedbuff": modes(args, 0.0)["fedbuff"],
        "fedbuff, participation balance": [
            *modes(args, 0.0)["fedbuff"],
            "mode.balance=participation",
        ],
        "fedasync": modes(args, 0.0)["fedasync"],
        "fedasync, participation balance": [
            *modes(args, 0.0)["fedasync"],
            "mode.balance=participation",
        ],
    }
    scores: dict = {}
    rows = []
    for seed in range(args.seeds):
        curves = {}
        for name, overrides in variants.items():
            curves[name], counts = cache.curve([*base, *overrides, f"seed={seed}"])
        rare = np.argsort(counts.sum(axis=0))[:3]
        rows += [
            {
                "setup": "long tail, Dirichlet 0.1, rare classes on slow devices",
                "mode": name,
                "seed": seed,
                "time": p["time"],
                "rare_recall": float(np.mean(np.array(p["recall"])[rare])),
            }
            for name, points in curves.items()
            for p in points
        ]
        end = min(c[-1]["time"] for c in curves.values())
        for name, points in curves.items():
            recall = np.array(at_time(points, end, "recall") or [0.0] * counts.shape[1])
            rest = np.setdiff1d(np.arange(len(recall)), rare)
            scores.setdefault(name, []).append(
                (at_time(points, end) or 0.0, recall[rare].mean(), recall[rest].mean())
            )
    lines = [
        "| mode (long tail, slow devices hold the rare classes) | accuracy, % | recall of the "
        "3 rarest classes, % | recall of the rest, % |",
        "|---|---|---|---|",
    ]
    for name, values in scores.items():
        acc, rare_recall, rest = zip(*values)
        scored = " | ".join(common.interval(list(v)) for v in (acc, rare_recall, rest))
        lines.append(f"| {name} | {scored} |")
    return lines, rows


if __name__ == "__main__":
    main()
