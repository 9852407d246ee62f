"""Where a leaderboard plan's tuning spent its trials: every trial's parameters, replayed
from the record, binned by learning rate per set-up (``docs/tables/leaderboard_trials.md``),
and MOON's μ against its trials' validation scores (``leaderboard_trials_moon.md``).

A record keeps each tuning's trial values, not the parameters each trial got. The TPE
sampler's seed is fixed (``tune.sampler_seed``), so the parameters follow from the values
before them: the replay asks the same sampler with the same search space and tells it the
recorded values, trial by trial. Every replay is checked against the tuning's recorded
best parameters; one that differs stops the script (the sampler or the space changed).

    python benchmarks/accuracy/leaderboard_trials.py [--record DIR]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy import leaderboard_limits

#: the learning-rate bins of the table: the shared range log(0.001, 0.3) in half-decades
RATE_BINS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
#: a trial at chance: its validation score within this of the majority class (0.1 on
#: mnist5k's ten balanced classes)
CHANCE_MARGIN = leaderboard_limits.CHANCE_MARGIN


def tunings(record: Path) -> list[dict]:
    """The tuning steps of a record: set-up, method and the tuning's ``summary.json``."""
    found = []
    for lines in sorted(record.glob("*.jsonl")):
        for line in lines.read_text().splitlines():
            step = json.loads(line)
            if step["step"] == "tune":
                summary = json.loads(step["files"]["summary.json"])[step["method"]]
                found.append({"setup": step["setup"], "method": step["method"], **summary})
    return found


def replay(tuning: dict, sampler_seed: int, random_trials: int) -> list[dict]:
    """The trials of a recorded tuning with the parameters each got: the TPE sampler asked
    in turn and told each recorded value. Raises where the replayed best differs."""
    import optuna
    from hydra_plugins.hydra_optuna_sweeper._impl import create_params_from_overrides

    from fedimb.app.configuration.compose import compose
    from fedimb.app.configuration.search_space import search_space

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = compose([f"method={tuning['method']}", *tuning["overrides"]])
    overrides = [dimension.sweep_override() for dimension in search_space(config)]
    distributions, _ = create_params_from_overrides(overrides)
    sampler = optuna.samplers.TPESampler(seed=sampler_seed, n_startup_trials=random_trials)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    trials = []
    for value in tuning["values"]:
        trial = study.ask()
        for name, distribution in distributions.items():
            trial._suggest(name, distribution)  # as the Hydra sweeper asks
        scored = value is not None and math.isfinite(value)
        if scored:
            study.tell(trial, value)
        else:  # a failed trial, as the sweeper tells it
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        trials.append({"params": dict(trial.params), "value": value if scored else None})
    scored_trials = [t for t in trials if t["value"] is not None]
    best = max(scored_trials, key=lambda t: t["value"])["params"] if scored_trials else None
    if best is not None and best != tuning["best_params"]:
        raise SystemExit(
            f"{tuning['setup']} {tuning['method']}: the replay's best {best} is not the "
            f"recorded {tuning['best_params']}: the sampler or the search space changed"
        )
    return trials


def rate_rows(trials: list[dict], chance: float) -> list[dict]:
    """Per learning-rate bin: trials, those at chance, the median and best validation
    score, and the tunings whose best trial fell in it (``trials``: dicts with ``params``,
    ``value`` and ``best``)."""
    rows = []
    for low, high in zip(RATE_BINS, RATE_BINS[1:]):
        inside = [t for t in trials if low <= t["params"]["train.lr"] < high]
        values = [t["value"] if t["value"] is not None else 0.0 for t in inside]
        rows.append(
            {
                "rates": f"[{low:g}, {high:g})",
                "trials": len(inside),
                "at_chance": sum(v <= chance + CHANCE_MARGIN for v in values),
                "median": statistics.median(values) if values else None,
                "best": max(values) if values else None,
                "chosen": sum(t["best"] for t in inside),
            }
        )
    return rows


def with_best(trials: list[dict]) -> list[dict]:
    """The trials of one tuning, each marked where it is the tuning's best."""
    scored = [t for t in trials if t["value"] is not None]
    best = max(scored, key=lambda t: t["value"]) if scored else None
    return [{**t, "best": t is best} for t in trials]


def rate_lines(by_setup: dict[str, list[dict]]) -> list[str]:
    lines = [
        "| set-up | learning rate | trials | at chance | median validation | best | chosen |",
        "|---|---|---|---|---|---|---|",
    ]
    for setup, rows in by_setup.items():
        for row in rows:
            median = "—" if row["median"] is None else f"{row['median']:.3f}"
            best = "—" if row["best"] is None else f"{row['best']:.3f}"
            lines.append(
                f"| {setup} | {row['rates']} | {row['trials']} | {row['at_chance']} | "
                f"{median} | {best} | {row['chosen']} |"
            )
    return lines


def knob_lines(trials: list[tuple[str, dict]], knob: str) -> list[str]:
    """One row per set-up and value of a method's categorical knob: its trials' scores."""
    lines = [
        f"| set-up | {knob} | trials | validation scores (learning rate) |",
        "|---|---|---|---|",
    ]
    values = sorted({t["params"][knob] for _, t in trials})
    for setup in dict.fromkeys(s for s, _ in trials):
        for value in values:
            inside = [t for s, t in trials if s == setup and t["params"][knob] == value]
            scores = ", ".join(
                f"{t['value'] or 0:.2f} ({t['params']['train.lr']:.3g})" for t in inside
            )
            lines.append(f"| {setup} | {value:g} | {len(inside)} | {scores or '—'} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument(
        "--record", type=Path, default=leaderboard_limits.BEFORE, help="a leaderboard record"
    )
    args = parser.parse_args(argv)
    from fedimb.app.configuration.compose import compose

    tune = compose([]).tune
    by_setup: dict[str, list[dict]] = {}
    overrides: dict[str, list[str]] = {}
    moon: list[tuple[str, dict]] = []
    for tuning in tunings(args.record):
        trials = with_best(replay(tuning, int(tune.sampler_seed), int(tune.random_trials)))
        by_setup.setdefault(tuning["setup"], []).extend(trials)
        overrides[tuning["setup"]] = tuning["overrides"]
        if tuning["method"] == "moon":
            moon += [(tuning["setup"], t) for t in trials]
    rows = {
        setup: rate_rows(trials, leaderboard_limits.test_chance((*overrides[setup], "seed=0")))
        for setup, trials in by_setup.items()
    }
    caption = (
        f"Every tuning trial of the record in `{args.record.relative_to(common.REPO)}`, its "
        "parameters replayed from the recorded values (the TPE sampler's seed is fixed), "
        "binned by learning rate. At chance: a validation score within "
        f"{CHANCE_MARGIN} of the test set's majority-class share. Chosen: the tunings whose best "
        "trial fell in the bin."
    )
    common.publish_in_docs("leaderboard_trials", [*rate_lines(rows), "", caption])
    if moon:
        common.publish_in_docs("leaderboard_trials_moon", knob_lines(moon, "method.client.mu"))


if __name__ == "__main__":
    main()
