"""The leaderboard: every method tuned with the same budget on the label-skew suite, then
compared with the tuned reference over ten report seeds (0-9, fixed before any result).
The plans (set-ups, methods, budget) are in :mod:`leaderboard_suites`.

For every set-up and method: ``fedimb tune`` (the same trials and rounds for every
method, each trial on the tuning seeds 100 and 101 and diverged where either diverges:
:mod:`fedimb.cli.tune.divergence`), then ten report runs (seeds 0-9) from the tuned
experiment file, then ``fedimb compare --against <reference> --metric
selected_test_accuracy`` (the test accuracy at the round of best validation accuracy:
the model chosen without the test set, not the round the run happened to stop on, which
under dropout swings by points from round to round). Before it starts, a calibration
(two rounds of every method on the costliest set-up, and of the reference on the others)
times the plan, printed per phase; ``--estimate-only`` prints it, writes it to
``docs/tables/leaderboard_cost.md`` and stops. The calibration counts CPU seconds, not
wall time: a run uses one core (one torch thread), so its CPU time is its time on an idle
core whatever else the machine runs.

The personalised table (``personal_leaderboard.md``) runs first, then the global one. The
set-ups run the cheapest first (by the calibration), each method tuned and then run on
the report seeds in one task, so that whole set-ups finish early; ``--table-only`` writes
the table of the set-ups finished so far (from the record, without running), and the full
run writes it at its end, naming the set-ups not finished; ``--interim SUITE`` with it
also compares, in a set-up not finished, the methods that have finished there.

Beside the table, :mod:`leaderboard_limits` writes per set-up the report runs that ended
at chance, in this plan and in the record of the plan before it (one tuning seed, five
report seeds), and the smallest difference the paired test detects with 80% power at
Holm's first threshold (``docs/tables/leaderboard_chance.md``, ``leaderboard_power.md``;
the personalised table's ``personal_leaderboard_power.md``).

Rerunning the same command resumes: tuning skips completed trials (``fedimb tune``
replays them) and report runs with a completed ``summary.json`` in their fixed folder
(``<out>/runs/<set-up>/<method>/s<seed>``) are not run again. The full suite also keeps
each finished step's few files in ``benchmarks/results/leaderboard/`` (``--record``;
:mod:`leaderboard_record`: one JSON Lines file per set-up), committed, so that a run
started on one clone resumes on another. Writes ``<out>/leaderboard.md``
and, for the full suite, ``docs/tables/leaderboard.md``, ``docs/tables/data/leaderboard.csv``
and ``docs/img/bench/leaderboard.png``.

    python benchmarks/accuracy/leaderboard.py [--estimate-only] [--jobs 2] [--out DIR]
    python benchmarks/accuracy/leaderboard.py --smoke --out DIR   # digits, about a minute
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy import leaderboard_limits, leaderboard_record
from benchmarks.accuracy.leaderboard_suites import (
    METRIC,
    REFERENCE,
    Suite,
    full_suite,
    personal_suite,
    smoke_suite,
)

# -- running one thing --------------------------------------------------------------------


def setup_settings(suite: Suite, setup: str, method: str | None = None) -> list[str]:
    """Every run's settings of ``setup`` (as ``fedimb tune`` gets them), no dropout where
    the set-up names none."""
    overrides = suite.run_overrides(setup, method)
    if not any(o.startswith("dropout=") for o in overrides):
        overrides.append("dropout=none")
    return overrides


def check_cells(suite: Suite) -> None:
    """Every (set-up, method) of the plan composes into a valid configuration: a cell that
    does not fails here, in seconds, not hours into the run."""
    from fedimb.app.configuration.compose import compose
    from fedimb.core.errors import ConfigError

    errors = []
    for setup in suite.setups:
        for method in suite.setup_methods(setup):
            try:
                compose([*setup_settings(suite, setup, method), f"method={method}"])
            except ConfigError as err:
                errors.append(f"{setup} {method}: {err}")
    if errors:
        raise SystemExit(f"{len(errors)} cells of the plan are not valid:\n" + "\n".join(errors))


def run_into(folder: Path, arguments: list[str]) -> tuple[dict, float]:
    """``fedimb <arguments>`` into the fixed run folder ``folder``: its summary and the CPU
    seconds the run took (load-independent: with one torch thread a run is its CPU time on
    an idle core). A folder left by an interrupted run is removed first."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    command = common.fedimb_command(
        *arguments, "checkpoint.enabled=false", f"hydra.run.dir={folder}"
    )
    log = folder.parent / f"{folder.name}.log"
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=common.REPO, stdout=output, stderr=output)
        _, status, usage = os.wait4(process.pid, 0)
    summary = folder / "summary.json"
    if os.waitstatus_to_exitcode(status) != 0 or not summary.is_file():
        raise SystemExit(f"{folder} failed: {log.read_text().strip()[-800:]}")
    log.unlink()
    return json.loads(summary.read_text()), usage.ru_utime + usage.ru_stime


