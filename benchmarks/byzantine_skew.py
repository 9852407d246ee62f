"""The Byzantine study under label skew: what each robust rule costs without attackers,
and what it still stops, on the leaderboard's label-skewed mnist5k set-ups.

    python benchmarks/byzantine_skew.py [--setups pathological,dir01]
                                        [--attacks sign_flip:0,1,2,4] [--rules mean,median,...]

Every run: FedAvg at the learning rate the leaderboard tuned for the set-up, 20 clients
on mnist5k, 20 rounds of 2 local epochs, no dropout (a rule sized for 4 attackers needs
up to 19 updates a round: Bulyan's 4f + 3), seed 0, in process; clients 1..k attack in
every round (``fault.kind``: ``sign_flip`` sends w_global − 10 (w_client − w_global); the
attacks of fedimb/app/faults/attacks.py by name). Each rule is sized for the largest attack
(``aggregation.max_attackers``); the bucketed rules take buckets of 2 (the paper's s).
A run reports its final test accuracy and how many honest clients its rule set aside per
round on average (``clients.set_aside`` less the attackers), the cost of the rule.

Writes results/byzantine_skew/table.json and .md, the docs table ``byzantine_skew.md``
and its figure; finished runs are reused, so a second call with more attacks or rules
adds to the table (``--table-only`` writes them from the runs measured so far).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common
from benchmarks.accuracy import leaderboard_record
from fedimb.cli.rundir.events import read_events

OUT = common.REPO / "results" / "byzantine_skew"
SETUPS = {
    "pathological": ["partition=pathological", "partition.classes_per_client=2"],
    "dir01": ["partition=dirichlet", "partition.alpha=0.1"],
    "iid": ["partition=iid"],
}
SHARED = [
    "method=fedavg",
    "dataset=mnist5k",
    "num_clients=20",
    "num_rounds=20",
    "train.local_epochs=2",
    "dropout=none",
    "runtime=in_process",
    "seed=0",
]
#: the rules compared: name -> overrides (each sized by --max-attackers)
RULES = {
    "mean": ["aggregation=mean"],
    "median": ["aggregation=median"],
    "trimmed_mean": ["aggregation=trimmed_mean"],
    "krum": ["aggregation=krum"],
    "multikrum": ["aggregation=multikrum"],
    "bulyan": ["aggregation=bulyan"],
    "centered_clip": ["aggregation=centered_clip"],
    "median + buckets": ["aggregation=median", "aggregation.bucket_size=2"],
    "trimmed_mean + buckets": ["aggregation=trimmed_mean", "aggregation.bucket_size=2"],
    "centered_clip + buckets": ["aggregation=centered_clip", "aggregation.bucket_size=2"],
}


def tuned_lr(setup: str) -> float | None:
    """FedAvg's learning rate as the leaderboard tuned it on ``setup`` (None: not tuned)."""
    summary = leaderboard_record.RESULTS / "tune" / setup / "fedavg" / "summary.json"
    if not summary.is_file():
        return None
    return float(json.loads(summary.read_text())["fedavg"]["best_params"]["train.lr"])


def run(setup: str, rule: str, attack: str, attackers: int, max_attackers: int) -> dict:
    """One run (reused where finished) and its numbers."""
    run_name = f"{attack}-{attackers}" if attackers else "honest"  # one honest run serves all
    folder = OUT / "runs" / setup / rule.replace(" + ", "+") / run_name
    lr = tuned_lr(setup) or tuned_lr("pathological")
    overrides = [
        *SHARED,
        *SETUPS[setup],
        f"train.lr={lr}",
        *RULES[rule],
        f"aggregation.max_attackers={max_attackers}",
    ]
    if rule.startswith("mean"):
        overrides = overrides[:-1]  # the mean assumes nothing
    attacker_ids = list(range(1, 1 + attackers))
    if attackers:
        overrides += [f"fault.kind={attack}", f"fault.clients=[{','.join(map(str, attacker_ids))}]"]
    if not (folder / "summary.json").is_file():
        done = common.run_fedimb(*overrides, f"hydra.run.dir={folder}")
        if done.returncode != 0:
            return {"exit_code": done.returncode, "error": done.stderr.strip()[-300:]}
    summary = json.loads((folder / "summary.json").read_text())
    rounds = [
        e for e in read_events(folder / "events.jsonl") if e["event"] == "round" and e["round"] > 0
    ]
    honest_aside = [
        len(set((e.get("influence") or {}).get("set_aside", [])) - set(attacker_ids))
        for e in rounds
    ]
    return {
        "exit_code": 0,
        "final_accuracy": summary.get("final_accuracy"),
        "honest_set_aside": sum(honest_aside) / max(1, len(honest_aside)),
    }


