"""Every cell of the fault matrix (benchmarks/faults.py), as a test: the fault injected
into a real run of its runtime, then judged as the table judges it (survived, counted
with its cause in events.jsonl, metrics.csv and on the console, nothing lost from the
run folder, the bad update absent from the global model).

The in-process cells run in ``make test`` (about a minute); the simulation and
deployment cells start Flower and take about 17 minutes: ``make test-faults``."""

from __future__ import annotations

import time

import pytest

from benchmarks.faults import (
    BAD_UPDATES,
    FAULTS,
    NOT_APPLICABLE,
    RUNTIMES,
    Timing,
    causes,
    one_cell,
)
from tests.integration.matrix_federation import MatrixFederation

#: short round timeouts where rounds are short; a deployed round takes up to 25 s on a busy
#: 2-core machine
TIMINGS = {
    "in_process": Timing(round_timeout=5, hang=8),
    "simulation": Timing(round_timeout=30, hang=40),
    "deployment": Timing(),
}
MARKS = {
    "in_process": [],
    "simulation": [pytest.mark.slow, pytest.mark.fault_matrix],
    "deployment": [pytest.mark.slow, pytest.mark.fault_matrix],
}
CELLS = [
    pytest.param(runtime, fault, marks=MARKS[runtime], id=f"{runtime}-{fault}")
    for runtime in RUNTIMES
    for fault in FAULTS
    if (fault, runtime) not in NOT_APPLICABLE
]


class Matrix(MatrixFederation):
    """The cells run so far, in one output folder, with one local federation for the
    deployment cells; a bad update's cell first runs its reference (client 1 raising)."""

    def __init__(self, out):
        super().__init__(out)
        self.cells = {}

    def cell(self, fault: str, runtime: str):
        if fault in BAD_UPDATES:
            self.cell("raise", runtime)
        if (fault, runtime) not in self.cells:
            federation = self.federation_for(runtime)
            self.cells[fault, runtime] = one_cell(
                fault, runtime, self.out, federation, TIMINGS[runtime]
            )
            if (
                federation is not None and fault == "kill_worker"
            ):  # SuperNode 1 back for the next cells
                federation.start_node(1)
                time.sleep(5)
        return self.cells[fault, runtime]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    cells = Matrix(tmp_path_factory.mktemp("faults"))
    yield cells
    cells.close()


@pytest.mark.parametrize(("runtime", "fault"), CELLS)
def test_cell(runtime, fault, matrix):
    cell = matrix.cell(fault, runtime)
    assert cell.survived, cell.detail
    assert cell.lost_nothing, cell.detail
    if FAULTS[fault][1] != "-":
        assert cell.counted, cell.detail
        assert any(cause in cell.detail for cause in causes(fault, runtime)), cell.detail
