"""Accuracy comparison of several methods over several seeds on one set-up.

Runs ``fedimb method=<m> seed=<s> <overrides>`` for every pair (skipping pairs whose
run already completed, so an interrupted benchmark resumes), then writes

- ``<out>/<name>/table.md``: final and best test accuracy and final macro-F1 per method,
  mean ± std over seeds, plus each method's own extra metrics (e.g. FedBABU's
  fine-tuned accuracy);
- ``<out>/<name>/accuracy.png``: mean test accuracy per round with a ±std band.

    python benchmarks/compare_methods.py --name rebafl_mnist5k \\
        --methods fedavg,fedprox,rebafl --seeds 0,1,2 -- num_rounds=50 num_clients=20
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fedimb.results import read_metrics_csv  # noqa: E402


def run_arguments(method: str, seed: int, overrides: list[str]) -> list[str]:
    return [*overrides, f"method={method}", f"seed={seed}"]


def completed_run(runs: Path, name: str, seed: int, arguments: list[str]) -> Path | None:
    """An earlier completed run of ``name`` and ``seed`` with exactly these arguments."""
    import yaml

    for summary in sorted(runs.glob(f"{name}-s{seed}/*/*/summary.json")):
        recorded = yaml.safe_load((summary.parent / ".hydra" / "overrides.yaml").read_text()) or []
        recorded = [o for o in recorded if not o.startswith("output.root=")]
        if sorted(recorded) == sorted(arguments) and json.loads(summary.read_text()).get("completed"):
            return summary.parent
    return None


def ensure_run(runs: Path, method: str, seed: int, overrides: list[str], name: str | None = None) -> Path:
    """The folder of a completed run of ``method`` with ``seed`` in ``runs/<name or method>-s<seed>``:
    an earlier one with the same arguments, else a new one."""
    arguments = run_arguments(method, seed, overrides)
    folder = runs / f"{name or method}-s{seed}"
    done = completed_run(runs, name or method, seed, arguments)
    if done:
        return done
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "fedimb", *arguments, f"output.root={folder}"],
                            cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{method} seed {seed} failed: {result.stderr.strip()[-500:]}")
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    print(f"  {name or method} seed {seed}: {time.perf_counter() - start:.0f}s -> {run_dir}", flush=True)
    return run_dir


def publish_table(table: Path, lines: list[str]) -> Path:
    """Write a markdown table file, echo it and its path; return the path."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    print(table.read_text())
    print(table)
    return table


def mean_std(values: list[float], scale: float = 100.0, digits: int = 2) -> str:
    """mean ± sample std of ``values`` x ``scale`` ('-' when empty)."""
    if not values:
        return "-"
    arr = np.asarray(values, dtype=np.float64) * scale
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=1) if len(arr) > 1 else 0.0:.{digits}f}"


def extra_means(run_dir: Path, keys: list[str]) -> dict[str, float]:
    """Mean over rounds of the 'extra' metrics ``keys`` (e.g. a KL divergence per round)."""
    values: dict[str, list[float]] = {}
    for row in read_metrics_csv(run_dir / "metrics.csv"):
        if row["split"] == "extra" and row["metric"] in keys:
            values.setdefault(row["metric"], []).append(row["value"])
    return {k: float(np.mean(v)) for k, v in values.items()}


def extra_finals(run_dir: Path) -> dict[str, float]:
    """The last value of each 'extra' metric that is a score (name ends in accuracy/f1)."""
    finals: dict[str, float] = {}
    for row in read_metrics_csv(run_dir / "metrics.csv"):
        if row["split"] == "extra" and row["metric"].endswith(("accuracy", "f1")):
            finals[row["metric"]] = row["value"]
    return finals


def extra_last(run_dir: Path, keys: list[str]) -> dict[str, float]:
    """The value at the last round that reports it, of each 'extra' metric in ``keys``."""
    last: dict[str, float] = {}
    for row in read_metrics_csv(run_dir / "metrics.csv"):
        if row["split"] == "extra" and row["metric"] in keys:
            last[row["metric"]] = row["value"]
    return last


def accuracy_curve(run_dir: Path) -> dict[int, float]:
    return {
        r["round"]: r["value"] for r in read_metrics_csv(run_dir / "metrics.csv")
        if r["split"] == "test" and r["metric"] == "accuracy"
    }


