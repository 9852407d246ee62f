"""How close honest clients come to the influence bounds (``influence.*`` settings,
docs/faults.md#bounded-influence): every leaderboard method, tuned as the leaderboard
tuned it, on the leaderboard's mnist5k set-ups (seed 0), with the default bounds.
Each run's rounds record the largest ratio of a client's reported number to the others'
median (``influence.<what>`` in metrics.csv's extra rows) and how many clients were
bounded; this script writes their maxima per set-up and method, so that the defaults
are shown never to bind an honest run (or where they do).

    python benchmarks/influence.py [--setups pathological,dir01,longtail] [--methods a,b]

Writes ``results/influence/honest.md`` and ``.json`` and the docs table
``influence_honest.md``; a finished run is reused.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common
from benchmarks.accuracy import leaderboard, leaderboard_record

OUT = common.REPO / "results" / "influence"
SETUPS = ("pathological", "dir01", "longtail")


def run_folder(setup: str, method: str) -> Path:
    return OUT / "runs" / setup / method


def honest_run(setup: str, method: str) -> Path | None:
    """The tuned method on ``setup``, seed 0, in its folder (reused when finished); None
    where the leaderboard holds no tuning of it."""
    tuned = leaderboard_record.RESULTS / "tune" / setup / method
    experiments = sorted((tuned / "conf" / "experiment").glob("*.yaml"))
    plan = tuned / "leaderboard_done.json"
    if not experiments or not plan.is_file():
        return None
    folder = run_folder(setup, method)
    if (folder / "summary.json").is_file():
        return folder
    overrides = json.loads(plan.read_text())["plan"]["overrides"]
    result = common.run_fedimb(
        *leaderboard.experiment_arguments(experiments[0]),
        *overrides,
        "seed=0",
        "evaluation.test=true",
        f"hydra.run.dir={folder}",
    )
    if result.returncode != 0:
        print(f"{setup} {method}: failed\n{result.stderr[-2000:]}", file=sys.stderr)
        return None
    return folder


def ratios(folder: Path) -> dict[str, float]:
    """The run's largest ratio per bound, and its bounded clients over all rounds."""
    out: dict[str, float] = {"bounded": 0.0, "rejected": 0.0}
    with open(folder / "metrics.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            value = float(row["value"])
            if row["split"] == "extra" and row["metric"].startswith("influence."):
                key = row["metric"].removeprefix("influence.")
                out[key] = max(out.get(key, 0.0), value)
            elif row["split"] == "clients" and row["metric"] in ("bounded", "rejected"):
                out[row["metric"]] += value
    return out


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--methods", default="")
    args = parser.parse_args()
    methods = args.methods.split(",") if args.methods else leaderboard.suite_methods()
    leaderboard_record.restored()  # the tunings, from the committed record
    rows = []
    for setup in args.setups.split(","):
        for method in methods:
            folder = honest_run(setup, method)
            if folder is None:
                continue
            rows.append({"setup": setup, "method": method, **ratios(folder)})
            print(f"{setup:13} {method:14} {rows[-1]}", flush=True)
    kinds = sorted({k for r in rows for k in r} - {"setup", "method", "bounded", "rejected"})
    lines = [
        "| set-up | method | " + " | ".join(kinds) + " | clients bounded | clients rejected |",
        "|---|---|" + "---:|" * (len(kinds) + 2),
    ]
    for r in rows:
        cells = [f"{r[k]:.3g}" if k in r else "" for k in kinds]
        lines.append(
            f"| {r['setup']} | {r['method']} | "
            + " | ".join(cells)
            + f" | {int(r['bounded'])} | {int(r.get('rejected', 0))} |"
        )
    lines += [
        "",
        "Each cell: the largest ratio, over the run's rounds and clients, of a client's "
        "reported number to the median of the round's other clients (losses either way up); "
        "`train_loss_replay_gap`: the largest relative gap between a GRP-FED training loss "
        "and the server's replay of that training.",
        "",
        "Command: python benchmarks/influence.py",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "honest.json").write_text(json.dumps(rows, indent=1))
    common.publish_results(OUT / "honest.md", "influence_honest", lines)


if __name__ == "__main__":
    main()