# -- the cost -----------------------------------------------------------------------------


def calibrate(suite: Suite, out: Path, jobs: int) -> dict[str, dict[str, float]]:
    """Seconds of process start-up and per round of every method on the calibration
    set-up, and of FedAvg on every set-up: two rounds each (more where a method's stages
    need them); kept in ``<out>/calibration.json``, where a rerun finds the cells it timed."""
    cache = out / "calibration.json"
    timings = json.loads(cache.read_text()) if cache.is_file() else {}
    cells = [(suite.calibration_setup, m) for m in suite.methods]
    cells += [(s, suite.reference) for s in suite.setups if s != suite.calibration_setup]

    def time_one(cell: tuple[str, str]) -> None:
        setup, method = cell
        arguments = [*setup_settings(suite, setup, method), f"method={method}", "seed=0"]
        arguments += calibration_rounds(method)
        if timings.get(f"{setup}/{method}", {}).get("arguments") == arguments:
            return
        started = time.perf_counter()
        summary, cpu = run_into(out / "calibration" / f"{setup}-{method}", arguments)
        rounds = max(summary["num_rounds"], 1)
        # the rounds' share of the CPU time: their share of the run's wall time
        training = cpu * min(1.0, summary["wall_seconds"] / (time.perf_counter() - started))
        print(
            f"[leaderboard] calibrate {setup} {method}: {training / rounds:.2f} s per round",
            flush=True,
        )
        timings[f"{setup}/{method}"] = {
            "arguments": arguments,
            "start": cpu - training,
            "round": training / rounds,
        }
        cache.write_text(json.dumps(timings, indent=1))

    parallel(time_one, cells, jobs)
    return timings


def calibration_rounds(method: str) -> list[str]:
    """Two rounds, or the method's shortest complete run where its stages need more rounds
    (its YAML's ``smoke``); a ``smoke`` list that only shrinks the method is not used, so
    that the method is timed with its own settings."""
    from fedimb.app.configuration.compose import smoke_overrides

    smoke = smoke_overrides(method)
    return smoke if any(o.startswith("num_rounds=") for o in smoke) else ["num_rounds=2"]


def run_seconds(suite: Suite, timings: dict, setup: str, method: str, runs: int = 1) -> float:
    """Estimated CPU seconds of ``runs`` runs in one process (a tuning's trials share one):
    the method's start-up and rounds on the calibration set-up, the rounds scaled by
    FedAvg's ratio between ``setup`` and that set-up."""
    own = timings[f"{suite.calibration_setup}/{method}"]
    scale = (
        timings[f"{setup}/{suite.reference}"]["round"]
        / timings[f"{suite.calibration_setup}/{suite.reference}"]["round"]
    )
    return own["start"] + runs * suite.setup_rounds(setup) * own["round"] * scale


def step_seconds(suite: Suite, timings: dict, setup: str, method: str, phase: str) -> float:
    """Estimated CPU seconds of one step: a method's whole tuning (every trial on every
    tuning seed: a trial that diverges on its first seed costs less), or one report run."""
    if phase == "tuning":
        return run_seconds(suite, timings, setup, method, tuning_runs(suite))
    return run_seconds(suite, timings, setup, method)