def write_outputs(
    out: Path, name: str, methods, seeds, overrides, runs: dict, extra_keys: list[str], final_keys: list[str]
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [
        f"# {name}",
        "",
        f"Set-up: `{' '.join(overrides)}`; seeds {', '.join(map(str, seeds))}.",
        f"Machine: {platform.machine()}, {__import__('os').cpu_count()} CPUs.",
        "",
    ]
    summaries_of = {m: [json.loads((runs[m, s] / "summary.json").read_text()) for s in seeds] for m in methods}
    target = next((x.get("target_accuracy") for v in summaries_of.values() for x in v if x.get("target_accuracy")), None)
    header = "| method | final accuracy (%) | best accuracy (%) | final macro-F1 (%) |"
    if target:
        header += f" MB to {target:.0%} accuracy (runs reaching it) |"
    header += "".join(f" {k} (mean over rounds) |" for k in extra_keys)
    header += "".join(f" final {k} (%) |" for k in final_keys) + " other (%) |"
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method in methods:
        summaries = summaries_of[method]
        extras: dict[str, list[float]] = {}
        for s in seeds:
            for key, value in extra_finals(runs[method, s]).items():
                extras.setdefault(key, []).append(value)
        other = "; ".join(f"{k}: {mean_std(v)}" for k, v in sorted(extras.items())) or "-"
        row = (
            f"| {method} | {mean_std([x['final_accuracy'] for x in summaries])} | "
            f"{mean_std([x['best_accuracy'] for x in summaries])} | "
            f"{mean_std([x['final_macro_f1'] for x in summaries])} |"
        )
        if target:
            reached = [x["bytes_to_target"] for x in summaries if x.get("bytes_to_target") is not None]
            row += f" {mean_std(reached, scale=1e-6, digits=1)} ({len(reached)}/{len(summaries)}) |"
        means = [extra_means(runs[method, s], extra_keys) for s in seeds]
        for key in extra_keys:
            row += f" {mean_std([m[key] for m in means if key in m], scale=1.0, digits=3)} |"
        finals = [extra_last(runs[method, s], final_keys) for s in seeds]
        for key in final_keys:
            row += f" {mean_std([f[key] for f in finals if key in f])} |"
        lines.append(row + f" {other} |")
        curves = [accuracy_curve(runs[method, s]) for s in seeds]
        rounds = sorted(set.intersection(*(set(c) for c in curves)))
        values = np.array([[c[r] for r in rounds] for c in curves])
        ax.plot(rounds, values.mean(axis=0), label=method)
        ax.fill_between(rounds, values.mean(axis=0) - values.std(axis=0), values.mean(axis=0) + values.std(axis=0), alpha=0.15)
    extras_arg = f"--extras {','.join(extra_keys)} " if extra_keys else ""
    extras_arg += f"--finals {','.join(final_keys)} " if final_keys else ""
    lines += ["", f"Command: `python benchmarks/compare_methods.py --name {name} --methods {','.join(methods)} "
              f"--seeds {','.join(map(str, seeds))} {extras_arg}-- {' '.join(overrides)}`"]
    ax.set(xlabel="round", ylabel="test accuracy", title=name, ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)
    table = out / "table.md"
    table.write_text("\n".join(lines) + "\n")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--methods", required=True, help="comma-separated method names")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=REPO / "results")
    parser.add_argument("--extras", default="", help="comma-separated extra metrics to average over rounds")
    parser.add_argument("--finals", default="", help="comma-separated extra metrics reported at their last round")
    parser.add_argument("--runs", type=Path, default=None,
                        help="where the runs go (default <out>/<name>/runs); another benchmark's runs with the "
                             "same set-up are reused")
    parser.add_argument("overrides", nargs="*", help="fedimb overrides shared by every run")
    args = parser.parse_args()
    methods = args.methods.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    out = args.out / args.name
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = args.runs or out / "runs"
    runs: dict[tuple[str, int], Path] = {}
    for method in methods:
        for seed in seeds:
            runs[method, seed] = ensure_run(runs_dir, method, seed, args.overrides)
    extra_keys = [k for k in args.extras.split(",") if k]
    final_keys = [k for k in args.finals.split(",") if k]
    table = write_outputs(out, args.name, methods, seeds, args.overrides, runs, extra_keys, final_keys)
    print(table.read_text())
    print(table)


if __name__ == "__main__":
    main()
