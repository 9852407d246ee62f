"""The ``fedimb`` front end end to end in simulation (starts Flower and Ray)."""

from __future__ import annotations

import concurrent.futures
import csv
import inspect
import json
from pathlib import Path

import pytest

from tests.conftest import (
    finish_fedimb,
    run_fedimb,
    smoke_groups,
    start_fedimb,
    with_rounds,
)

pytestmark = pytest.mark.slow


def read_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_fedavg_three_rounds_writes_a_complete_run_folder(tmp_path, no_leaked_processes):
    result = run_fedimb(
        "method=fedavg",
        "dataset=mnist5k",
        "partition=iid",
        "dropout=none",
        "num_clients=4",
        "num_rounds=3",
        "train.local_epochs=1",
        "seed=0",
        f"output.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    last_line = result.stdout.strip().splitlines()[-1]
    run_dir = Path(last_line)
    assert run_dir.is_absolute() and run_dir.is_dir() and str(run_dir).startswith(str(tmp_path))
    for name in (
        "config.yaml",
        "metrics.csv",
        "summary.json",
        "partition.json",
        "curves.png",
        "flwr.log",
    ):
        assert (run_dir / name).is_file(), name
    # progress was shown for every round
    assert [
        ln.split("|")[0].strip() for ln in result.stdout.splitlines() if ln.startswith("round")
    ] == ["round 0/3", "round 1/3", "round 2/3", "round 3/3"]

    summary = read_summary(run_dir)
    assert summary["completed"] and summary["rounds"] == 3 and summary["method"] == "fedavg"
    # four IID clients, one epoch each, three rounds: well above chance (0.1) on mnist5k
    assert summary["final_accuracy"] > 0.4
    assert summary["best_accuracy"] >= summary["final_accuracy"]
    assert 0 < summary["final_macro_f1"] <= 1
    # every round sends the model to 4 clients and receives 4 models back (float32)
    model_bytes = 4 * summary["num_parameters"]
    assert summary["bytes_down"] >= 3 * 4 * model_bytes
    assert summary["bytes_up"] >= 3 * 4 * model_bytes

    with open(run_dir / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    accuracy = {
        int(r["round"]): float(r["value"])
        for r in rows
        if r["split"] == "test" and r["metric"] == "accuracy"
    }
    assert sorted(accuracy) == [0, 1, 2, 3]
    assert accuracy[3] > accuracy[0]
    succeeded = [float(r["value"]) for r in rows if r["metric"] == "succeeded"]
    assert succeeded == [4.0, 4.0, 4.0]
    recalls = [r for r in rows if r["round"] == "3" and r["metric"].startswith("recall_class_")]
    assert len(recalls) == 10

    partition = json.loads((run_dir / "partition.json").read_text())
    assert partition["num_clients"] == 4 and sum(partition["client_sizes"]) == 4000


NORMALIZED = ["fedavg", "fedprox", "scaffold", "fednova", "fedbabu", "fedavgm"]


def start_sweep(root, methods, *overrides):
    # in the simulation one Ray actor per run (2 CPUs per client): two sweeps share the
    # machine's 2 cores; the in-process runtime has no actors to size
    actors = [] if "runtime=in_process" in overrides else ["runtime.num_cpus_per_client=2"]
    return start_fedimb(
        "-m",
        f"method={','.join(methods)}",
        "dataset=digits",
        "num_clients=3",
        "train.local_epochs=1",
        "dropout=none",
        "seed=1",
        *actors,
        *overrides,
        f"output.root={root}",
    )


def keeps_client_state(method: str) -> bool:
    """Whether the method's client saves state in ``Context.state`` between rounds (which
    the simulation must carry from one actor message to the next)."""
    from fedimb.app.configuration.compose import compose, import_class

    cls = import_class(str(compose([f"method={method}"]).method.client._target_))
    return any(
        "self.save_state(" in inspect.getsource(c)
        for c in cls.__mro__
        if c.__module__.startswith("clients.") and c.__name__ != "BaseClient"
    )


@pytest.mark.timeout(3600)  # a safety net: 37 methods' sweeps on a machine busy with others
def test_every_method_runs_two_rounds_in_a_sweep(tmp_path, no_leaked_processes):
    """Hydra sweeps over all configured methods: one run folder per job, each complete.

    In the simulation: the contribution-normalisation switch on every strategy it names,
    every method whose YAML declares shortest-run settings (``smoke``: FedConcat's stages,
    Astraea's chains) in one sweep per setting, and every other method whose client keeps
    state between rounds in two halves. The stateless rest sweep in process (the same
    strategy and client code; each also trains in tests/unit/test_methods.py). Two
    streams of sweeps side by side."""
    from fedimb.app.configuration.compose import group_choices

    groups = smoke_groups([m for m in group_choices("method") if m not in NORMALIZED])
    plain = groups.pop(())
    stateful = [m for m in plain if keeps_client_state(m)]
    stateless = [m for m in plain if m not in stateful]
    half = len(stateful) // 2
    named = [
        (f"s{i}", methods, with_rounds(smoke, 2))
        for i, (smoke, methods) in enumerate(groups.items())
    ]
    # about equally long (measured: the normalised sweep takes as long as the named ones)
    streams = [
        [("a", stateful[:half], ["num_rounds=2"]), *named],
        [
            ("normalized", NORMALIZED, ["num_rounds=2", "normalize=latent_cosine"]),
            ("b", stateful[half:], ["num_rounds=2"]),
            ("c", stateless, ["num_rounds=2", "runtime=in_process"]),
        ],
    ]

    def run_stream(sweeps):
        return [
            finish_fedimb(start_sweep(tmp_path / name, methods, *extra), timeout=1800)
            for name, methods, extra in sweeps
        ]

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = [r for stream in pool.map(run_stream, streams) for r in stream]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    summaries = [
        json.loads(p.read_text())
        for p in sorted(tmp_path.glob("*/multirun/*/*/*/summary.json"))
        if p.relative_to(tmp_path).parts[0] != "normalized"
    ]
    methods = plain + [m for group in groups.values() for m in group]
    normalized = [
        json.loads(p.read_text())
        for p in sorted(tmp_path.glob("normalized/multirun/*/*/*/summary.json"))
    ]
    assert sorted(s["method"] for s in normalized) == sorted(NORMALIZED)
    for run_dir in tmp_path.glob("normalized/multirun/*/*/*/"):
        with open(run_dir / "metrics.csv") as fh:
            assert sum(r["metric"].startswith("contribution.") for r in csv.DictReader(fh)) == 2 * 3
    assert sorted(s["method"] for s in summaries) == sorted(methods)
    for summary in summaries + normalized:
        assert summary["completed"] and summary["rounds"] >= 2 and summary["seed"] == 1, summary
        assert summary["final_accuracy"] is not None and summary["bytes_up"] > 0


def round_scores(run_dir: Path) -> list[tuple]:
    """(round, test accuracy, test loss, client metrics) of every round a run reported."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [
        (e["round"], e["test"].get("accuracy"), e["test"].get("loss"), e.get("train"))
        for e in events
        if e["event"] == "round"
    ]


def test_in_process_runtime_repeats_the_simulation_to_the_last_bit(tmp_path, no_leaked_processes):
    """runtime=in_process drives the same strategy and clients without Flower's runtime:
    with the same seed every round's test scores and client metrics equal the
    simulation's exactly (dropout, client state, payloads and a convolutional model included)."""
    methods = ["fedavg", "scaffold", "grpfed"]
    common = [
        "-m",
        f"method={','.join(methods)}",
        "dataset=digits",
        "model=cnn28",
        "num_clients=3",
        "num_rounds=3",
        "train.local_epochs=1",
        "seed=2",
    ]
    simulated = start_fedimb(*common, f"output.root={tmp_path / 'simulation'}")
    in_process = start_fedimb(
        *common, "runtime=in_process", f"output.root={tmp_path / 'in_process'}"
    )
    for proc in (simulated, in_process):  # side by side: the in-process sweep needs one core
        result = finish_fedimb(proc)
        assert result.returncode == 0, result.stderr[-3000:]
    for method in methods:
        runs = {
            runtime: next(tmp_path.glob(f"{runtime}/multirun/*/*/*-{method}-digits-s2"))
            for runtime in ("simulation", "in_process")
        }
        assert read_summary(runs["in_process"])["runtime"] == "in_process"
        scores = {runtime: round_scores(run_dir) for runtime, run_dir in runs.items()}
        assert len(scores["simulation"]) == 4, method
        assert scores["in_process"] == scores["simulation"], method


def test_sigterm_stops_the_run_and_every_flower_process(tmp_path, no_leaked_processes):
    import time

    proc = start_fedimb("num_clients=3", "num_rounds=200", f"output.root={tmp_path}")
    deadline = time.monotonic() + 300
    while not list(tmp_path.rglob("superlink.log")) and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(15)  # the simulation is starting or running
    proc.terminate()
    result = finish_fedimb(proc, timeout=120)
    assert result.returncode == 128 + 15
    # no_leaked_processes checks that the SuperLink, the simulation and Ray are gone