def estimate_rows(suite: Suite, timings: dict, jobs: int) -> list[dict]:
    """The plan's cost per phase and set-up: runs, and hours with ``jobs`` runs at a time."""
    rows = []
    for phase, steps, runs_per_method in (
        ("tuning", 1, tuning_runs(suite)),
        ("report runs", len(suite.seeds), len(suite.seeds)),
    ):
        for setup in suite.setups:
            methods = suite.setup_methods(setup)
            seconds = steps * sum(step_seconds(suite, timings, setup, m, phase) for m in methods)
            runs = runs_per_method * len(methods)
            rows.append(
                {"phase": phase, "setup": setup, "runs": runs, "hours": seconds / jobs / 3600}
            )
    return [{**row, "jobs": jobs} for row in rows]


def estimate_lines(rows: list[dict]) -> list[str]:
    """The cost of :func:`estimate_rows` as a Markdown table, with the total."""
    lines = [
        f"| phase | set-up | runs | hours ({rows[0]['jobs']} at a time) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['phase']} | {row['setup']} | {row['runs']} | {row['hours']:.2f} |")
    lines.append(f"| **total** | | | **{sum(row['hours'] for row in rows):.2f}** |")
    return lines


# -- progress -----------------------------------------------------------------------------


@dataclasses.dataclass
class Progress:
    """One line per finished step: phase, set-up, method, seed, elapsed, remaining: the
    estimate of the steps left (CPU seconds over ``jobs`` cores), scaled by how long the
    steps run here took against their estimate (steps done before are not counted)."""

    planned: float  # estimated CPU seconds of every step
    jobs: int
    started: float = dataclasses.field(default_factory=time.perf_counter)
    done: float = 0.0  # the estimate of the steps finished, here or before
    ran: float = 0.0  # the estimate of the steps run here

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def step(self, what: str, estimate: float, skipped: bool = False) -> None:
        with self.lock:
            self.done += estimate
            self.ran += 0 if skipped else estimate
            elapsed = time.perf_counter() - self.started
            pace = elapsed / self.ran if self.ran else 1 / self.jobs
            print(
                f"[leaderboard] {what}{' (done before)' if skipped else ''} | elapsed "
                f"{clock(elapsed)} | remaining ~{clock((self.planned - self.done) * pace)}",
                flush=True,
            )


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def parallel(work: Callable, items: list, jobs: int) -> list:
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        return list(pool.map(work, items))


# -- the steps ----------------------------------------------------------------------------


def tune_folder(out: Path, setup: str, method: str) -> Path:
    return out / "tune" / setup / method


#: a tuning in its own process (``fedimb tune``'s Python API; the arguments: method, folder,
#: trials, overrides...), writing the tuned experiment file's path to ``<folder>/experiment.txt``
TUNE = (
    "import sys; from pathlib import Path; from fedimb.cli.tune.tuning import tune_methods; "
    "m, out, trials, *overrides = sys.argv[1:]; "
    "path = tune_methods([m], overrides, int(trials), Path(out))[m]; "
    "(Path(out) / 'experiment.txt').write_text(str(path))"
)


def tuning_runs(suite: Suite) -> int:
    """The runs of one method's tuning, at most: every trial on every tuning seed."""
    return suite.trials * len(suite.tuning_seeds)


def pair_plan(suite: Suite, setup: str, method: str) -> dict:
    """What a set-up's tuning and report runs were run under: a tuning or a report run of
    another plan (the set-up or the budget changed since) is not reused."""
    return {
        "trials": suite.trials,
        "tuning_seeds": suite.tuning_seeds,
        "overrides": setup_settings(suite, setup, method),
    }


