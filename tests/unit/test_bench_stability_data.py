"""The stability figure is drawn from the rows benchmarks/accuracy/stability.py writes: the
final accuracy (%, mean over seeds) and the collapsed runs of each row and setting."""

from __future__ import annotations

import pytest

from benchmarks.accuracy import stability


def test_each_row_and_setting_writes_its_mean_final_accuracy_and_collapsed_runs(monkeypatch):
    scores = {
        "a": {"final": 0.5, "best": 0.6, "mean": 0.4, "collapsed": False, "nonfinite": 0},
        "b": {"final": 0.1, "best": 0.3, "mean": 0.2, "collapsed": True, "nonfinite": 2},
    }
    monkeypatch.setattr(stability, "run_scores", lambda run: scores[run])
    runs = {("fedavg", "0", "0.1", 0): "a", ("fedavg", "0", "0.1", 1): "b"}
    _, points = stability.table_lines(["fedavg"], [("0", "0.1")], [0, 1], runs)
    assert points == [
        {
            "method": "fedavg",
            "momentum": "0",
            "alpha": "0.1",
            "final_accuracy": pytest.approx(30.0),
            "collapsed": 1,
            "runs": 2,
        }
    ]
