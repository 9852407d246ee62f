"""The fault and attack matrices' figures are drawn from the verdicts their scripts write:
one row per cell, a check True, False or empty (no such cell, or not measured)."""

from __future__ import annotations

from benchmarks import attacks, faults


def test_the_fault_matrix_writes_each_cells_checks():
    cells = [
        faults.Cell("raise", "in_process", True, True, False, "detail | with a pipe"),
        faults.Cell("kill_worker", "in_process", None, None, None, "n/a"),
    ]
    assert faults.grid_rows(cells) == [
        {
            "fault": "raise",
            "runtime": "in_process",
            "survived": True,
            "counted": True,
            "lost_nothing": False,
        },
        {
            "fault": "kill_worker",
            "runtime": "in_process",
            "survived": None,
            "counted": None,
            "lost_nothing": None,
        },
    ]


def test_the_attack_matrix_writes_every_row_and_runtime_measured_or_not():
    name, row = next(iter(attacks.ROWS.items()))
    measured = attacks.Cell(name, row.runtimes[0], True, False, True, 0.9, 0.9, "x")
    rows = attacks.grid_rows({(name, row.runtimes[0]): measured})
    assert len(rows) == sum(len(r.runtimes) for r in attacks.ROWS.values())
    assert rows[0] == {
        "attack": name,
        "runtime": row.runtimes[0],
        "survived": True,
        "counted": False,
        "unharmed": True,
    }
    assert all(r["survived"] is None for r in rows[1:])  # not measured
