"""The attack matrix: one crafted client in every runtime, and whether the federation held.

    python benchmarks/attacks.py [--runtimes in_process,simulation,deployment]
                                 [--rows dtype_int64,...]
                                 [--aggregations mean,median,trimmed_mean,krum]
                                 [--no-byzantine | --only-byzantine]

Each row runs digits (IID, lr 0.1) over 3 clients for 3 rounds with client 1 attacking in
every round (``fault.kind=<attack>``, see fedimb/app/faults/attacks.py) under the method
the attack needs, and the same run with client 1 failing outright (``fault.kind=raise``).
A row is judged:

- *survived*: the attacked run exited 0;
- *counted*: the run's rounds count the attacker (rejected, errors, bounded or clients
  left out of a method's plan > 0), or a registry refusal is in its events;
- *unharmed*: its final accuracy is at most 1 point below that of the run in which client
  1 fails (higher is no harm: an attacker left out of a plan may still train honestly),
  and, for the forged event, neither the forged accuracy nor the forged artifact reached
  the run folder.

The registry rows and the forged event also run in a deployment (a local federation);
the others run in process and in the simulation. The Byzantine study runs in process:
10 clients, 1 and 2 of them sign-flipping their update (scale 10), under each
``aggregation`` given that the configuration knows (an unknown one is skipped, with a
line), beside the same run without attackers.

Writes results/attacks/table.json and table.md and docs/tables/attack_matrix.md (the
table of docs/faults.md). Cells measured before are kept, so ``--rows forged_event``
measures one row again and rewrites the table; cells never measured say so.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common

#: IID and lr 0.1, so that 3 rounds reach ~92 % and a harmed model shows (pathological
#: partitions leave a 3-round model near chance, where any model looks unharmed)
EXPERIMENT = common.matrix_experiment(["partition=iid", "train.lr=0.1"])
BYZANTINE = [
    "dataset=digits",
    "num_clients=10",
    "num_rounds=5",
    "dropout=none",
    "partition=iid",
    "train.lr=0.1",
    "seed=0",
    "method=fedavg",
]
RUNTIMES = common.MATRIX_RUNTIMES
AGGREGATIONS = ("mean", "median", "trimmed_mean", "krum")
#: one point of accuracy: the most an attacked run may lose to the run without the attacker
TOLERANCE = 0.01
TIMEOUT = 900


@dataclass(frozen=True)
class Row:
    """One attack: what client 1 sends, how it is made, under which method."""

    what: str
    overrides: tuple[str, ...]
    method: str = "fedavg"
    runtimes: tuple[str, ...] = ("in_process", "simulation")


DEPLOYED = RUNTIMES
#: the claim attacks need nodes that claim their clients (a deployment's always do)
CLAIMED = "runtime.client_ids=claimed"
ROWS = {
    "dtype_int64": Row("its arrays as int64, n = 1", ("fault.kind=dtype_int64",)),
    "dtype_float16": Row("float16 arrays", ("fault.kind=dtype_float16",)),
    "dtype_complex": Row("complex arrays", ("fault.kind=dtype_complex",)),
    "huge_num_examples": Row("num_examples = 10**12", ("fault.kind=huge_num_examples",)),
    "huge_weights": Row("finite 3e38 weights", ("fault.kind=huge_weights",)),
    "huge_loss": Row("initial_loss = 1e40 (q-FFL)", ("fault.kind=huge_loss",), "qffl"),
    "latent_length": Row(
        "latent mean of another length (normalize=latent_cosine)",
        ("fault.kind=latent_length", "normalize=latent_cosine"),
    ),
    "prototype_classes": Row(
        "ReBaFL prototypes with more classes than vectors",
        ("fault.kind=prototype_mismatch", "fault.variant=classes"),
        "rebafl",
    ),
    "prototype_2d": Row(
        "ReBaFL prototype classes 2-D",
        ("fault.kind=prototype_mismatch", "fault.variant=2d"),
        "rebafl",
    ),
    "prototype_count": Row("ReBaFL class count 1e300", ("fault.kind=prototype_count",), "rebafl"),
    "prototype_flip": Row(
        "FedNH class means sign-flipped (within every bound)",
        ("fault.kind=prototype_flip",),
        "fednh",
    ),
    "scaffold_delta": Row(
        "SCAFFOLD control delta 3e38",
        ("fault.kind=scaffold_huge", "fault.variant=delta"),
        "scaffold",
    ),
    "scaffold_n": Row(
        "SCAFFOLD update with n = 10**12",
        ("fault.kind=scaffold_huge", "fault.variant=n"),
        "scaffold",
    ),
    "astraea_shape": Row(
        "Astraea label counts of the wrong shape",
        ("fault.kind=astraea_counts", "fault.variant=shape"),
        "astraea",
    ),
    "astraea_nan": Row(
        "Astraea label counts with NaN",
        ("fault.kind=astraea_counts", "fault.variant=nan"),
        "astraea",
    ),
    "astraea_missing": Row(
        "Astraea label counts missing",
        ("fault.kind=astraea_counts", "fault.variant=missing"),
        "astraea",
    ),
    "astraea_huge": Row(
        "Astraea label count 1e15", ("fault.kind=astraea_counts", "fault.variant=huge"), "astraea"
    ),
    "fedconcat_shape": Row(
        "FedConcat label counts of the wrong shape",
        ("fault.kind=fedconcat_counts", "fault.variant=shape"),
        "fedconcat",
    ),
    "fedconcat_missing": Row(
        "FedConcat label counts missing",
        ("fault.kind=fedconcat_counts", "fault.variant=missing"),
        "fedconcat",
    ),
    "claim_taken": Row(
        "a second node claiming partition 0",
        ("fault.kind=claim_partition", "fault.claim=0", CLAIMED),
        runtimes=DEPLOYED,
    ),
    "claim_outside": Row(
        "a node claiming partition 99 of 3",
        ("fault.kind=claim_partition", "fault.claim=99", CLAIMED),
        runtimes=DEPLOYED,
    ),
    "claim_none": Row(
        "a node claiming no partition",
        ("fault.kind=claim_partition", "fault.claim=none", CLAIMED),
        runtimes=DEPLOYED,
    ),
    "forged_event": Row(
        "an exception message carrying a round event (accuracy 0.999) and an artifact",
        ("fault.kind=forged_event",),
        runtimes=DEPLOYED,
    ),
    "forged_print": Row(
        "a client printing, logging and raising a round event (accuracy 0.999) and an artifact",
        ("fault.kind=forged_print",),
        runtimes=DEPLOYED,
    ),
    "loss_skew_qffl": Row("a loss 1.25x the honest one (q-FFL)", ("fault.kind=loss_skew",), "qffl"),
    "loss_skew_grpfed": Row(
        "a loss 1.25x the honest one (GRP-FED)", ("fault.kind=loss_skew",), "grpfed"
    ),
    "loss_skew_grpfed_received": Row(
        "a loss 1.25x the honest one (GRP-FED, loss_at=received)",
        ("fault.kind=loss_skew", "method.client.loss_at=received"),
        "grpfed",
    ),
    "sign_flip": Row("a scaled sign-flipped update (scale 10)", ("fault.kind=sign_flip",)),
    "sign_flip_median": Row(
        "a scaled sign-flipped update (scale 10), aggregation=median",
        ("fault.kind=sign_flip", "aggregation=median"),
    ),
    # well-formed, honest-looking updates that no check can count: only their harm is judged
    "label_flip": Row(
        "training on flipped labels y -> C - 1 - y (uncountable: not counted is expected)",
        ("fault.kind=label_flip",),
    ),
    "alie": Row(
        "ALIE: mean - z_max std of the honest updates (omniscient; uncountable)",
        ("fault.kind=alie",),
    ),
    "alie_median": Row(
        "ALIE (omniscient; uncountable), aggregation=median",
        ("fault.kind=alie", "aggregation=median"),
    ),
    "ipm": Row(
        "IPM: -0.1 x the honest updates' mean (omniscient; uncountable)",
        ("fault.kind=ipm",),
    ),
    "ipm_krum": Row(
        "IPM, epsilon 0.1 (omniscient; uncountable), aggregation=krum over 6 clients "
        "(Krum needs 2f + 3 updates: 5 without the attacker)",
        ("fault.kind=ipm", "aggregation=krum", "num_clients=6"),
    ),
}


@dataclass
class RunSummary:
    """What one run left: its exit code and the numbers the judgement needs."""

    exit_code: int
    final_accuracy: float | None = None
    best_accuracy: float | None = None
    rejected: int = 0  # over all rounds
    errors: int = 0
    bounded: int = 0  # accepted, with a reported number cut to its bound
    left_out: int = 0  # clients a method left out of its plan (invalid label counts)
    refusals: int = 0  # events saying a registry refused a claim
    forged_artifact: bool = False  # the run folder holds the forged artifact
    message: str = ""  # the first line about client 1, or the error


@dataclass
class Cell:
    row: str
    runtime: str
    survived: bool | None  # None: not measured
    counted: bool | None
    unharmed: bool | None
    final_accuracy: float | None = None
    reference_accuracy: float | None = None
    detail: str = ""


def judge(row: str, runtime: str, attacked: RunSummary, reference: RunSummary) -> Cell:
    """The three verdicts of one cell, from its run and its reference run (client 1 failing)."""
    survived = attacked.exit_code == 0
    counted = (
        attacked.rejected
        + attacked.errors
        + attacked.bounded
        + attacked.left_out
        + attacked.refusals
        > 0
    )
    close = (
        survived
        and attacked.final_accuracy is not None
        and reference.final_accuracy is not None
        and attacked.final_accuracy >= reference.final_accuracy - TOLERANCE
    )
    if row in ("forged_event", "forged_print"):
        from fedimb.app.faults.attacks import FORGED_ACCURACY

        close = close and attacked.best_accuracy != FORGED_ACCURACY and not attacked.forged_artifact
    return Cell(
        row,
        runtime,
        survived,
        counted,
        bool(close),
        attacked.final_accuracy,
        reference.final_accuracy,
        attacked.message,
    )


# ----------------------------------------------------------------------------- runs
def run_folder(root: Path) -> Path | None:
    folders = sorted(root.glob("*/*/config.yaml"))
    return folders[-1].parent if folders else None


def read_events(run_dir: Path) -> list[dict]:
    """The run's events; a line that does not parse is left out."""
    path = run_dir / "events.jsonl"
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def summarise(run_dir: Path | None, exit_code: int, stderr: str) -> RunSummary:
    """A :class:`RunSummary` from a run folder (None: the run left none)."""
    error = next(
        (line for line in reversed(stderr.splitlines()) if line.startswith("fedimb: error:")),
        (stderr.strip().splitlines() or [""])[-1],
    )
    if run_dir is None:
        return RunSummary(exit_code, message=f"no run folder: {error[:200]}")
    summary = (
        json.loads((run_dir / "summary.json").read_text())
        if (run_dir / "summary.json").exists()
        else {}
    )
    rounds = [
        e for e in read_events(run_dir) if e.get("event") == "round" and e.get("round", 0) > 0
    ]
    last = {e["round"]: e for e in rounds}  # a restarted round's last record counts
    clients = [e.get("clients") or {} for e in last.values()]
    texts = [
        str(m)
        for e in read_events(run_dir)
        for m in [e.get("message", "")] + list(e.get("messages", []))
    ]
    about = [t for t in texts if "client 1" in t or "refus" in t]
    artifact = run_dir / "partition.json"
    return RunSummary(
        exit_code=exit_code,
        final_accuracy=summary.get("final_accuracy"),
        best_accuracy=summary.get("best_accuracy"),
        rejected=sum(int(c.get("rejected") or 0) for c in clients),
        errors=sum(int(c.get("errors") or 0) for c in clients),
        bounded=sum(int(c.get("bounded") or 0) for c in clients),
        left_out=sum(
            int((e.get("extra") or {}).get("clients_left_out") or 0) for e in last.values()
        ),
        refusals=sum("refus" in t for t in texts),
        forged_artifact=artifact.exists() and '"forged"' in artifact.read_text(),
        message=(error if exit_code else (about or [""])[0])[:300],
    )


