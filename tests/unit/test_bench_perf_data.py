"""The performance figures are drawn from the numbers their scripts write: the rows built
from a script's measurements, checked on hand-made ones."""

from __future__ import annotations

from benchmarks.perf import breakdown, edge_node, gpu_methods


def test_the_breakdown_writes_round_1_and_the_mean_of_later_rounds_per_phase():
    result = {"runtime": "simulation", "phases": {"test": {1: 0.5, 2: 0.1, 3: 0.3}}}
    rows = breakdown.figure_rows([result])
    test = [r for r in rows if r["phase"] == "test"]
    assert test == [
        {"column": "simulation: round 1", "phase": "test", "seconds": 0.5},
        {"column": "simulation: rounds 2+", "phase": "test", "seconds": 0.2},
    ]
    # a phase the run did not time is not measured, not zero
    assert {r["seconds"] for r in rows if r["phase"] == "discover"} == {None}


def test_the_edge_node_writes_each_phases_range_over_rounds_per_node():
    emulated = {"ready": 20.0, "client0": [{"train": 26.0, "model": 0.0}, {"train": 27.5}]}
    native = {"ready": 6.0, "client0": [{"train": 0.12}, {"train": 0.11}]}
    assert edge_node.range_rows(emulated, native, "arm64") == [
        {"phase": "start-up", "device": "arm64, emulated", "low": 20.0, "high": 20.0},
        {"phase": "train", "device": "arm64, emulated", "low": 26.0, "high": 27.5},
        {"phase": "start-up", "device": "native", "low": 6.0, "high": 6.0},
        {"phase": "train", "device": "native", "low": 0.11, "high": 0.12},
    ]  # the model phase took no time on either: left out


def test_a_method_that_failed_on_a_device_has_no_seconds_there():
    data = {
        "rows": [
            {"method": "fedavg", "cuda": {"seconds": 0.2}, "cpu": {"seconds": 1.0}},
            {"method": "ccvr", "cuda": {"error": "out of memory"}, "cpu": {"seconds": 1.2}},
        ]
    }
    assert gpu_methods.figure_rows(data) == [
        {"method": "fedavg", "gpu_seconds": 0.2, "cpu_seconds": 1.0},
        {"method": "ccvr", "gpu_seconds": None, "cpu_seconds": 1.2},
    ]