def tune(suite: Suite, out: Path, setup: str, method: str) -> Path:
    """``fedimb tune`` of ``method`` on ``setup`` in its own process (resumed where it
    stopped); the tuned experiment file. A finished tuning of the same plan is reused."""
    folder = tune_folder(out, setup, method)
    done = folder / "leaderboard_done.json"
    plan = pair_plan(suite, setup, method)
    if done.is_file():
        record = json.loads(done.read_text())
        experiment = tuned_experiment(folder, record["experiment"])
        if record["plan"] == plan and experiment.is_file():
            return experiment
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-c", TUNE, method, str(folder), str(suite.trials)]
    seeds = f"tune.seeds=[{','.join(map(str, suite.tuning_seeds))}]"
    result = subprocess.run([*command, *plan["overrides"], seeds], cwd=common.REPO)
    if result.returncode != 0 or not (folder / "experiment.txt").is_file():
        raise SystemExit(f"tuning {method} on {setup} failed (exit {result.returncode})")
    experiment = Path((folder / "experiment.txt").read_text().strip())
    named = str(experiment.relative_to(folder))
    done.write_text(json.dumps({"plan": plan, "experiment": named}, indent=1))
    return experiment


def tuned_experiment(folder: Path, named: str) -> Path:
    """The experiment file a finished tuning's record names, in its folder ``conf/experiment/``
    (a record restored from another clone may name it by that clone's absolute path)."""
    return folder / "conf" / "experiment" / Path(named).name


def report_folder(out: Path, setup: str, method: str, seed: int) -> Path:
    return out / "runs" / setup / method / f"s{seed}"


def experiment_arguments(experiment: Path) -> list[str]:
    """The arguments that run a tuned experiment file, ``<conf>/experiment/<name>.yaml``, as
    ``fedimb tune`` prints them: ``--config-dir <conf> +experiment=<name>``."""
    return ["--config-dir", str(experiment.parent.parent), f"+experiment={experiment.stem}"]


def report_run(experiment: Path, folder: Path, seed: int, plan: dict) -> None:
    """One report run of a tuned experiment file into its fixed folder, the test set read,
    with the plan it belongs to (``leaderboard_plan.json``)."""
    run_into(folder, [*experiment_arguments(experiment), f"seed={seed}", "evaluation.test=true"])
    (folder / leaderboard_record.PLAN_FILE).write_text(json.dumps(plan, indent=1))


def current_run(folder: Path, plan: dict) -> bool:
    """A finished report run of ``plan``."""
    file = folder / leaderboard_record.PLAN_FILE
    return (
        leaderboard_record.finished_run(folder)
        and file.is_file()
        and json.loads(file.read_text()) == plan
    )


# -- the comparison -----------------------------------------------------------------------


def finished_runs(suite: Suite, out: Path, setup: str) -> int:
    """How many of ``setup``'s report runs have finished under the current plan."""
    return sum(
        current_run(report_folder(out, setup, m, seed), pair_plan(suite, setup, m))
        for m in suite.setup_methods(setup)
        for seed in suite.seeds
    )


def finished_setups(suite: Suite, out: Path) -> list[str]:
    """The set-ups whose every report run has finished, in the suite's order."""
    return [s for s in suite.setups if finished_runs(suite, out, s) == planned_runs(suite, s)]


def planned_runs(suite: Suite, setup: str) -> int:
    return len(suite.setup_methods(setup)) * len(suite.seeds)


def finished_methods(suite: Suite, out: Path, setup: str) -> list[str]:
    """The methods of ``setup`` whose every report run has finished under the current plan."""
    plan = {m: pair_plan(suite, setup, m) for m in suite.setup_methods(setup)}
    return [
        m
        for m in suite.setup_methods(setup)
        if all(current_run(report_folder(out, setup, m, seed), plan[m]) for seed in suite.seeds)
    ]


def interim_setups(suite: Suite, out: Path) -> dict[str, list[str]]:
    """The set-ups not finished in which the reference and at least one other method have:
    set-up -> those methods (an interim table compares them alone)."""
    found = {}
    for setup in suite.setups:
        methods = finished_methods(suite, out, setup)
        if len(methods) < len(suite.setup_methods(setup)) and suite.reference in methods:
            if len(methods) > 1:
                found[setup] = methods
    return found