def method_overrides(method: str) -> list[str]:
    """``method=<m>`` and the method's shortest complete run (its YAML's ``smoke:``)."""
    from omegaconf import OmegaConf

    smoke = OmegaConf.load(common.REPO / "conf" / "method" / f"{method}.yaml").get("smoke") or []
    return [f"method={method}", *map(str, smoke)]


def fedimb_run(
    overrides: list[str], root: Path, federation=None, runtime: str = "in_process"
) -> RunSummary:
    """One front-end run under ``root``, summarised."""
    place = federation.runtime_overrides() if federation is not None else [f"runtime={runtime}"]
    done = common.run_fedimb(
        *overrides,
        *place,
        f"output.root={root}",
        f"checkpoint.dir={root / 'checkpoints'}",
        timeout=TIMEOUT,
    )
    return summarise(run_folder(root), done.returncode, done.stderr)


def reference_key(row: Row) -> str:
    return "-".join(
        [row.method, *[o for o in row.overrides if not o.startswith("fault.")]]
    ).replace("=", "_")


def one_cell(
    name: str, runtime: str, out: Path, federation=None, references: dict | None = None
) -> Cell:
    """Run row ``name`` in ``runtime`` (and its reference, once per method and runtime) and
    judge it."""
    row = ROWS[name]
    base = [
        *EXPERIMENT,
        *method_overrides(row.method),
        *[o for o in row.overrides if not o.startswith("fault.")],
    ]
    references = {} if references is None else references
    key = (reference_key(row), runtime)
    if key not in references:
        references[key] = fedimb_run(
            [*base, "fault.kind=raise"], out / runtime / "reference" / key[0], federation, runtime
        )
    attacked = fedimb_run(
        [*base, *[o for o in row.overrides if o.startswith("fault.")]],
        out / runtime / name,
        federation,
        runtime,
    )
    return judge(name, runtime, attacked, references[key])


