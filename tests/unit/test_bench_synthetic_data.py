"""The Synthetic figures are drawn from the numbers benchmarks/accuracy/synthetic.py writes
beside its tables: the same numbers the table rounds."""

from __future__ import annotations

import pytest

from benchmarks import common
from benchmarks.accuracy import synthetic


def test_mean_and_sample_std_over_draws_in_percent():
    assert common.mean_and_std([0.5, 0.7]) == pytest.approx((60.0, 14.142135623730951))
    assert common.mean_and_std([0.25]) == (25.0, None)  # one draw has no spread
    assert common.mean_and_std([1200.0, None], scale=1.0) == (1200.0, None)
    assert common.mean_and_std([None]) == (None, None)  # nothing measured


def test_the_draws_figure_data_are_the_tables_numbers_unrounded():
    lines, points = synthetic.draws_table([0, 1], rounds=20)
    assert [p["draw"] for p in points] == [0, 1]
    for line, point in zip(lines[2:], points):
        cells = [c.strip() for c in line.strip("|").split("|")]
        shown = [float(c) for c in cells[3:]]
        measured = [
            point[k]
            for k in (
                "largest_share",
                "ten_largest_share",
                "rounds_drawing_largest",
                "rounds_drawing_smaller_half",
            )
        ]
        assert shown == [round(v, 1) for v in measured]