def compare(
    suite: Suite,
    out: Path,
    setups: list[str],
    metric: str | None = None,
    only: dict[str, list[str]] | None = None,
) -> dict[str, list]:
    """``fedimb compare --against <reference> --metric <metric>`` (the suite's first metric
    unless named) over each of ``setups``' report runs (those of the methods ``only`` names
    for a set-up, where it does): set-up -> its comparisons (one, unless the runs split it)."""
    from fedimb.cli.results.compare import compare_runs

    metric = metric or suite.metrics[0]
    only = only or {}

    def folders(setup: str) -> list[Path]:
        if setup not in only:
            return [out / "runs" / setup]
        return [out / "runs" / setup / method for method in only[setup]]

    return {setup: compare_runs(folders(setup), suite.reference, metric) for setup in setups}


def setup_label(setup: str, comparison, count: int) -> str:
    return setup if count == 1 else f"{setup} ({comparison.name})"


def marked(line: str) -> str:
    """A table row with its verdict in bold where the difference is real."""
    for word in ("better", "worse"):
        line = line.replace(f"| {word} (", f"| **{word}** (")
    return line


def leaderboard_lines(comparisons: dict[str, list], metric: str = METRIC) -> list[str]:
    """The caption of ``fedimb compare``, then one table: a row per set-up and method."""
    from fedimb.cli.results.compare_tables import caption, methods_table

    reference = next((c.reference for found in comparisons.values() for c in found), None)
    lines = [*caption(metric, reference), ""]
    header_done = False
    for setup, found in comparisons.items():
        for comparison in found:
            table = methods_table(comparison)
            if not header_done:
                lines += ["| set-up " + table[0], "|---" + table[1]]
                header_done = True
            label = setup_label(setup, comparison, len(found))
            lines += [marked(f"| {label} " + row) for row in table[2:]]
    return lines


def leaderboard_rows(comparisons: dict[str, list]) -> list[dict]:
    """One row per set-up and method: the figure's data (fractions, not %)."""
    rows = []
    for setup, found in comparisons.items():
        for comparison in found:
            for row in comparison.methods:
                interval, diff = row.interval, row.difference
                rows.append(
                    {
                        "setup": setup_label(setup, comparison, len(found)),
                        "method": row.label,
                        "n": interval.n if interval else 0,
                        "mean": interval.mean if interval else "",
                        "low": "" if interval is None or interval.low is None else interval.low,
                        "high": "" if interval is None or interval.high is None else interval.high,
                        "difference": "" if diff is None or diff.mean is None else diff.mean,
                        "difference_low": "" if diff is None or diff.low is None else diff.low,
                        "difference_high": "" if diff is None or diff.high is None else diff.high,
                        "holm_p": "" if row.holm_p is None else row.holm_p,
                    }
                )
    return rows