#: the study's settings of each rule, sized for its largest attack (2 of 10 clients): each
#: end trims 2 of 10 values, Krum assumes f = 2; the YAML defaults (beta 0.1, f 1) resist one
STUDY_SETTINGS = {"trimmed_mean": {"beta": 0.2}, "krum": {"f": 2}, "multikrum": {"f": 2}}


def rule_overrides(aggregation: str) -> list[str]:
    """The overrides that choose ``aggregation`` with the study's settings for it."""
    settings = STUDY_SETTINGS.get(aggregation, {})
    return [f"aggregation={aggregation}", *(f"aggregation.{k}={v}" for k, v in settings.items())]


def rule_name(aggregation: str) -> str:
    """``aggregation`` with the study's settings for it: ``krum (f=2)``."""
    settings = STUDY_SETTINGS.get(aggregation, {})
    return aggregation + (
        f" ({', '.join(f'{k}={v}' for k, v in settings.items())})" if settings else ""
    )


def byzantine(aggregations: list[str], out: Path) -> list[dict]:
    """Final accuracy with 0, 1 and 2 of 10 clients sign-flipping, per known aggregation."""
    known = [
        a
        for a in aggregations
        if a == "mean" or (common.REPO / "conf" / "aggregation" / f"{a}.yaml").exists()
    ]
    for skipped in sorted(set(aggregations) - set(known)):
        print(
            f"aggregation={skipped}: not in this configuration "
            f"(conf/aggregation/{skipped}.yaml); skipped"
        )
    results = []
    for aggregation in known:
        for flippers in (0, 1, 2):
            attack = (
                [
                    "fault.kind=sign_flip",
                    f"fault.clients=[{','.join(map(str, range(1, 1 + flippers)))}]",
                ]
                if flippers
                else []
            )
            started = time.perf_counter()
            # without conf/aggregation/, mean is today's only rule: no setting to name
            rule = (
                rule_overrides(aggregation)
                if (common.REPO / "conf" / "aggregation").is_dir()
                else []
            )
            run = fedimb_run(
                [*BYZANTINE, *rule, *attack], out / "byzantine" / f"{aggregation}-{flippers}"
            )
            results.append(
                {
                    "aggregation": rule_name(aggregation),
                    "sign_flippers": flippers,
                    "exit_code": run.exit_code,
                    "final_accuracy": run.final_accuracy,
                    "rejected": run.rejected,
                    "message": run.message,
                }
            )
            print(
                f"byzantine {aggregation} x{flippers}: {results[-1]} ({common.since(started)})",
                flush=True,
            )
    return results


