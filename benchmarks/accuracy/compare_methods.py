"""Accuracy comparison of several methods over several seeds on one set-up.

Runs ``fedimb method=<m> seed=<s> <overrides>`` for every pair (skipping pairs whose
run already completed, so an interrupted benchmark resumes), then writes

- ``<out>/<name>/table.md``: the table of ``fedimb report`` (:mod:`fedimb.cli.results.report`)
  with one row per method: final and best test accuracy, final macro-F1 and the
  method's own scores, mean ± std over seeds;
- ``<out>/<name>/accuracy.png``: mean test accuracy per round with a ±std band;
- ``docs/tables/data/<name>_rounds.csv``: the curves of ``accuracy.png`` (method, round,
  mean, sample std, runs), drawn beside the table as ``docs/img/bench/<name>_rounds.png``
  (:mod:`benchmarks.figures`), and
- ``docs/tables/<name>.md``: the table alone, where the docs include a table of that name
  (``run.sh``'s rebafl_mnist5k, astraea_mnist5k, grpfed_mnist5k,
  stateful_mnist5k_alpha0.1, stateful_mnist5k_alpha0.5,
  stateful_mnist5k_alpha0.1_scaffold_option2_normalised and
  stateful_mnist5k_alpha0.5_scaffold_option2_normalised).

    python benchmarks/accuracy/compare_methods.py --name rebafl_mnist5k \\
        --methods fedavg,fedprox,rebafl --seeds 0,1,2 -- num_rounds=50 num_clients=20
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from fedimb.cli.results.report import accuracy_plot
from fedimb.cli.results.report_tables import comparison_table, metric_curve


def run_arguments(method: str, seed: int, overrides: list[str]) -> list[str]:
    return [*overrides, f"method={method}", f"seed={seed}"]


def completed_run(runs: Path, name: str, seed: int, arguments: list[str]) -> Path | None:
    """An earlier completed run of ``name`` and ``seed`` with exactly these arguments."""
    import yaml

    for summary in sorted(runs.glob(f"{name}-s{seed}/*/*/summary.json")):
        recorded = yaml.safe_load((summary.parent / ".hydra" / "overrides.yaml").read_text()) or []
        recorded = [o for o in recorded if not o.startswith("output.root=")]
        if sorted(recorded) == sorted(arguments) and json.loads(summary.read_text()).get(
            "completed"
        ):
            return summary.parent
    return None


def ensure_run(
    runs: Path, method: str, seed: int, overrides: list[str], name: str | None = None
) -> Path:
    """The folder of a completed run of ``method`` with ``seed`` in
    ``runs/<name or method>-s<seed>``: an earlier one with the same arguments, else a new one."""
    arguments = run_arguments(method, seed, overrides)
    folder = runs / f"{name or method}-s{seed}"
    done = completed_run(runs, name or method, seed, arguments)
    if done:
        return done
    start = time.perf_counter()
    result = common.run_fedimb(*arguments, f"output.root={folder}")
    if result.returncode != 0:
        raise SystemExit(f"{method} seed {seed} failed: {result.stderr.strip()[-500:]}")
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    print(
        f"  {name or method} seed {seed}: {time.perf_counter() - start:.0f}s -> {run_dir}",
        flush=True,
    )
    return run_dir


def ensure_runs(requests: list[tuple[Path, str, int, list[str]]], jobs: int = 1) -> list[Path]:
    """:func:`ensure_run` for every ``(runs, method, seed, overrides)``, ``jobs`` at a time
    (with ``runtime=in_process`` one run uses one core, so ``jobs`` = cores fills the
    machine); the folders in the order of the requests."""
    if jobs <= 1:
        return [ensure_run(*request) for request in requests]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda request: ensure_run(*request), requests))


def round_rows(groups: dict[str, list]) -> list[dict]:
    """Test accuracy per round of every group: mean and sample std over its runs, one row
    per method and round (the rounds every run of the method reached); the std is empty
    where one run gives no spread."""
    import numpy as np

    rows = []
    for method, runs in groups.items():
        curves = [metric_curve(run) for run in runs]
        for round_ in sorted(set.intersection(*(set(c) for c in curves))):
            values = np.array([c[round_] for c in curves])
            std = f"{values.std(ddof=1):.4f}" if len(values) > 1 else ""
            rows.append(
                {
                    "method": method,
                    "round": round_,
                    "mean": f"{values.mean():.4f}",
                    "std": std,
                    "runs": len(values),
                }
            )
    return rows


def method_rows(groups: dict[str, list]) -> list[dict]:
    """The data of the table's figure: per method, the final test accuracy (%) as mean and
    sample std over its runs (the std empty for one run) and the mean best accuracy over
    rounds (empty where no run has one)."""
    from fedimb.cli.results.report_tables import records_of

    rows = []
    for method, records in records_of(groups).items():
        final, final_std = common.mean_and_std([r.summary.get("final_accuracy") for r in records])
        best = [r.summary.get("best_accuracy") for r in records]  # None: not measured
        rows.append(
            {
                "method": method,
                "runs": len(records),
                "final_accuracy": final,
                "final_accuracy_std": final_std,
                "best_accuracy": common.mean_and_std(best)[0],
            }
        )
    return rows


def write_outputs(
    out: Path, name: str, methods, seeds, overrides, runs: dict, mean_keys: list[str]
) -> Path:
    """``table.md`` (the table of :mod:`fedimb.cli.results.report`, one row per method) and
    ``accuracy.png`` in ``out``."""
    groups = {m: [runs[m, s] for s in seeds] for m in methods}
    extras_arg = f"--extras {','.join(mean_keys)} " if mean_keys else ""
    lines = [
        f"# {name}",
        "",
        f"Set-up: `{' '.join(overrides)}`; seeds {', '.join(map(str, seeds))}.",
        f"Machine: {common.machine()}.",
        "",
        *comparison_table(groups, mean_keys),
        "",
        f"Command: `python benchmarks/accuracy/compare_methods.py --name {name} --methods "
        f"{','.join(methods)} --seeds {','.join(map(str, seeds))} {extras_arg}-- "
        f"{' '.join(overrides)}`",
    ]
    accuracy_plot(groups, out / "accuracy.png", name)
    if (common.DOCS_TABLES / f"{name}.md").exists():
        common.publish_data(f"{name}_rounds", round_rows(groups))
    return common.publish_results(
        out / "table.md", name, lines, new=False, data=method_rows(groups)
    )


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--methods", required=True, help="comma-separated method names")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=common.REPO / "results")
    parser.add_argument(
        "--extras", default="", help="comma-separated extra metrics to average over rounds"
    )
    parser.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="where the runs go (default <out>/<name>/runs); another benchmark's runs with the "
        "same set-up are reused",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at a time (one core each with runtime=in_process)"
    )
    parser.add_argument("overrides", nargs="*", help="fedimb overrides shared by every run")
    args = parser.parse_args()
    methods = args.methods.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    out = args.out / args.name
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = args.runs or out / "runs"
    pairs = [(method, seed) for method in methods for seed in seeds]
    folders = ensure_runs(
        [(runs_dir, method, seed, args.overrides) for method, seed in pairs], args.jobs
    )
    runs = dict(zip(pairs, folders))
    write_outputs(
        out,
        args.name,
        methods,
        seeds,
        args.overrides,
        runs,
        [k for k in args.extras.split(",") if k],
    )


if __name__ == "__main__":
    main()