def write_leaderboard(suite: Suite, out: Path, command: str, interim: bool = False) -> Path:
    """``<out>/<name>.md`` (and, for a published suite, the docs' table, data and figure)
    of the set-ups whose report runs have all finished, a table per metric of the suite;
    the others are named, with how many of their runs have, until they finish. With
    ``interim``, a set-up not finished is compared too over the methods that have
    finished there (:func:`interim_setups`), and said to be interim."""
    finished = finished_setups(suite, out)
    partial = interim_setups(suite, out) if interim else {}
    compared = [s for s in suite.setups if s in finished or s in partial]
    if not compared:
        raise SystemExit("no set-up has finished its report runs yet: nothing to compare")
    comparisons = compare(suite, out, compared, only=partial)
    setups = "; ".join(f"{name}: `{' '.join(o)}`" for name, o in suite.setups.items())
    pending = [
        f"{s} ({finished_runs(suite, out, s)} of {planned_runs(suite, s)} report runs)"
        for s in suite.setups
        if s not in compared
    ]
    interim_lines = [
        f"Interim on {s}: the {len(methods)} of its {len(suite.setup_methods(s))} methods "
        f"that have finished, compared among themselves (Holm over {len(methods) - 1} "
        f"test{'s' if len(methods) > 2 else ''}: the final table's thresholds are stricter). "
        "Not finished yet: "
        f"{', '.join(m for m in suite.setup_methods(s) if m not in methods)}."
        for s, methods in partial.items()
    ]
    more = [
        line
        for metric in suite.metrics[1:]
        for line in [
            "",
            *leaderboard_lines(compare(suite, out, compared, metric, only=partial), metric),
        ]
    ]
    lines = [
        *leaderboard_lines(comparisons, suite.metrics[0]),
        *more,
        "",
        *([*interim_lines, ""] if interim_lines else []),
        *([f"Not finished yet: {', '.join(pending)}.", ""] if pending else []),
        f"Set-ups: {setups}; "
        f"every run: `{' '.join(suite.shared)} num_rounds={suite.rounds}`; "
        f"{suite.trials} tuning trials per method; report seeds "
        f"{', '.join(map(str, suite.seeds))}. Machine: {common.machine()}.",
        *excluded_lines(suite),
        "",
        f"Command: `{command}`",
    ]
    table = common.publish_table(out / f"{suite.name}.md", lines)
    rows = leaderboard_rows(comparisons)
    chance, power = limits_tables(suite, comparisons)
    tables = {f"{suite.name}_power": power}
    if suite.reference == REFERENCE:  # a global model's test set: its majority class
        tables["leaderboard_chance"] = chance
    for name, found in tables.items():
        common.publish_table(out / f"{name}.md", found)
    if suite.publish:
        common.publish_in_docs(suite.name, lines)
        common.publish_data(suite.name, rows)
        for name, found in tables.items():
            common.publish_in_docs(name, found)
    else:
        write_csv(out / f"{suite.name}.csv", rows)
    return table


def limits_tables(suite: Suite, comparisons: dict[str, list]) -> tuple[list[str], list[str]]:
    """The runs at chance per set-up, before (the previous plan's record) and after (the
    finished set-ups of ``comparisons``), and the smallest difference each finished
    set-up's paired test detects (:mod:`leaderboard_limits`)."""
    chance_rows, power = [], {}
    for setup in suite.setups:
        found = comparisons.get(setup)
        overrides = tuple(setup_settings(suite, setup))

        def chance(seed: int, overrides: tuple[str, ...] = overrides) -> float:
            return leaderboard_limits.test_chance((*overrides, f"seed={seed}"))

        before = leaderboard_limits.recorded_summaries(leaderboard_limits.BEFORE, setup)
        after = [s for c in found or [] for s in leaderboard_limits.comparison_summaries(c)]
        chance_rows.append(
            {
                "setup": setup,
                "chance": chance(0),
                "before": leaderboard_limits.runs_at_chance(before, chance) if before else None,
                "before_runs": len(before),
                "after": leaderboard_limits.runs_at_chance(after, chance) if found else None,
                "after_runs": len(after),
            }
        )
        for comparison in found or []:
            power[setup_label(setup, comparison, len(found))] = leaderboard_limits.detectable(
                comparison
            )
    chance_caption = (
        "A run is at chance where its final test accuracy is within "
        f"{leaderboard_limits.CHANCE_MARGIN} of the test set's majority-class share. Before: "
        "the previous plan (tuning on one seed, five report seeds)."
    )
    power_caption = (
        f"The smallest true difference a two-sided paired t-test finds with "
        f"{int(100 * leaderboard_limits.POWER)}% power at Holm's first threshold (0.05 over "
        "the tests), for the median over methods of the standard deviation of a paired "
        f"difference with {suite.reference}."
    )
    return (
        [*leaderboard_limits.chance_lines(chance_rows), "", chance_caption],
        [*leaderboard_limits.detectable_lines(power), "", power_caption],
    )


def write_csv(path: Path, rows: list[dict]) -> None:
    import csv

    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# -- the whole ----------------------------------------------------------------------------


def cheapest_first(suite: Suite, timings: dict) -> list[str]:
    """The set-ups by their estimated cost, cheapest first: the first finished set-ups
    come early, and a table of them can be written while the others run."""
    return sorted(
        suite.setups,
        key=lambda setup: sum(
            run_seconds(suite, timings, setup, m) for m in suite.setup_methods(setup)
        ),
    )


