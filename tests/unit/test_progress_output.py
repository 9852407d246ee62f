"""What a run prints: the header, a line per round (clients by outcome, elapsed time and
ETA), the final line, the end of a sweep, and the client axis of curves.png. Runs are fed
fake ServerApp events with a fake clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from fedimb.app.configuration.compose import compose
from fedimb.cli.launch.sweep_end import SweepEnd, sweep_end_lines, sweep_runs
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.cli.rundir.progress import eta_seconds, format_duration, launch_line
from fedimb.core.events import format_event
from tests.run_events import start_event

MNIST = ["dataset=mnist5k", "num_clients=20", "num_rounds=30", "runtime=simulation", "device=cpu"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def round_event(
    number: int,
    seconds: float,
    accuracy: float,
    ok: int = 9,
    dropped: int = 11,
    errors: int = 0,
    rejected: int = 0,
) -> dict:
    return {
        "round": number,
        "stage": "train",
        "seconds": seconds,
        "test": {"accuracy": accuracy, "macro_f1": accuracy - 0.01, "loss": 0.5},
        "clients": {
            "sampled": ok + dropped + errors + rejected,
            "succeeded": ok,
            "dropped": dropped,
            "errors": errors,
            "rejected": rejected,
            "nonfinite": 0,
            "failures": dropped + errors + rejected,
        },
    }


@pytest.fixture
def recorded(tmp_path):
    """A recorder of a 30-round run whose lines land in a list, and its clock."""
    lines: list[str] = []
    clock = FakeClock()
    recorder = RunRecorder(tmp_path, compose(MNIST), echo=lines.append, clock=clock)
    recorder.feed(start_event(num_parameters=215370, num_clients=20, num_rounds=30))
    yield recorder, lines, clock
    recorder.close()


@pytest.mark.parametrize(
    "seconds, text",
    [(0.4, "0s"), (48, "48s"), (62, "1m02s"), (520, "8m40s"), (3599.6, "1h00m"), (7500, "2h05m")],
)
def test_durations_read_as_a_person_says_them(seconds, text):
    assert format_duration(seconds) == text


def test_eta_is_the_mean_round_time_after_the_first_times_the_rounds_left():
    assert (
        eta_seconds([40.0, 10.0, 20.0], remaining=27) == 15.0 * 27
    )  # the first round's start-up left out
    assert eta_seconds([40.0], remaining=29) == 40.0 * 29  # nothing else to go by yet
    assert eta_seconds([], remaining=30) is None
    assert eta_seconds([40.0, 10.0], remaining=0) == 0.0


def test_header_names_the_partition_dropout_runtime_and_device(recorded):
    _, lines, _ = recorded
    assert lines == [
        "[fedimb] fedavg on mnist5k (pathological, 20 clients) | dropout bernoulli p=0.5 | "
        "simulation, cpu | 30 rounds, 215,370 parameters"
    ]


def test_header_of_other_settings(tmp_path):
    lines: list[str] = []
    cfg = compose(
        [
            "dataset=digits",
            "partition=dirichlet",
            "partition.alpha=0.1",
            "dropout=persistent",
            "runtime=in_process",
            "device=cpu",
        ]
    )
    recorder = RunRecorder(tmp_path, cfg, echo=lines.append)
    recorder.feed(start_event(num_parameters=215370, num_clients=20, num_rounds=1))
    recorder.close()
    assert lines[0].endswith(
        "(dirichlet alpha=0.1, 20 clients) | dropout persistent p=0.5, period 5 | "
        "in_process, cpu | 1 round, 215,370 parameters"
    )


def test_the_simulation_says_it_is_starting_before_its_first_event(tmp_path):
    lines: list[str] = []
    recorder = RunRecorder(tmp_path, compose(MNIST), echo=lines.append)
    recorder.announce()
    recorder.close()
    assert lines == ["[fedimb] starting the simulation (Ray, 20 clients) ..."]
    assert launch_line(compose(["runtime=in_process"])) is None  # its first event comes at once


def test_round_lines_count_dropped_clients_apart_from_failures_and_show_elapsed_and_eta(recorded):
    recorder, lines, clock = recorded
    clock.now += 45.0
    recorder.feed(format_event("round", **round_event(1, 40.0, 0.30)))
    clock.now += 19.8
    recorder.feed(
        format_event("round", **round_event(2, 19.8, 0.40, ok=8, dropped=10, errors=1, rejected=1))
    )
    first, second = lines[1:]
    assert first == (
        "round  1/30 | acc 0.3000 f1 0.2900 loss 0.5000 | 9 ok, 11 dropped | "
        "40.0s  elapsed 45s  eta 19m20s"
    )
    assert "failed" not in first  # dropout is the availability model, not a fault
    # the ETA from round 2 alone (round 1 held the start-up): 28 rounds x 19.8 s
    assert second == (
        "round  2/30 | acc 0.4000 f1 0.3900 loss 0.5000 | 8 ok, 10 dropped, 2 failed | "
        "19.8s  elapsed 1m05s  eta 9m14s"
    )
    assert len(first) <= 100  # a 100-column terminal shows a round whole


def test_the_last_round_has_no_eta_and_the_run_ends_with_the_final_test_accuracy(recorded):
    recorder, lines, clock = recorded
    for number in range(1, 31):
        clock.now += 8.4
        recorder.feed(
            format_event("round", **round_event(number, 8.0, 0.82 if number == 27 else 0.80))
        )
    clock.now += 1.8
    assert lines[-1].endswith("8.0s  elapsed 4m12s")
    assert recorder.done_line() == (
        "[fedimb] done in 4m14s: final test accuracy 0.8000 (round 30)"  # no best on the test set
    )


def fake_sweep(root: Path, completed: list[bool]) -> Path:
    sweep = root / "multirun" / "2026-01-01" / "12-00-00"
    for number, done in enumerate(completed):
        job = sweep / f"{number}-fedavg-digits-s{number}"
        (job / ".hydra").mkdir(parents=True)
        (job / "config.yaml").write_text(f"seed: {number}\n")  # every job writes its config first
        if done:
            (job / "summary.json").write_text(json.dumps({"completed": True}))
    (sweep / "multirun.yaml").write_text("")
    return sweep


def test_a_sweep_ends_with_its_folder_its_tally_and_the_report_command(tmp_path, capsys):
    sweep = fake_sweep(tmp_path, [True, True, False])
    callback = SweepEnd()
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)
    assert capsys.readouterr().out.splitlines() == [
        f"[fedimb] sweep of 3 runs done (2 completed, 1 failed): {sweep}",
        f"[fedimb] compare them with: fedimb report {sweep}",
    ]


def test_a_tuning_trial_counts_as_one_run_completed_where_its_seeds_runs_are(tmp_path):
    sweep = fake_sweep(tmp_path, [False, False, False])
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    for job, seeds in zip(jobs, ([True, True], [True], [True, False])):
        for seed, done in zip((100, 101), seeds):
            (job / f"s{seed}").mkdir()
            (job / f"s{seed}" / "summary.json").write_text(json.dumps({"completed": done}))
    # both seeds; the first seed only (diverged, the second not run); one seed's run failed
    assert sweep_runs(sweep) == (2, 1)


def test_the_sweep_folder_is_absolute(tmp_path, monkeypatch):
    sweep = fake_sweep(tmp_path, [True])
    monkeypatch.chdir(tmp_path)
    assert sweep_end_lines(sweep.relative_to(tmp_path))[0].endswith(
        f"(1 completed, 0 failed): {sweep}"
    )


def test_curves_count_clients_in_whole_numbers_and_the_legend_covers_no_bar(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from fedimb.cli.rundir.files import plot_curves

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    rounds = [{"round": 0, "test": {"accuracy": 0.1, "loss": 2.3}}] + [
        round_event(n, 1.0, 0.2, ok=2, dropped=1) for n in range(1, 5)
    ]
    plot_curves(tmp_path / "curves.png", rounds, title="fedavg on digits")
    figure = figures[0]
    figure.canvas.draw()
    clients = figure.axes[2]
    visible = [
        t for t in clients.get_yticks() if clients.get_ylim()[0] <= t <= clients.get_ylim()[1]
    ]
    assert visible and all(float(t).is_integer() for t in visible)
    assert all(float(t).is_integer() for t in clients.get_xticks())
    legend = clients.get_legend().get_window_extent()
    assert not any(bar.get_window_extent().overlaps(legend) for bar in clients.patches)
    assert [t.get_text() for t in clients.get_legend().get_texts()] == ["ok", "dropped"]
    plt.close(figure)