# ----------------------------------------------------------------------------- tables
def mark(value: bool | None) -> str:
    return "not measured" if value is None else ("yes" if value else "**no**")


def short(text: str, limit: int = 160) -> str:
    """A cell's detail for the table: one line, no pipes, at most ``limit`` characters."""
    text = " ".join(text.replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def accuracy(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def grid_rows(cells: dict[tuple[str, str], Cell]) -> list[dict]:
    """The figure's data: one row per row and runtime of the matrix, its checks True, False
    or None (not measured)."""
    checks = ("survived", "counted", "unharmed")
    rows = []
    for name, row in ROWS.items():
        for runtime in row.runtimes:
            cell = cells.get((name, runtime)) or Cell(name, runtime, None, None, None)
            rows.append(
                {"attack": name, "runtime": runtime, **{k: getattr(cell, k) for k in checks}}
            )
    return rows


def matrix_lines(cells: dict[tuple[str, str], Cell], flips: list[dict]) -> list[str]:
    lines = [
        f"Set-up: `{' '.join(EXPERIMENT)}` plus the row's method (its `smoke:` settings) "
        "and attack; the reference run has client 1 raising in every round.",
        "",
        "| attack | method | runtime | survived | counted | unharmed "
        "| accuracy (client 1 failing) | what happened |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in ROWS.items():
        for runtime in row.runtimes:
            cell = cells.get((name, runtime)) or Cell(name, runtime, None, None, None)
            lines.append(
                f"| {name}: {row.what} | {row.method} | {runtime} | {mark(cell.survived)} "
                f"| {mark(cell.counted)} | {mark(cell.unharmed)} | {accuracy(cell.final_accuracy)} "
                f"({accuracy(cell.reference_accuracy)}) | {short(cell.detail)} |"
            )
    lines += [
        "",
        "Byzantine clients (in process): "
        + " ".join(f"`{o}`" for o in BYZANTINE)
        + "; clients 1 (and 2) send w_global - 10 (w_client - w_global). Final accuracy:",
        "",
    ]
    if flips:
        lines += [
            "| aggregation | no attacker | 1 of 10 sign-flipping | 2 of 10 sign-flipping |",
            "|---|---|---|---|",
        ]
        for aggregation in dict.fromkeys(r["aggregation"] for r in flips):
            by = {r["sign_flippers"]: r for r in flips if r["aggregation"] == aggregation}
            lines.append(
                f"| {aggregation} | "
                + " | ".join(
                    accuracy(by[k]["final_accuracy"])
                    if k in by and by[k]["exit_code"] == 0
                    else ("failed" if k in by else "not measured")
                    for k in (0, 1, 2)
                )
                + " |"
            )
    else:
        lines.append("Not measured yet.")
    return lines


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--aggregations", default=",".join(AGGREGATIONS))
    parser.add_argument("--no-byzantine", action="store_true", help="leave out the Byzantine study")
    parser.add_argument("--only-byzantine", action="store_true", help="leave out the attack matrix")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "attacks")
    args = parser.parse_args()
    unknown = sorted(set(args.rows.split(",")) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)} (choose from: {', '.join(ROWS)})")
    path = args.out / "table.json"
    saved = json.loads(path.read_text()) if path.exists() else {"cells": [], "byzantine": []}
    cells = {(c["row"], c["runtime"]): Cell(**c) for c in saved["cells"]}
    references: dict = {}
    for runtime in [] if args.only_byzantine else args.runtimes.split(","):
        names = [n for n in args.rows.split(",") if runtime in ROWS[n].runtimes]
        if not names:
            continue
        with common.local_federation_for(runtime, args.out / "federation") as federation:
            for name in names:
                run = partial(one_cell, name, runtime, args.out, federation, references)
                cells[name, runtime] = common.run_cell(runtime, name, 18, run)
    flips = (
        saved["byzantine"]
        if args.no_byzantine
        else byzantine(args.aggregations.split(","), args.out)
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"cells": [asdict(c) for c in cells.values()], "byzantine": flips}, indent=1)
    )
    lines = matrix_lines(cells, flips)
    command = (
        "Command: `python benchmarks/attacks.py` (`--runtimes R --rows A --no-byzantine` "
        "measures those cells again, `--only-byzantine` the Byzantine study)"
    )
    common.publish_table(args.out / "table.md", ["# Attack matrix", "", *lines, "", command])
    common.publish_in_docs("attack_matrix", [*lines, "", command], data=grid_rows(cells))


if __name__ == "__main__":
    main()