def run_suite(
    suite: Suite, out: Path, timings: dict, jobs: int, record: Path | None = None
) -> list[str]:
    """Every (set-up, method), the cheapest set-up first: tune it, then run its report
    seeds, with a progress line per step, each finished step kept in ``record``
    (:mod:`leaderboard_record`); the steps that failed (the others go on: a rerun retries
    only those)."""
    pairs = [(s, m) for s in cheapest_first(suite, timings) for m in suite.setup_methods(s)]
    tuning = {p: step_seconds(suite, timings, *p, "tuning") for p in pairs}
    estimate = {p: step_seconds(suite, timings, *p, "report runs") for p in pairs}
    planned = sum(tuning.values()) + len(suite.seeds) * sum(estimate.values())
    progress = Progress(planned, jobs)
    failed: list[str] = []

    def tune_step(pair: tuple[str, str]) -> Path | None:
        setup, method = pair
        try:
            experiment = tune(suite, out, setup, method)
            leaderboard_record.record_tuning(out, record, setup, method)
        except SystemExit as err:
            failed.append(f"tune {setup} {method}: {err}")
            experiment = None
        progress.step(f"tune {setup} {method}{'' if experiment else ' FAILED'}", tuning[pair])
        return experiment

    def report_step(cell: tuple[str, str, int], experiment: Path | None) -> None:
        setup, method, seed = cell
        folder = report_folder(out, setup, method, seed)
        plan = pair_plan(suite, setup, method)
        skipped = current_run(folder, plan)
        what = f"report {setup} {method} seed {seed}"
        try:
            if not skipped:
                if experiment is None:
                    raise SystemExit("its tuning failed")
                report_run(experiment, folder, seed, plan)
                leaderboard_record.record_report(out, record, setup, method, seed)
        except SystemExit as err:
            failed.append(f"{what}: {err}")
            what += " FAILED"
        progress.step(what, estimate[setup, method], skipped)

    def pair_step(pair: tuple[str, str]) -> None:
        experiment = tune_step(pair)
        for seed in suite.seeds:
            report_step((*pair, seed), experiment)

    parallel(pair_step, pairs, jobs)
    return failed


def main(argv: list[str] | None = None) -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--smoke", action="store_true", help="the tiny suite (digits, a minute)")
    parser.add_argument("--estimate-only", action="store_true", help="print the cost and stop")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="write the table of the set-ups finished so far and stop",
    )
    parser.add_argument(
        "--interim",
        nargs="*",
        default=[],
        metavar="SUITE",
        help="with --table-only: in these suites (leaderboard, personal_leaderboard), also "
        "compare the finished methods of a set-up not finished",
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    parser.add_argument("--out", type=Path, default=None, help="default: results/leaderboard")
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="where finished steps are kept across clones (default for the full suite: "
        "benchmarks/results/leaderboard; none for --smoke)",
    )
    args = parser.parse_args(argv)
    # the personalised table first: the global one repeats the previous plan's set-ups
    suites = [smoke_suite()] if args.smoke else [personal_suite(), full_suite()]
    out = (args.out or common.REPO / "results" / "leaderboard").resolve()
    out.mkdir(parents=True, exist_ok=True)
    record = args.record or (None if args.smoke else leaderboard_record.RECORD)
    if record is not None:
        restored, recorded = leaderboard_record.merge(out, record)
        print(f"[leaderboard] {record}: {restored} steps restored, {recorded} recorded")
    command = "python benchmarks/accuracy/leaderboard.py" + (" --smoke" if args.smoke else "")
    if args.table_only:
        for suite in suites:
            interim = suite.name in args.interim
            if finished_setups(suite, out) or (interim and interim_setups(suite, out)):
                how = f" --table-only --interim {suite.name}" if interim else ""
                written = write_leaderboard(suite, out, command + how, interim)
                print(f"[leaderboard] table: {written}")
        return
    for suite in suites:
        check_cells(suite)
    timings = {}
    for suite in suites:
        print(
            f"[leaderboard] calibrating {suite.name}: {len(suite.methods)} methods, "
            f"{len(suite.setups)} set-ups"
        )
        timings.update(calibrate(suite, out, args.jobs))
    leaderboard_record.record_calibration(out, record)
    cost_rows = [row for suite in suites for row in estimate_rows(suite, timings, args.jobs)]
    cost = estimate_lines(cost_rows)
    print("\n".join(["", "Estimated cost:", *cost, ""]), flush=True)
    if args.estimate_only:
        publish_plan(suites, out, cost, cost_rows, args.jobs)
        return
    failed = []
    for suite in suites:
        failed += run_suite(suite, out, timings, args.jobs, record)
        if finished_setups(suite, out):
            print(f"[leaderboard] table: {write_leaderboard(suite, out, command)}")
    if failed:
        raise SystemExit(
            f"{len(failed)} steps failed (rerun the same command to retry them):\n"
            + "\n".join(failed)
        )


