"""Reading the data files the benchmark scripts publish under docs/tables/data/."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np


def read_data(path: Path) -> list[dict[str, str]]:
    """The rows of a data file (CSV with a header)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def floats(rows: list[dict[str, str]], key: str) -> np.ndarray:
    """Column ``key`` of a data file's rows as numbers; NaN where a cell is empty (not
    measured)."""
    return np.array([float(row[key]) if row[key] != "" else math.nan for row in rows])