def table(rows: list[dict], setups: list[str], attack: str, counts: list[int]) -> list[str]:
    lines = []
    for setup in setups:
        lines += [
            f"**{setup}**, `{attack}` (final test accuracy; honest clients set aside per round "
            "without attackers):",
            "",
            "| rule | "
            + " | ".join(f"{k} attacker{'s' * (k != 1)}" for k in counts)
            + " | honest set aside |",
            "|---|" + "---:|" * (len(counts) + 1),
        ]
        for rule in RULES:
            by = {
                r["attackers"]: r
                for r in rows
                if r["setup"] == setup and r["rule"] == rule and r["attack"] == attack
            }
            if not by:
                continue
            cells = [
                "-"
                if k not in by
                else (f"{by[k]['final_accuracy']:.4f}" if by[k]["exit_code"] == 0 else "failed")
                for k in counts
            ]
            clean = by.get(0, {})
            aside = f"{clean['honest_set_aside']:.1f}" if clean.get("exit_code") == 0 else "-"
            lines.append(f"| {rule} | " + " | ".join(cells) + f" | {aside} |")
        lines.append("")
    return lines


def publish_figure_data(rows: list[dict], attack: str) -> None:
    """The points of ``attack``'s figure, drawn by :func:`benchmarks.figures.byzantine_skew`
    (``docs/tables/data/byzantine_skew_<attack>_attackers.csv``)."""
    points = [
        {k: r[k] for k in ("setup", "rule", "attackers", "final_accuracy")}
        for r in rows
        if r["attack"] == attack and r["exit_code"] == 0
    ]
    common.publish_data(f"byzantine_skew_{attack}_attackers", points)


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--setups", default="pathological,dir01")
    parser.add_argument("--attacks", default="sign_flip:0,1,2,4")
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--max-attackers", type=int, default=4)
    parser.add_argument(
        "--table-only", action="store_true", help="write the tables from the runs measured so far"
    )
    args = parser.parse_args()
    leaderboard_record.restored()  # FedAvg's tuned rates, from the committed record
    setups = args.setups.split(",")
    path = OUT / "table.json"
    rows = json.loads(path.read_text()) if path.is_file() else []
    for spec in [] if args.table_only else args.attacks.split(" "):
        attack, counts = spec.split(":")
        for setup in setups:
            for rule in args.rules.split(","):
                for k in map(int, counts.split(",")):
                    key = {"setup": setup, "rule": rule, "attack": attack, "attackers": k}
                    result = run(setup, rule, attack, k, args.max_attackers)
                    rows = [r for r in rows if {n: r[n] for n in key} != key]
                    rows.append({**key, **result})
                    print(f"{setup:12} {rule:24} {attack}x{k}: {result}", flush=True)
                    OUT.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(rows, indent=1))
    lines = []
    for attack in dict.fromkeys(r["attack"] for r in rows):
        counts = sorted({r["attackers"] for r in rows if r["attack"] == attack})
        shown = [s for s in SETUPS if any(r["setup"] == s and r["attack"] == attack for r in rows)]
        lines += table(rows, shown, attack, counts)
        publish_figure_data(rows, attack)
    lines += [
        f"Every run: `{' '.join(SHARED)}`, FedAvg's tuned learning rate of the set-up, "
        f"rules sized for {args.max_attackers} attackers (`aggregation.max_attackers`).",
        "",
        "Command: python benchmarks/byzantine_skew.py",
    ]
    common.publish_table(OUT / "table.md", lines)
    common.publish_in_docs("byzantine_skew", lines)  # every set-up's table, with its heading


if __name__ == "__main__":
    main()