def publish_plan(suites: list[Suite], out: Path, cost, cost_rows, jobs: int) -> None:
    """For the published suites: the cost, a pending table for a suite not run yet, and
    the runs at chance of the plan before."""
    if not suites[0].publish:
        return
    caption = cost_caption(suites, jobs)
    global_suite = next(s for s in suites if s.reference == REFERENCE)
    common.publish_in_docs("leaderboard_cost", [*cost, "", caption], data=cost_rows)
    for suite in suites:
        if not (common.DOCS_TABLES / f"{suite.name}.md").exists():
            common.publish_in_docs(suite.name, pending_lines(suite))
    finished = finished_setups(global_suite, out)
    found = compare(global_suite, out, finished) if finished else {}
    chance, _ = limits_tables(global_suite, found)
    common.publish_in_docs("leaderboard_chance", chance)


def pending_lines(suite: Suite) -> list[str]:
    """The docs' table before the first full run: what each set-up will hold."""
    lines = [
        "| set-up | methods | tuning runs | report runs | results |",
        "|---|---|---|---|---|",
    ]
    for setup in suite.setups:
        count = len(suite.setup_methods(setup))
        lines.append(
            f"| {setup} | {count} | {suite.trials * count} | "
            f"{len(suite.seeds) * count} | awaiting the first full run |"
        )
    return [*lines, "", f"Methods: {', '.join(suite.methods)}.", *excluded_lines(suite)]


def excluded_lines(suite: Suite) -> list[str]:
    """A line per set-up and reason: the methods it does not run, and why."""
    lines = []
    for setup, methods in suite.excluded.items():
        if setup not in suite.setups:
            continue
        for why in dict.fromkeys(methods.values()):
            named = ", ".join(m for m, reason in methods.items() if reason == why)
            lines.append(f"Not run on {setup}: {named} ({why}).")
    return lines


def cost_caption(suites: list[Suite], jobs: int) -> str:
    parts = []
    for suite in suites:
        horizons = ", ".join(f"{n} on {s}" for s, n in suite.horizons.items())
        fewer = ", ".join(
            f"{len(suite.setup_methods(s))} on {s}"
            for s in suite.setups
            if len(suite.setup_methods(s)) < len(suite.methods)
        )
        parts.append(
            f"{suite.name}: {len(suite.methods)} methods"
            + (f" ({fewer})" if fewer else "")
            + f" × {len(suite.setups)} set-ups × "
            f"({suite.trials} trials × {len(suite.tuning_seeds)} tuning seeds + "
            f"{len(suite.seeds)} seeds) × {suite.rounds} rounds"
            + (f" ({horizons})" if horizons else "")
        )
    calibration = ", ".join(s.calibration_setup for s in suites)
    return (
        f"Estimated from a calibration on {common.machine()} (the CPU seconds of two rounds "
        f"of every method on {calibration}, of the reference on the others), {jobs} runs "
        f"at a time on idle cores: {'; '.join(parts)}; the tuning at most (a trial that "
        "diverges on its first seed does not run the second). Command: "
        "`python benchmarks/accuracy/leaderboard.py --estimate-only`."
    )


if __name__ == "__main__":
    main()
